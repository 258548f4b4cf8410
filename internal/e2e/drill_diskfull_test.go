package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// mountTmpfs mounts a tmpfs of size at dir for the test's lifetime. It
// needs root; without it the test skips (fails under
// KICI_TEST_REQUIRE_SERVICES=1).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testsvc.RequireServices() {
			t.Fatalf("this drill mounts a tmpfs and needs root, which %s=1 requires", testsvc.EnvRequireServices)
		}
		t.Skip("mounting a tmpfs needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes path until the file system holding it has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	// Single bytes too, so not even a page is left.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
}

// TestDrillDataDirFull: the whole data dir (database and logs) is a small
// tmpfs that fills up while a job prints 90,000 lines. The job must not
// stay running, the agent must not reconnect in a loop, and once space is
// back the job ends failure naming the lack of space, with the gap in its
// log marked (never "success" with lines silently missing).
func TestDrillDataDirFull(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	mountTmpfs(t, dataDir, "16m")
	marks := t.TempDir()
	o := startOrchestrator(t, "", "KICI_DATA_DIR="+dataDir)
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  loud:
    steps:
      - run: |
          echo $$ > %[1]s/shell.tmp; mv %[1]s/shell.tmp %[1]s/shell
          while [ ! -e %[1]s/go ]; do sleep 0.05; done
          for i in $(seq 1 90000); do echo "line $i of a job whose output fills the orchestrator's disk"; done
`, marks)})
	startAgent(t, o, "", "loud", nil)
	id := o.push(t)
	waitFor(t, 60*time.Second, "the step to start", func() bool { return fileExists(filepath.Join(marks, "shell")) })
	shell := readLines(t, filepath.Join(marks, "shell"))
	t.Cleanup(func() { killLine(shell) })
	var pid int
	if _, err := fmt.Sscan(shell[0], &pid); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dataDir, "filler")
	fill(t, filler)
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	// The orchestrator notices it cannot store the job's output.
	waitFor(t, 60*time.Second, "the orchestrator to report the full disk", func() bool {
		return strings.Contains(o.output.String(), "no space left on device") || strings.Contains(o.output.String(), "database or disk is full")
	})
	// The step ends, run through or stopped by the orchestrator, while
	// the disk is still full.
	waitFor(t, 120*time.Second, "the step to end", func() bool { return !alive(pid) })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
	j := job(t, r, "loud")
	if r.Status != "failure" || j.Status != "failure" || !strings.Contains(strings.ToLower(j.Error), "no space") {
		t.Errorf("run %s, job %s (%q): want failure naming the lack of space", r.Status, j.Status, j.Error)
	}
	if n := strings.Count(o.output.String(), `msg="agent registered" agent_id=loud`); n > 3 {
		t.Errorf("the agent registered %d times, want at most 3 (no reconnect loop)", n)
	}
	// The failure can be recorded in the database before the marker
	// fits in the log (the database may have free pages inside its file
	// while the log needs new blocks): the dispatcher writes the marker at
	// its next sweep once there is room, so wait for it, bounded.
	var lines []string
	marked := func() bool {
		lines = o.logs(t, id, "loud")
		for _, l := range lines {
			if strings.Contains(l, "not stored") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !marked() {
		if time.Now().After(deadline) {
			t.Fatalf("log of %d lines has no marker of the lines that were not stored, 30 s after the run ended", len(lines))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
