//go:build linux

package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

// spareDirs lists the emptied job directories kept in work.
func spareDirs(t *testing.T, work string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(work, "spare-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestEndedJobDirIsEmptiedAndReused: what a job leaves in its directory is
// gone after Cleanup; the emptied directory is the next job's, which finds
// its TMPDIR empty.
func TestEndedJobDirIsEmptiedAndReused(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	r := newRunner(t, func(c *runner.Config) { c.WorkDir = work })
	first := dirJob(t, workflow.Step{Run: `echo secret > "$TMPDIR/a"; mkdir -p "$TMPDIR/d/e"; echo x > "$TMPDIR/d/e/f"`})
	if res := r.Run(context.Background(), first, newRecorder()); res.Status != runner.StatusSuccess {
		t.Fatalf("first job: %s %v", res.Status, res.Err)
	}
	spares := spareDirs(t, work)
	if len(spares) != 1 {
		t.Fatalf("spares after the first job: %v, want one", spares)
	}
	for _, part := range []string{"src", "scripts", "tmp"} {
		if left, err := os.ReadDir(filepath.Join(spares[0], part)); err != nil || len(left) != 0 {
			t.Errorf("spare's %s: %v (%v), want empty", part, left, err)
		}
	}
	ino := inode(t, spares[0])

	rec := newRecorder()
	second := dirJob(t, workflow.Step{Run: `ls -A "$TMPDIR" | wc -l; stat -c %i "$TMPDIR/.."`})
	second.ID = "job-2"
	if res := r.Run(context.Background(), second, rec); res.Status != runner.StatusSuccess {
		t.Fatalf("second job: %s %v", res.Status, res.Err)
	}
	rec.mu.Lock()
	lines := slices.Clone(rec.lines[0])
	rec.mu.Unlock()
	if len(lines) != 2 || lines[0] != "0" {
		t.Fatalf("second job's output: %q, want an empty TMPDIR (0) and its directory's inode", lines)
	}
	if lines[1] != strconv.FormatUint(ino, 10) {
		t.Errorf("second job's directory: inode %s, want the spare's %d", lines[1], ino)
	}
	if left := jobDirNames(t, work); len(left) != 0 {
		t.Errorf("job directories after both jobs: %v, want none", left)
	}
}

// TestTamperedJobDirIsNotReused: a job directory the job changed the shape
// of (a part replaced by a symbolic link, an extra entry, a mode changed)
// is removed, never emptied through the link nor given to another job.
func TestTamperedJobDirIsNotReused(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]string{
		"symlink": `rm -rf "$TMPDIR" && ln -s "$TARGET" "$TMPDIR"`,
		"extra":   `touch "$TMPDIR/../extra"`,
		"mode":    `chmod 755 "$TMPDIR"`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			work, target := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(target, "precious"), []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, func(c *runner.Config) { c.WorkDir = work })
			job := dirJob(t, workflow.Step{Run: script, Env: map[string]string{"TARGET": target}})
			if res := r.Run(context.Background(), job, newRecorder()); res.Status != runner.StatusSuccess {
				t.Fatalf("job: %s %v", res.Status, res.Err)
			}
			if spares := spareDirs(t, work); len(spares) != 0 {
				t.Errorf("spares: %v, want none", spares)
			}
			if left, _ := os.ReadDir(work); len(left) != 0 {
				t.Errorf("work dir after the job: %v, want empty", left)
			}
			if _, err := os.Stat(filepath.Join(target, "precious")); err != nil {
				t.Errorf("the link's target lost its file: %v", err)
			}
		})
	}
}
