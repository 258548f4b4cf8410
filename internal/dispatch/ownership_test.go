package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// twoInstances returns fixtures of two orchestrator instances on one
// database, both live in the instance table and on one clock the test
// moves (*now).
func twoInstances(t *testing.T, db *store.DB) (a, b *fixture, now *time.Time) {
	t.Helper()
	clock := time.Now()
	now = &clock
	a, b = newFixture(t, db), newFixture(t, db)
	for id, f := range map[string]*fixture{"coord-a": a, "coord-b": b} {
		f.disp.cfg.Instance = id
		f.disp.cfg.Now = func() time.Time { return *now }
		if _, err := db.RegisterInstance(t.Context(), store.Instance{ID: id, Role: store.InstanceCoordinator}, time.Hour, ""); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
	return a, b, now
}

func (f *fixture) sweep(t *testing.T) {
	t.Helper()
	f.disp.reassertConnected(t.Context())
	f.disp.sweepAcks(t.Context())
	f.disp.sweepRecoveries(t.Context())
}

// TestInstancesLeaveEachOthersDispatchesAlone: an instance's ack and
// recovery sweeps do not touch a dispatch of another live instance, even
// one whose ack is late or whose agent is away; the owner's do.
func TestInstancesLeaveEachOthersDispatchesAlone(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a, b, now := twoInstances(t, db)
		jobID := a.push(t)
		slow, conn := a.dispatchTo(t, "slow", "token:x")
		if e, _ := db.GetQueueEntry(t.Context(), jobID); e.Owner != "coord-a" {
			t.Fatalf("dispatched row owned by %q, want coord-a", e.Owner)
		}
		*now = now.Add(2 * time.Minute) // past the ack deadline
		b.sweep(t)
		if e, _ := db.GetQueueEntry(t.Context(), jobID); e.RecoveryDeadline != nil || conn.closeCode() != 0 {
			t.Fatalf("coord-b's sweep changed coord-a's dispatch: recovery %v, close code %d", e.RecoveryDeadline, conn.closeCode())
		}
		a.sweep(t)
		if conn.closeCode() != protocol.CloseAckTimeout {
			t.Fatalf("coord-a's sweep: slow agent closed with %d, want %d", conn.closeCode(), protocol.CloseAckTimeout)
		}
		a.disp.Unregister(t.Context(), slow)
		*now = now.Add(2 * time.Minute) // past the recovery window
		b.sweep(t)
		if got := a.jobStatus(t, jobID).Status; got != store.JobDispatched {
			t.Fatalf("job after coord-b's recovery sweep: %s, want still dispatched (coord-a's to settle)", got)
		}
		a.sweep(t)
		e, err := db.GetQueueEntry(t.Context(), jobID)
		if err != nil || e.Status != store.QueuePending || e.Owner != "" {
			t.Fatalf("after coord-a's recovery sweep: %+v (%v), want the unacked job back in the queue with no owner", e, err)
		}
	})
}

// TestAgentCarriesItsJobToAnotherInstance: an agent that left coord-a
// with a job reports it in flight on coord-b: coord-b owns the row from
// then on, coord-a's recovery sweep no longer ends the job, and the
// agent's report on coord-b ends it.
func TestAgentCarriesItsJobToAnotherInstance(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a, b, now := twoInstances(t, db)
		jobID := a.push(t)
		onA, _ := a.dispatchTo(t, "mover", "token:x")
		if seq, err := a.disp.Apply(t.Context(), onA, &protocol.JobAck{JobID: jobID, Seq: 1}); err != nil || seq != 1 {
			t.Fatalf("ack: (%d, %v)", seq, err)
		}
		a.disp.Unregister(t.Context(), onA)
		onB, _, err := b.connect(t, "mover", "token:x", protocol.InFlightJob{JobID: jobID})
		if err != nil || !onB.holds(jobID) {
			t.Fatalf("register on coord-b with the job in flight: %v, holds %t", err, onB.holds(jobID))
		}
		if e, _ := db.GetQueueEntry(t.Context(), jobID); e.Owner != "coord-b" || e.RecoveryDeadline != nil {
			t.Fatalf("row after the move: owner %q, recovery %v; want coord-b, none", e.Owner, e.RecoveryDeadline)
		}
		*now = now.Add(5 * time.Minute)
		a.sweep(t)
		b.sweep(t)
		if got := a.jobStatus(t, jobID).Status; got != store.JobDispatched {
			t.Fatalf("job after both sweeps: %s, want still dispatched", got)
		}
		if _, err := b.disp.Apply(t.Context(), onB, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "success"}); err != nil {
			t.Fatal(err)
		}
		if got := a.jobStatus(t, jobID).Status; got != store.JobSuccess {
			t.Errorf("job after its agent's report on coord-b: %s, want success", got)
		}
	})
}

// TestDepartedInstanceDispatchesAreTakenOver: the dispatches of an
// instance that is gone are taken over with a recovery window, and end as
// lost when their agent does not come back (the default retry: queues the
// job again); a paused instance that comes back with its agent still
// connected takes its job back.
func TestDepartedInstanceDispatchesAreTakenOver(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a, b, now := twoInstances(t, db)
		lost, kept := a.push(t), a.push(t)
		onA1, _ := a.dispatchTo(t, "h1", "token:x")
		onA2, _ := a.dispatchTo(t, "h2", "token:x")
		for _, x := range []struct {
			a   *Agent
			job string
		}{{onA1, lost}, {onA2, kept}} {
			if !x.a.holds(x.job) {
				x.job, lost, kept = kept, kept, lost // FIFO gave them the other way round
			}
			if _, err := a.disp.Apply(t.Context(), x.a, &protocol.JobAck{JobID: x.job, Seq: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if !onA1.holds(lost) || !onA2.holds(kept) {
			t.Fatalf("agents hold %v and %v", onA1.BusyJobs(), onA2.BusyJobs())
		}
		// coord-a stops heartbeating: its row goes.
		if err := db.DeregisterInstance(t.Context(), "coord-a"); err != nil {
			t.Fatal(err)
		}
		n, err := b.disp.TakeOverOrphans(t.Context())
		if err != nil || n != 2 {
			t.Fatalf("take over: (%d, %v), want 2 rows", n, err)
		}
		// coord-a was only paused: h2 is still connected to it; h1 is
		// gone.
		a.disp.reg.remove(onA1)
		a.sweep(t)
		if e, _ := db.GetQueueEntry(t.Context(), kept); e.Owner != "coord-a" || e.RecoveryDeadline != nil {
			t.Errorf("job of the still connected agent: owner %q, recovery %v; want coord-a, none", e.Owner, e.RecoveryDeadline)
		}
		if e, _ := db.GetQueueEntry(t.Context(), lost); e.Owner != "coord-b" || e.RecoveryAgentID != "h1" {
			t.Errorf("job of the gone agent: owner %q, waiting for %q; want coord-b, h1", e.Owner, e.RecoveryAgentID)
		}
		*now = now.Add(5 * time.Minute)
		b.sweep(t)
		job := a.jobStatus(t, lost)
		if job.Status != store.JobQueued || job.Retries != 1 {
			t.Errorf("job of the gone agent: %s after %d retries, want queued again after 1", job.Status, job.Retries)
		}
		if at, err := db.ListJobAttempts(t.Context(), lost); err != nil || len(at) != 1 || !strings.Contains(at[0].Error, "agent lost") {
			t.Errorf("attempts of the job of the gone agent: %+v (%v), want one ended as agent lost", at, err)
		}
		if got := a.jobStatus(t, kept).Status; got != store.JobDispatched {
			t.Errorf("job of the still connected agent: %s, want dispatched", got)
		}
	})
}

func isCancel(m protocol.Message) bool { _, ok := m.(*protocol.JobCancel); return ok }

// TestCancelOnAnotherInstanceReachesTheAgent: a cancel asked for on
// coord-b of a job whose agent is connected to coord-a is sent by
// coord-a, once; sent again by coord-b when the agent moves there; and
// the job ends when the agent reports it cancelled.
func TestCancelOnAnotherInstanceReachesTheAgent(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a, b, _ := twoInstances(t, db)
		jobID := a.push(t)
		onA, connA := a.dispatchTo(t, "h", "token:x")
		if _, err := a.disp.Apply(t.Context(), onA, &protocol.JobStatus{JobID: jobID, Seq: 1, Status: "running"}); err != nil {
			t.Fatal(err)
		}
		runID := a.jobStatus(t, jobID).RunID
		if _, err := b.disp.Cancel(t.Context(), runID, true, "cancelled by test on coord-b"); err != nil {
			t.Fatal(err)
		}
		if got := a.jobStatus(t, jobID).Status; got != store.JobRunning {
			t.Fatalf("job after a cancel on coord-b: %s, want still running until its agent stops it", got)
		}
		a.disp.sendCancelRequests(t.Context())
		a.disp.sendCancelRequests(t.Context())
		if n := connA.count(isCancel); n != 1 {
			t.Fatalf("coord-a sent %d cancels, want 1", n)
		}
		msgs := connA.messages()
		if c := msgs[len(msgs)-1].(*protocol.JobCancel); c.JobID != jobID || !c.Force || c.Reason != "cancelled by test on coord-b" {
			t.Errorf("cancel sent: %+v", c)
		}
		// The agent moves to coord-b before it stops the job: told again.
		a.disp.Unregister(t.Context(), onA)
		onB, connB, err := b.connect(t, "h", "token:x", protocol.InFlightJob{JobID: jobID})
		if err != nil {
			t.Fatal(err)
		}
		b.disp.sendCancelRequests(t.Context())
		if n := connB.count(isCancel); n != 1 {
			t.Fatalf("coord-b sent %d cancels after the move, want 1", n)
		}
		if _, err := b.disp.Apply(t.Context(), onB, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "cancelled", Error: "cancelled"}); err != nil {
			t.Fatal(err)
		}
		if got := a.jobStatus(t, jobID).Status; got != store.JobCancelled {
			t.Errorf("job after its agent's report: %s, want cancelled", got)
		}
	})
}

// TestCancelWhileTheAgentIsAwayEndsCancelled: a cancel asked for while
// the job's agent is away from its instance ends the job cancelled (not
// lost, not requeued) when the recovery window ends.
func TestCancelWhileTheAgentIsAwayEndsCancelled(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a, b, now := twoInstances(t, db)
		jobID := a.push(t)
		onA, _ := a.dispatchTo(t, "h", "token:x") // never acknowledged
		a.disp.Unregister(t.Context(), onA)
		if _, err := b.disp.Cancel(t.Context(), a.jobStatus(t, jobID).RunID, false, "stop it"); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(5 * time.Minute)
		a.sweep(t)
		job := a.jobStatus(t, jobID)
		if job.Status != store.JobCancelled || job.Error != "stop it" {
			t.Errorf("job: %s (%q), want cancelled with the request's reason", job.Status, job.Error)
		}
		if _, err := db.GetQueueEntry(t.Context(), jobID); err == nil {
			t.Error("the cancelled job is still queued")
		}
	})
}
