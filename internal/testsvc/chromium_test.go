package testsvc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Fatalf and Skipf record the outcome and
// end the goroutine, as the real ones do, without ending the test.
type recorder struct {
	testing.TB
	outcome, msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.outcome, r.msg = "fail", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.outcome, r.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs chromium on a recorder and returns what it returned, or how
// it ended.
func call(t *testing.T, env string, paths []string) (path, outcome, msg string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = chromium(r, env, paths)
		r.outcome = "ok"
	}()
	<-done
	return path, r.outcome, r.msg
}

func TestChromiumPicksTheVariableThenTheFirstExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "chromium")
	plain := filepath.Join(dir, "not-executable")
	other := filepath.Join(dir, "google-chrome")
	for path, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644, other: 0o755} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name    string
		require string
		env     string
		paths   []string
		want    string // the path returned, or "fail" or "skip"
	}{
		{"the variable wins", "", other, []string{exe}, other},
		{"a variable naming no executable fails", "", plain, []string{exe}, "fail"},
		{"the first executable of the list", "", "", []string{missing, plain, exe, other}, exe},
		{"none skips", "", "", []string{missing, plain}, "skip"},
		{"none fails when services are required", "1", "", []string{missing, plain}, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRequireServices, tc.require)
			path, outcome, msg := call(t, tc.env, tc.paths)
			got := path
			if outcome != "ok" {
				got = outcome
			}
			if got != tc.want {
				t.Fatalf("got %q (%s), want %q", got, msg, tc.want)
			}
			if outcome != "ok" && !strings.Contains(msg, EnvChromium) {
				t.Errorf("the message %q does not name %s", msg, EnvChromium)
			}
		})
	}
}
