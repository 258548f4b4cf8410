package logs_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/logs"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

// sharedRun creates a run of two jobs in db, for the log rows' keys.
func sharedRun(t *testing.T, db *store.DB) (runID, jobA, jobB string) {
	t.Helper()
	var jobs []store.NewJob
	for _, name := range []string{"a", "b"} {
		jobs = append(jobs, store.NewJob{Spec: workflow.Job{Name: name, Base: name, Steps: []workflow.Step{{Name: "s", Run: "true"}}},
			Status: store.JobQueued})
	}
	run, err := db.CreateRun(t.Context(), store.NewRun{Source: "repo", Workflow: "ci", WorkflowFile: ".kici/workflows/ci.yml",
		Event: json.RawMessage(`{}`), EventKind: "push", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567",
		Plan: workflow.Workflow{Name: "ci"}, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID, run.Jobs[0].ID, run.Jobs[1].ID
}

func newShared(t *testing.T, db *store.DB) *logs.Store {
	t.Helper()
	st, err := logs.New(slog.New(slog.NewTextHandler(t.Output(), nil)), logs.Config{Dir: t.TempDir(), SubscriberBuffer: 64, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSharedStoreReadsAsTheFileStore: the same appends (replays, a new
// attempt, several steps and jobs) read back line for line, cursor for
// cursor, from a shared store as from the file store.
func TestSharedStoreReadsAsTheFileStore(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		runID, a, b := sharedRun(t, db)
		file, shared := newStore(t, ""), newShared(t, db)
		type app struct {
			key   logs.StepKey
			seq   uint64
			lines []logs.Line
		}
		k := func(job string, step, attempt int) logs.StepKey {
			return logs.StepKey{RunID: runID, JobID: job, Step: step, Attempt: attempt}
		}
		apps := []app{
			{k(a, logs.SetupStep, 1), 1, mkLines("setup", 2)},
			{k(a, 0, 1), 2, mkLines("a0", 3)},
			{k(b, 0, 1), 1, mkLines("b0", 1)},
			{k(a, 0, 1), 2, mkLines("replay", 1)},
			{k(a, 1, 1), 3, nil},
			{k(a, 1, 1), 4, mkLines("a1 <b>\"é\"", 2)},
			{k(a, 0, 2), 1, mkLines("attempt2", 2)},
			{k(a, 0, 1), 9, mkLines("old attempt", 1)},
		}
		for _, st := range []*logs.Store{file, shared} {
			for _, x := range apps {
				if _, err := st.Append(t.Context(), x.key, x.seq, x.lines); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, key := range []logs.StepKey{k(a, logs.SetupStep, 0), k(a, 0, 0), k(a, 1, 0), k(b, 0, 0), k(b, 3, 0)} {
			for _, limit := range []int{1, 2, 0} {
				want, got := readAll(t, file, key, limit), readAll(t, shared, key, limit)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%v, limit %d: shared differs from file (-file +shared):\n%s", key, limit, diff)
				}
			}
			fs, _ := file.Size(t.Context(), key)
			ss, err := shared.Size(t.Context(), key)
			if err != nil || fs != ss {
				t.Errorf("%v: size %d (%v), file store %d", key, ss, err, fs)
			}
			if fs > 0 {
				if _, _, err := shared.Read(t.Context(), key, fs+1, 0); !errors.Is(err, logs.ErrBadCursor) {
					t.Errorf("%v: cursor past the end: %v, want ErrBadCursor", key, err)
				}
				if _, _, err := shared.Read(t.Context(), key, 3, 0); !errors.Is(err, logs.ErrBadCursor) {
					t.Errorf("%v: cursor inside a line: %v, want ErrBadCursor", key, err)
				}
			}
		}
		// As with files, lines written by WriteAll can be read before its
		// Sync: the dispatcher commits a job's final status while the log
		// syncs, and a reader of the ended job must find every line.
		pending := shared.WriteAll(t.Context(), []logs.Chunk{{Key: k(b, 5, 1), Seq: 7, Lines: mkLines("pending", 1)}})
		if got := readAll(t, shared, k(b, 5, 0), 0); len(got) != 1 || got[0].Text != "pending 0" {
			t.Errorf("read before Sync: %+v, want the line written", got)
		}
		if res := pending.Sync(); res[0].Err != nil || !res[0].Stored {
			t.Errorf("sync: %+v", res[0])
		}
		if err := shared.RemoveRun(t.Context(), runID); err != nil {
			t.Fatal(err)
		}
		if lines := readAll(t, shared, k(a, 0, 0), 0); len(lines) != 0 {
			t.Errorf("%d lines after RemoveRun", len(lines))
		}
	})
}

// TestSharedStoreEventsReachAnotherStore: a chunk stored through one
// shared store is published to its own subscribers and handed to OnLog;
// another store on the same database publishes it to its subscribers from
// the stored rows (PublishStored), with the same lines and cursors.
func TestSharedStoreEventsReachAnotherStore(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		runID, a, _ := sharedRun(t, db)
		here, there := newShared(t, db), newShared(t, db)
		relayed := make(chan logs.Event, 4)
		here.OnLog(func(ev logs.Event) { relayed <- ev })
		local, stopLocal := here.Subscribe(runID)
		defer stopLocal()
		remote, stopRemote := there.Subscribe(runID)
		defer stopRemote()
		key := logs.StepKey{RunID: runID, JobID: a, Step: 0, Attempt: 1}
		mustAppend(t, here, key, 1, mkLines("first", 1))
		mustAppend(t, here, key, 2, mkLines("second", 3))
		for range 2 {
			ev := <-relayed
			if err := there.PublishStored(t.Context(), logs.StepKey{RunID: runID, JobID: ev.Log.JobID, Step: ev.Log.Step},
				ev.Log.Seq, ev.Log.Cursor, ev.Log.Next); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			var l, r logs.Event
			select {
			case l = <-local:
			case <-time.After(5 * time.Second):
				t.Fatal("no local event")
			}
			select {
			case r = <-remote:
			case <-time.After(5 * time.Second):
				t.Fatal("no event on the other store")
			}
			if diff := cmp.Diff(l, r); diff != "" {
				t.Errorf("event %d (-local +other store):\n%s", i, diff)
			}
		}
		if err := there.PublishStored(t.Context(), key, 3, 0, 5); err == nil {
			t.Error("PublishStored of a range that is no stored chunk succeeded")
		}
	})
}
