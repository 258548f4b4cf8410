package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScheduleFires(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		tick := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		fire := ScheduleFire{Source: "app", Workflow: "nightly", Tick: tick, Cron: "0 10 * * *", RunID: run.ID, FiredAt: tick.Add(time.Second)}
		if ok, err := db.ClaimScheduleTick(ctx, fire); err != nil || !ok {
			t.Fatalf("first claim: got (%v, %v), want true", ok, err)
		}
		again := fire
		again.RunID, again.Cron = "other-run", "0 10 * * 1"
		if ok, err := db.ClaimScheduleTick(ctx, again); err != nil || ok {
			t.Fatalf("second claim of the tick (another spec, another run): got (%v, %v), want false", ok, err)
		}
		// Another workflow, and the same workflow at another tick, are
		// claims of their own.
		other := fire
		other.Workflow, other.RunID = "weekly", "deleted-run"
		if ok, err := db.ClaimScheduleTick(ctx, other); err != nil || !ok {
			t.Fatalf("claim of another workflow's tick: got (%v, %v), want true", ok, err)
		}
		later := fire
		later.Tick, later.RunID = tick.Add(24*time.Hour), run.ID
		if ok, err := db.ClaimScheduleTick(ctx, later); err != nil || !ok {
			t.Fatalf("claim of the next tick: got (%v, %v), want true", ok, err)
		}
		last, err := db.LastScheduleFires(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []ScheduleFire{
			{Source: "app", Workflow: "nightly", Tick: later.Tick, Cron: "0 10 * * *", RunID: run.ID, FiredAt: later.FiredAt, RunStatus: run.Status},
			{Source: "app", Workflow: "weekly", Tick: tick, Cron: "0 10 * * *", RunID: "deleted-run", FiredAt: fire.FiredAt},
		}
		if diff := cmp.Diff(want, last); diff != "" {
			t.Errorf("last fires (-want +got):\n%s", diff)
		}
		// Pruning keeps the newest fire of each workflow, however old.
		n, err := db.PruneScheduleFires(ctx, tick.Add(48*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("prune: got (%d, %v), want 1 row deleted (nightly's first tick)", n, err)
		}
		if ok, _ := db.ClaimScheduleTick(ctx, later); ok {
			t.Errorf("the newest tick was claimable again after pruning")
		}
		if last2, _ := db.LastScheduleFires(ctx); len(last2) != 2 {
			t.Errorf("after pruning: got %d last fires, want 2", len(last2))
		}
	})
}

// TestClaimScheduleTickRace claims one tick from two handles on one
// database (two orchestrators) at once, many times: exactly one claim of
// each tick wins.
func TestClaimScheduleTickRace(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			a, b := twoHandles(t, e, newTestClock())
			tick := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
			for i := range 20 {
				tk := tick.Add(time.Duration(i) * time.Minute)
				var wins atomic.Int32
				var wg sync.WaitGroup
				for _, db := range []*DB{a, b, a, b} {
					wg.Go(func() {
						var won bool // of the attempt that committed
						err := db.Tx(t.Context(), func(tx *Tx) error {
							var err error
							won, err = tx.ClaimScheduleTick(t.Context(), ScheduleFire{Source: "s", Workflow: "w", Tick: tk, Cron: "* * * * *", RunID: "r", FiredAt: tk})
							return err
						})
						if err != nil {
							t.Errorf("claim tick %d: %v", i, err)
						} else if won {
							wins.Add(1)
						}
					})
				}
				wg.Wait()
				if got := wins.Load(); got != 1 {
					t.Fatalf("tick %d: got %d winning claims, want exactly 1", i, got)
				}
			}
		})
	}
}
