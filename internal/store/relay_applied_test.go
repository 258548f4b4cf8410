package store

import (
	"errors"
	"sync"
	"testing"
)

func TestApplyRelayedOnceInOrder(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"})
		jobID := ids[0]
		add := func(seq, prev uint64, detail string) (RelayVerdict, uint64) {
			t.Helper()
			v, applied, err := db.ApplyRelayed(ctx, "ob-1", "scaler", "worker-a", seq, prev, func(tx *Tx) error {
				_, err := tx.AddJobEvent(ctx, JobEvent{JobID: jobID, RunID: runID, Type: "scaler.provisioning", Detail: detail})
				return err
			})
			if err != nil {
				t.Fatalf("apply %d: %v", seq, err)
			}
			return v, applied
		}
		if v, a := add(3, 0, "first"); v != RelayApplied || a != 3 {
			t.Fatalf("first entry: got (%v, %d), want applied at 3", v, a)
		}
		if v, a := add(3, 0, "first again"); v != RelayDuplicate || a != 3 {
			t.Fatalf("resent entry: got (%v, %d), want duplicate at 3", v, a)
		}
		// 7 follows 5, which never arrived: refused, nothing written.
		if v, a := add(7, 5, "after a gap"); v != RelayGap || a != 3 {
			t.Fatalf("entry after a gap: got (%v, %d), want gap at 3", v, a)
		}
		if v, a := add(5, 3, "second"); v != RelayApplied || a != 5 {
			t.Fatalf("second entry: got (%v, %d), want applied at 5", v, a)
		}
		// An apply that fails leaves the entry unapplied.
		boom := errors.New("boom")
		if _, _, err := db.ApplyRelayed(ctx, "ob-1", "scaler", "worker-a", 7, 5, func(tx *Tx) error {
			if _, err := tx.AddJobEvent(ctx, JobEvent{JobID: jobID, RunID: runID, Type: "scaler.provisioning", Detail: "rolled back"}); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("failing apply: got %v, want boom", err)
		}
		if v, a := add(7, 5, "third"); v != RelayApplied || a != 7 {
			t.Fatalf("third entry: got (%v, %d), want applied at 7", v, a)
		}
		// Another outbox (a worker that lost its file) starts afresh.
		if v, _, err := db.ApplyRelayed(ctx, "ob-2", "scaler", "worker-a", 1, 0, func(*Tx) error { return nil }); err != nil || v != RelayApplied {
			t.Fatalf("new outbox: got (%v, %v), want applied", v, err)
		}
		evs, err := db.ListJobEvents(ctx, jobID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Detail)
		}
		if want := []string{"first", "second", "third"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("job events: got %q, want %q", got, want)
		}
	})
}

// Two coordinators applying the same resent entry at once apply it once.
func TestApplyRelayedConcurrentResend(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"})
		var wg sync.WaitGroup
		var mu sync.Mutex
		verdicts := map[RelayVerdict]int{}
		for range 8 {
			wg.Go(func() {
				v, _, err := db.ApplyRelayed(ctx, "ob-c", "scaler", "worker-a", 1, 0, func(tx *Tx) error {
					_, err := tx.AddJobEvent(ctx, JobEvent{JobID: ids[0], RunID: runID, Type: "scaler.failed", Detail: "x"})
					return err
				})
				if err != nil {
					t.Errorf("apply: %v", err)
					return
				}
				mu.Lock()
				verdicts[v]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if verdicts[RelayApplied] != 1 || verdicts[RelayDuplicate] != 7 {
			t.Errorf("verdicts: got %v, want one applied and seven duplicates", verdicts)
		}
		evs, err := db.ListJobEvents(ctx, ids[0])
		if err != nil || len(evs) != 1 {
			t.Errorf("job events: got %d (%v), want 1", len(evs), err)
		}
	})
}
