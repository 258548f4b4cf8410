package dispatch

import (
	"errors"
	"testing"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

func isDispatch(m protocol.Message) bool { _, ok := m.(*protocol.JobDispatch); return ok }

// A run created while an agent is free leaves with its creating
// transaction: the job is dispatched when CreateRun returns, and its
// dispatch sent right after, with no pass of the dispatch loop (which this
// test never runs).
func TestCreateRunDispatchesToAFreeAgentInItsTransaction(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		a, conn, err := f.connect(t, "host", "token:a")
		if err != nil {
			t.Fatal(err)
		}
		first := f.push(t)
		if j := f.jobStatus(t, first); j.Status != store.JobDispatched || j.AgentID != "host" {
			t.Fatalf("job after CreateRun: status %s on %q, want dispatched on host", j.Status, j.AgentID)
		}
		conn.waitCount(t, isDispatch, 1)
		if !a.holds(first) || a.free() != 0 {
			t.Errorf("agent: holds %v, free %d; want it to hold the job with no slot free", a.holds(first), a.free())
		}
		// The agent is busy: the next run's job waits in the queue.
		second := f.push(t)
		if j := f.jobStatus(t, second); j.Status != store.JobQueued {
			t.Errorf("second job: status %s, want queued", j.Status)
		}
		if n := conn.count(isDispatch); n != 1 {
			t.Errorf("dispatches sent after the second run: got %d, want still 1", n)
		}
	})
}

// A claim whose transaction rolls back gives the agent's slot back and
// sends nothing; while it is pending, the slot is not offered twice.
func TestClaimTxRolledBackReleasesTheAgent(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t) // no agent yet: queued
		a, conn, err := f.connect(t, "host", "token:a")
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("roll back")
		err = db.Tx(t.Context(), func(tx *store.Tx) error {
			claims, err := f.disp.ClaimTx(t.Context(), tx, 1)
			if err != nil {
				return err
			}
			if sent, err := f.disp.dispatchOne(t.Context(), a); sent || err != nil {
				t.Errorf("dispatch loop while the claim is pending: got (%v, %v), want nothing sent", sent, err)
			}
			if a.free() != 0 {
				t.Errorf("free slots while the claim is pending: got %d, want 0", a.free())
			}
			claims.Abort()
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("tx: got %v, want the rollback", err)
		}
		if a.free() != 1 || conn.count(isDispatch) != 0 {
			t.Errorf("after the rollback: free %d, dispatches %d; want 1 and 0", a.free(), conn.count(isDispatch))
		}
		if j := f.jobStatus(t, jobID); j.Status != store.JobQueued {
			t.Errorf("job after the rollback: %s, want queued", j.Status)
		}
		// The loop then dispatches it as usual.
		if sent, err := f.disp.dispatchOne(t.Context(), a); !sent || err != nil {
			t.Fatalf("dispatch after the rollback: got (%v, %v), want the job sent", sent, err)
		}
	})
}
