package vmproc_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeFirecracker is testdata/fakefc, built static by TestMain: a stand-in
// for Firecracker that sleeps until killed. The tests cannot re-run the
// test binary as the child, as other process tests do: the child must run
// chrooted in a jail, where only a static binary starts, and a -race test
// binary links cgo.
var fakeFirecracker string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kici-vmproc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fakeFirecracker = filepath.Join(dir, "fakefc")
	build := exec.Command("go", "build", "-o", fakeFirecracker, "./testdata/fakefc")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testdata/fakefc: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
