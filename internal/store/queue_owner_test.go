package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testOwner is the orchestrator instance the queue tests dispatch as.
const testOwner = "instance-test"

// TestQueueOwnership: the ack and recovery sweeps of one instance see
// only the rows it owns, an agent's reclaim moves a row to the instance
// it reconnected to, and a requeue leaves the row to no one.
func TestQueueOwnership(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"})
		job := ids[0]
		enqueue(t, db, runID, job, []string{"linux"}, nil)
		e, ok, err := db.ClaimForAgent(ctx, "coord-a", "agent-1", []string{"linux"}, ackDeadline)
		if err != nil || !ok {
			t.Fatalf("claim: %v, %t", err, ok)
		}
		if e.Owner != "coord-a" {
			t.Fatalf("claimed row owned by %q, want coord-a", e.Owner)
		}
		if rows, _ := db.ExpiredAckDeadlines(ctx, "coord-b", ackDeadline); len(rows) != 0 {
			t.Errorf("coord-b sees %d expired acks of coord-a's dispatch, want 0", len(rows))
		}
		if rows, _ := db.ExpiredAckDeadlines(ctx, "coord-a", ackDeadline); len(rows) != 1 {
			t.Errorf("coord-a sees %d expired acks of its dispatch, want 1", len(rows))
		}
		if ok, err := db.SetRecovery(ctx, "coord-b", job, "agent-1", testNow.Add(time.Minute)); err != nil || ok {
			t.Errorf("coord-b set recovery of coord-a's row: (%t, %v), want no change", ok, err)
		}
		if ok, err := db.SetRecovery(ctx, "coord-a", job, "agent-1", testNow.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("coord-a set recovery of its row: (%t, %v), want a change", ok, err)
		}
		later := testNow.Add(2 * time.Minute)
		if rows, _ := db.ExpiredRecoveries(ctx, "coord-b", later); len(rows) != 0 {
			t.Errorf("coord-b sees %d expired recoveries of coord-a's row, want 0", len(rows))
		}
		if rows, _ := db.ExpiredRecoveries(ctx, "coord-a", later); len(rows) != 1 {
			t.Errorf("coord-a sees %d expired recoveries of its row, want 1", len(rows))
		}
		if rows, _ := db.ListRecoveringElsewhere(ctx, "coord-a"); len(rows) != 0 {
			t.Errorf("coord-a's own recovering row listed as elsewhere: %d rows", len(rows))
		}
		if rows, _ := db.ListRecoveringElsewhere(ctx, "coord-b"); len(rows) != 1 || rows[0].JobID != job {
			t.Errorf("coord-b's list of rows recovering elsewhere: %v, want %s", jobIDs(rows), job)
		}
		// The agent moved to coord-b and reported the job in flight there.
		if ok, err := db.Reclaim(ctx, "coord-b", job, "agent-2"); err != nil || ok {
			t.Errorf("reclaim by another agent: (%t, %v), want no change", ok, err)
		}
		if ok, err := db.Reclaim(ctx, "coord-b", job, "agent-1"); err != nil || !ok {
			t.Fatalf("reclaim on coord-b: (%t, %v), want a change", ok, err)
		}
		e, err = db.GetQueueEntry(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if e.Owner != "coord-b" || e.RecoveryDeadline != nil || e.RecoveryAgentID != "" || e.AckDeadline != nil {
			t.Errorf("reclaimed row: owner %q, recovery %q %v, ack deadline %v; want coord-b and none",
				e.Owner, e.RecoveryAgentID, e.RecoveryDeadline, e.AckDeadline)
		}
		// coord-a, whose agent left it, can no longer hold the row.
		if ok, err := db.SetRecovery(ctx, "coord-a", job, "agent-1", later); err != nil || ok {
			t.Errorf("coord-a set recovery after the reclaim on coord-b: (%t, %v), want no change", ok, err)
		}
		e, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-1", Reason: "test"})
		if err != nil || !ok || e.Owner != "" {
			t.Errorf("requeue: (%t, %v), owner %q; want a change and no owner", ok, err, e.Owner)
		}
	})
}

// TestTakeOverOrphans: the rows of an instance that is gone or expired
// (or of none) go to the taker with a recovery window, keeping a window
// already running; the rows of live instances and the taker's own stay.
func TestTakeOverOrphans(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			// coord-expired registered an hour ago and stopped beating.
			for _, inst := range []struct {
				id  string
				ttl time.Duration
			}{{"coord-expired", time.Minute}, {"coord-live", 2 * time.Hour}} {
				if _, err := db.RegisterInstance(ctx, Instance{ID: inst.id, Role: InstanceCoordinator}, inst.ttl, ""); err != nil {
					t.Fatalf("register %s: %v", inst.id, err)
				}
			}
			clock.advance(time.Hour)
			runID, ids := seedJobs(t, db, []string{"l"}, []string{"l"}, []string{"l"}, []string{"l"}, []string{"l"}, []string{"l"})
			owners := []string{"coord-live", "coord-gone", "coord-expired", "leader", "coord-gone", ""}
			for i, id := range ids {
				enqueue(t, db, runID, id, []string{"l"}, nil)
				if _, ok, err := db.ClaimJob(ctx, owners[i], id, "agent-"+owners[i], clock.now().Add(time.Minute)); err != nil || !ok {
					t.Fatalf("claim %s for %q: (%t, %v)", id, owners[i], ok, err)
				}
			}
			running := clock.now().Add(30 * time.Second)
			if ok, err := db.SetRecovery(ctx, "coord-gone", ids[4], "agent-coord-gone", running); err != nil || !ok {
				t.Fatalf("set recovery: (%t, %v)", ok, err)
			}
			deadline := clock.now().Add(2 * time.Minute)
			taken, err := db.TakeOverOrphans(ctx, "leader", deadline)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]QueueEntry{}
			for _, r := range taken {
				got[r.JobID] = r
			}
			want := map[string]time.Time{ids[1]: deadline, ids[2]: deadline, ids[4]: running, ids[5]: deadline}
			if len(got) != len(want) {
				t.Fatalf("took over %v, want %v", jobIDs(taken), []string{ids[1], ids[2], ids[4], ids[5]})
			}
			for id, by := range want {
				r, ok := got[id]
				if !ok {
					t.Errorf("row %s not taken over", id)
					continue
				}
				if r.Owner != "leader" || r.RecoveryAgentID != r.AgentID || r.RecoveryDeadline == nil || !r.RecoveryDeadline.Equal(by) {
					t.Errorf("row %s taken over: owner %q, recovery %q until %v; want leader, %q until %v",
						id, r.Owner, r.RecoveryAgentID, r.RecoveryDeadline, r.AgentID, by)
				}
			}
			for _, i := range []int{0, 3} {
				r, err := db.GetQueueEntry(ctx, ids[i])
				if err != nil {
					t.Fatal(err)
				}
				if r.Owner != owners[i] || r.RecoveryDeadline != nil {
					t.Errorf("row of %s changed: owner %q, recovery %v", owners[i], r.Owner, r.RecoveryDeadline)
				}
			}
			// Taking over again finds nothing: every dispatched row has a
			// live owner now.
			if again, err := db.TakeOverOrphans(ctx, "leader", deadline); err != nil || len(again) != 0 {
				t.Errorf("second take-over: %v, %v; want nothing", jobIDs(again), err)
			}
			if diff := cmp.Diff([]string{ids[1], ids[2], ids[4], ids[5]}, jobIDs(mustExpired(t, db, "leader", deadline)),
				cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("leader's expired recoveries at the deadline (-want +got):\n%s", diff)
			}
		})
	}
}

func mustExpired(t *testing.T, db *DB, owner string, at time.Time) []QueueEntry {
	t.Helper()
	rows, err := db.ExpiredRecoveries(t.Context(), owner, at)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
