//go:build linux

package runner_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kici-dev/kici/internal/testsvc"
)

// images are the images the container tests run, built once per test
// binary from Debian's busybox-static FROM scratch (no registry is
// involved) and removed by TestMain.
type images struct {
	// plain has busybox and its applets, and no bash.
	plain string
	// bash adds a bash: a script that runs busybox's sh, which knows
	// pipefail, so that the default shell's choice shows.
	bash string
	// svc runs /start.sh (an HTTP server on :8080 answering $ANSWER) and
	// declares a HEALTHCHECK that passes once the server is up (never with
	// SICK set).
	svc string
	// svcNoHealth is svc without the HEALTHCHECK.
	svcNoHealth string
}

func (im images) all() []string { return []string{im.plain, im.bash, im.svc, im.svcNoHealth} }

var (
	imagesOnce  sync.Once
	testImages  images
	imagesErr   error
	imagesBuilt bool
)

// serviceStart is the svc images' /start.sh.
const serviceStart = `#!/bin/sh
echo "service starting as $(hostname)"
if [ -n "$SERVICE_SAY" ]; then echo "$SERVICE_SAY"; fi
if [ -n "$EXIT_WITH" ]; then exit "$EXIT_WITH"; fi
mkdir -p /www /tmp
echo "${ANSWER:-hello from the service}" > /www/index.html
if [ -z "$SICK" ]; then touch /tmp/healthy; fi
exec httpd -f -v -p 8080 -h /www
`

func TestMain(m *testing.M) {
	code := m.Run()
	if imagesBuilt {
		for _, img := range testImages.all() {
			_ = exec.Command("docker", "rmi", "-f", img).Run()
		}
	}
	os.Exit(code)
}

// docker runs the docker CLI and returns its trimmed output.
func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// requireDocker skips the test without a reachable Docker engine (fails
// it when KICI_TEST_REQUIRE_SERVICES=1) and returns the test images.
func requireDocker(t *testing.T) images {
	t.Helper()
	if out, err := docker("info", "--format", "{{.ServerVersion}}"); err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("no Docker engine is reachable and %s=1 requires one: %v: %s", testsvc.EnvRequireServices, err, out)
		}
		t.Skipf("no Docker engine is reachable: %v (set %s=1 to fail instead)", err, testsvc.EnvRequireServices)
	}
	imagesOnce.Do(func() { imagesErr = buildImages() })
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return testImages
}

func buildImages() error {
	suffix := randomHex(6)
	im := images{
		plain:       "kici-runner-test-plain:" + suffix,
		bash:        "kici-runner-test-bash:" + suffix,
		svc:         "kici-runner-test-svc:" + suffix,
		svcNoHealth: "kici-runner-test-svc-nohealth:" + suffix,
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("read /bin/busybox (install busybox-static): %w", err)
	}
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	dir, err := os.MkdirTemp("", "kici-runner-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), busybox, 0o755); err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(bin, applet)); err != nil {
			return err
		}
	}
	files := map[string]string{
		"start.sh":         serviceStart,
		"bash":             "#!/bin/sh\nexec /bin/busybox sh \"$@\"\n",
		"Dockerfile.plain": "FROM scratch\nCOPY bin /bin\nENV PATH=/bin\n",
		"Dockerfile.bash":  "FROM " + im.plain + "\nCOPY bash /bin/bash\n",
		"Dockerfile.svc-nohealth": "FROM " + im.plain + "\nCOPY start.sh /start.sh\n" +
			"CMD [\"/start.sh\"]\n",
		"Dockerfile.svc": "FROM " + im.svcNoHealth + "\n" +
			"HEALTHCHECK --interval=300ms --timeout=2s --retries=1000 CMD [\"test\", \"-f\", \"/tmp/healthy\"]\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			return err
		}
	}
	imagesBuilt = true
	testImages = im
	for _, b := range []struct{ file, tag string }{
		{"Dockerfile.plain", im.plain},
		{"Dockerfile.bash", im.bash},
		{"Dockerfile.svc-nohealth", im.svcNoHealth},
		{"Dockerfile.svc", im.svc},
	} {
		if out, err := docker("build", "-q", "-f", filepath.Join(dir, b.file), "-t", b.tag, dir); err != nil {
			return fmt.Errorf("docker build %s: %v: %s", b.tag, err, out)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
