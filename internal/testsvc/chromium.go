package testsvc

import (
	"os"
	"os/exec"
	"testing"
)

// EnvChromium names the Chromium (or Chrome) binary that browser tests
// drive; unset, Chromium looks in the usual places.
const EnvChromium = "KICI_TEST_CHROMIUM"

// chromiumPaths are where Chromium looks when KICI_TEST_CHROMIUM is unset:
// Debian's chromium package, then other distributions' names.
var chromiumPaths = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}

// Chromium returns the path of a Chromium binary for browser tests:
// KICI_TEST_CHROMIUM if set (a path, or a name looked up in PATH; the
// test fails if it names no executable), else the first executable of
// /usr/bin/chromium, /usr/bin/chromium-browser and /usr/bin/google-chrome.
// When there is none the test is skipped, or fails if services are
// required.
func Chromium(t testing.TB) string {
	t.Helper()
	return chromium(t, os.Getenv(EnvChromium), chromiumPaths)
}

func chromium(t testing.TB, env string, paths []string) string {
	t.Helper()
	if env != "" {
		// A name without a slash is looked up in PATH.
		path, err := exec.LookPath(env)
		if err != nil {
			t.Fatalf("%s=%s: %v", EnvChromium, env, err)
		}
		return path
	}
	for _, p := range paths {
		if executable(p) {
			return p
		}
	}
	if RequireServices() {
		t.Fatalf("no Chromium found (%s is not set and none of %v is executable), and %s=1 requires a browser (Debian: apt-get install chromium)",
			EnvChromium, paths, EnvRequireServices)
	}
	t.Skipf("no Chromium found (%s is not set and none of %v is executable): skipping the browser test (set %s=1 to fail instead)",
		EnvChromium, paths, EnvRequireServices)
	return ""
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
