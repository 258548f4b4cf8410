package logs_test

import (
	"errors"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/logs"
)

// TestSyncsPerJob checks the durability promise's cost: each chunk's data
// is synced once, each new file's directory once, each job directory's
// entry once per job, and the run directory's entry once per run.
func TestSyncsPerJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	c := countSyncs(st)
	a := logs.StepKey{RunID: "run", JobID: "job-a", Step: logs.SetupStep}
	mustAppend(t, st, a, 1, mkLines("setup", 1))
	a.Step = 0
	mustAppend(t, st, a, 2, mkLines("x", 2))
	mustAppend(t, st, a, 3, mkLines("y", 2))
	mustAppend(t, st, logs.StepKey{RunID: "run", JobID: "job-b", Step: 0}, 1, mkLines("b", 1))
	// A prepared job syncs its entries when prepared, not on its chunks.
	if err := st.Prepare(t.Context(), "run", "job-c"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := st.Prepare(t.Context(), "run", "job-c"); err != nil {
		t.Fatalf("prepare again: %v", err)
	}
	c.dirs.Store(0)
	before := c.dirSyncs()
	mustAppend(t, st, logs.StepKey{RunID: "run", JobID: "job-c", Step: logs.SetupStep}, 1, mkLines("setup", 1))
	mustAppend(t, st, logs.StepKey{RunID: "run", JobID: "job-c", Step: 0}, 2, mkLines("c", 1))
	mustAppend(t, st, logs.StepKey{RunID: "run", JobID: "job-c", Step: 0}, 3, mkLines("c", 1))

	want := map[string]int{
		dir:                                1, // the run's entry, once for both jobs
		filepath.Join(dir, "run"):          3, // each job's entry, once per job
		filepath.Join(dir, "run", "job-a"): 2, // its two files
		filepath.Join(dir, "run", "job-b"): 1,
		filepath.Join(dir, "run", "job-c"): 2, // its setup file, made when prepared, and its step's
	}
	if diff := cmp.Diff(want, c.dirSyncs()); diff != "" {
		t.Errorf("directory syncs (-want +got):\n%s", diff)
	}
	if got := c.dirs.Load(); got != 1 {
		t.Errorf("got %d directory syncs for the chunks of a prepared job (syncs before: %v), want 1 (its step's new file; the setup file was made when prepared)", got, before)
	}
	if got := c.files.Load(); got != 7 {
		t.Errorf("got %d file syncs, want 7 (one per chunk)", got)
	}

	// Removing the run forgets it: a new run directory is synced again.
	if err := st.RemoveRun(t.Context(), "run"); err != nil {
		t.Fatalf("remove run: %v", err)
	}
	mustAppend(t, st, logs.StepKey{RunID: "run", JobID: "job-d", Step: 0}, 1, mkLines("d", 1))
	if got := c.dirSyncs()[dir]; got != 2 {
		t.Errorf("got %d syncs of the root after the run was removed and written again, want 2", got)
	}
}

// TestFailedDirSyncIsRetried checks that a chunk whose directory sync fails
// is not reported stored, leaves its file empty, and that the next attempt
// syncs that directory again before reporting the chunk stored; and that
// what was stored is there for a new Store on the same directory.
func TestFailedDirSyncIsRetried(t *testing.T) {
	t.Parallel()
	for _, failing := range []string{"", "run", "run/job"} {
		t.Run("fail "+failing+"/", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := newStore(t, dir)
			failing := filepath.Join(dir, failing)
			var synced []string
			fail := true
			st.SetSyncHooks(func(string) error { return nil }, func(d string) error {
				if d == failing && fail {
					return syscall.EIO
				}
				synced = append(synced, d)
				return nil
			})
			key := logs.StepKey{RunID: "run", JobID: "job", Step: 0}
			lines := mkLines("x", 3)
			if ok, err := st.Append(t.Context(), key, 1, lines); ok || !errors.Is(err, syscall.EIO) {
				t.Fatalf("append with a failing directory sync: got stored %v, error %v; want not stored, EIO", ok, err)
			}
			if n, err := st.Size(t.Context(), key); err != nil || n != 0 {
				t.Fatalf("after the failed append: got size %d (%v), want 0", n, err)
			}
			fail = false
			synced = nil
			mustAppend(t, st, key, 1, lines)
			if !slices.Contains(synced, failing) {
				t.Errorf("directories synced on the retry: got %q, want %q among them", synced, failing)
			}

			reopened := newStore(t, dir)
			if diff := cmp.Diff(stored(1, 0, lines), readAll(t, reopened, key, 0)); diff != "" {
				t.Errorf("read after reopening (-want +got):\n%s", diff)
			}
			if ok, err := reopened.Append(t.Context(), key, 1, lines); ok || err != nil {
				t.Errorf("replay after reopening: got stored %v, error %v; want skipped", ok, err)
			}
		})
	}
}
