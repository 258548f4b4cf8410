package logs_test

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/logs"
)

// TestAppendAllSyncsOncePerFile: the chunks of one call are synced after
// the last write, each file once and each new file's directory once, and
// read back in order.
func TestAppendAllSyncsOncePerFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	c := countSyncs(st)
	setup := logs.StepKey{RunID: "run", JobID: "job", Step: logs.SetupStep}
	step := logs.StepKey{RunID: "run", JobID: "job", Step: 0}
	other := logs.StepKey{RunID: "run", JobID: "other", Step: 0}
	res := st.AppendAll(t.Context(), []logs.Chunk{
		{Key: setup, Seq: 1, Lines: mkLines("setup", 1)},
		{Key: step, Seq: 2, Lines: mkLines("a", 2)},
		{Key: step, Seq: 3, Lines: mkLines("b", 1)},
		{Key: step, Seq: 3, Lines: mkLines("replay", 1)},
		{Key: other, Seq: 1, Lines: mkLines("o", 1)},
	})
	want := []logs.Appended{{Stored: true}, {Stored: true}, {Stored: true}, {Stored: false}, {Stored: true}}
	if diff := cmp.Diff(want, res, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) })); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if got := c.files.Load(); got != 3 {
		t.Errorf("got %d file syncs, want 3 (one per file written)", got)
	}
	wantDirs := map[string]int{
		dir:                                1,
		filepath.Join(dir, "run"):          1, // both jobs' entries, at once
		filepath.Join(dir, "run", "job"):   1, // its two new files, at once
		filepath.Join(dir, "run", "other"): 1,
	}
	if diff := cmp.Diff(wantDirs, c.dirSyncs()); diff != "" {
		t.Errorf("directory syncs (-want +got):\n%s", diff)
	}
	wantStep := append(stored(2, 0, mkLines("a", 2)), stored(3, 0, mkLines("b", 1))...)
	if diff := cmp.Diff(wantStep, readAll(t, st, step, 100)); diff != "" {
		t.Errorf("step 0 (-want +got):\n%s", diff)
	}
}

// TestAppendAllConfinesAFailureToItsJob: a job whose sync fails gets the
// error for every one of its chunks of the call, keeps nothing of them and
// stores their replay; the other job of the call is stored and published.
func TestAppendAllConfinesAFailureToItsJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := newStore(t, dir)
	bad := logs.StepKey{RunID: "run", JobID: "bad", Step: 0}
	good := logs.StepKey{RunID: "run", JobID: "good", Step: 0}
	mustAppend(t, st, bad, 1, mkLines("before", 1))
	events, cancel := st.Subscribe("run")
	defer cancel()
	fail := true
	st.SetSyncHooks(func(path string) error {
		if fail && strings.Contains(path, "/bad/") {
			return syscall.ENOSPC
		}
		return nil
	}, func(string) error { return nil })
	res := st.AppendAll(t.Context(), []logs.Chunk{
		{Key: bad, Seq: 2, Lines: mkLines("lost", 1)},
		{Key: good, Seq: 1, Lines: mkLines("kept", 1)},
		{Key: logs.StepKey{RunID: "run", JobID: "bad", Step: 1}, Seq: 3, Lines: mkLines("lost too", 1)},
	})
	for _, i := range []int{0, 2} {
		if !errors.Is(res[i].Err, syscall.ENOSPC) || res[i].Stored {
			t.Errorf("chunk %d of the failing job: got %+v, want ENOSPC, not stored", i, res[i])
		}
		if res[i].Err != nil && !strings.Contains(res[i].Err.Error(), filepath.Join(dir, "run", "bad")) {
			t.Errorf("chunk %d: error %q does not name the file", i, res[i].Err)
		}
	}
	if res[1].Err != nil || !res[1].Stored {
		t.Errorf("chunk of the other job: got %+v, want stored", res[1])
	}
	ev := <-events
	if ev.Log == nil || ev.Log.JobID != "good" {
		t.Fatalf("first event after the call: got %+v, want the other job's chunk", ev)
	}
	select {
	case ev := <-events:
		t.Fatalf("got a second event %+v: the failed job's chunks were published", ev)
	default:
	}
	if diff := cmp.Diff(stored(1, 0, mkLines("before", 1)), readAll(t, st, bad, 100)); diff != "" {
		t.Errorf("failed job's step 0 after the failure (-want +got):\n%s", diff)
	}
	fail = false
	res = st.AppendAll(t.Context(), []logs.Chunk{{Key: bad, Seq: 2, Lines: mkLines("lost", 1)}})
	if res[0].Err != nil || !res[0].Stored {
		t.Fatalf("replay after the failure: got %+v, want stored", res[0])
	}
	want := append(stored(1, 0, mkLines("before", 1)), stored(2, 0, mkLines("lost", 1))...)
	if diff := cmp.Diff(want, readAll(t, st, bad, 100)); diff != "" {
		t.Errorf("failed job's step 0 after the replay (-want +got):\n%s", diff)
	}
}
