package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// A whole job's messages in one batch: every one applied, in order, the
// log stored, one cumulative ack, and a replay of the batch changes
// nothing and acknowledges the same.
func TestApplyBatchAppliesAJobInOneCall(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t)
		a, _ := f.dispatchTo(t, "host", "token:a")
		batch := []protocol.Message{
			&protocol.JobAck{JobID: jobID, Seq: 1},
			&protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"},
			&protocol.StepStatus{JobID: jobID, Seq: 3, Step: 0, Status: "running"},
			&protocol.LogChunk{JobID: jobID, Seq: 4, Step: 0, Lines: []protocol.LogLine{{Text: "hi"}}},
			&protocol.StepStatus{JobID: jobID, Seq: 5, Step: 0, Status: "success"},
			&protocol.JobStatus{JobID: jobID, Seq: 6, Status: "success"},
		}
		for _, round := range []string{"first", "replay"} {
			res, err := f.disp.ApplyBatch(t.Context(), a, batch)
			if err != nil {
				t.Fatalf("%s: %v", round, err)
			}
			if diff := cmp.Diff([]Ack{{JobID: jobID, Seq: 6}}, res.Acks); diff != "" || len(res.Foreign) != 0 {
				t.Errorf("%s: acks (-want +got):\n%s foreign %v", round, diff, res.Foreign)
			}
		}
		job, err := db.GetJob(t.Context(), jobID)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != store.JobSuccess || len(job.Steps) != 1 || job.Steps[0].Status != store.StepSuccess {
			t.Errorf("job after the batch: %s, steps %+v; want success with its step success", job.Status, job.Steps)
		}
		if got := f.logs.of(jobID); !cmp.Equal(got, []string{"hi"}) {
			t.Errorf("stored log: got %q, want [hi] once", got)
		}
		if a.holds(jobID) {
			t.Errorf("agent still holds the ended job")
		}
	})
}

// A message about another agent's job is dropped and reported; the rest
// of the batch is applied.
func TestApplyBatchDropsForeignMessages(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		mine := f.push(t)
		a, _ := f.dispatchTo(t, "host", "token:a")
		theirs := f.push(t)
		f.dispatchTo(t, "other", "token:b")
		res, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{
			&protocol.JobStatus{JobID: theirs, Seq: 1, Status: "failure"},
			&protocol.LogChunk{JobID: theirs, Seq: 2, Lines: []protocol.LogLine{{Text: "injected"}}},
			&protocol.JobStatus{JobID: mine, Seq: 1, Status: "running"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Foreign) != 2 || !cmp.Equal(res.Acks, []Ack{{JobID: mine, Seq: 1}}) {
			t.Errorf("got foreign %v, acks %v; want 2 foreign and mine acked at 1", res.Foreign, res.Acks)
		}
		if j := f.jobStatus(t, theirs); j.Status != store.JobDispatched {
			t.Errorf("the other agent's job: %s, want still dispatched", j.Status)
		}
		if got := f.logs.of(theirs); len(got) != 0 {
			t.Errorf("the other agent's log: got %q, want nothing stored", got)
		}
		if j := f.jobStatus(t, mine); j.Status != store.JobRunning {
			t.Errorf("my job: %s, want running", j.Status)
		}
	})
}

// A chunk that came before the job's final status but reaches the
// orchestrator only after it (its sync was lost in a crash after the status
// was committed; the agent replays it) is stored; output sent after the
// final status is not. Both are acknowledged.
func TestChunkBeforeTheEndIsStoredAfterIt(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		jobID := f.push(t)
		a, _ := f.dispatchTo(t, "host", "token:a")
		if _, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{
			&protocol.JobAck{JobID: jobID, Seq: 1},
			&protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"},
			&protocol.StepStatus{JobID: jobID, Seq: 3, Step: 0, Status: "running"},
			&protocol.StepStatus{JobID: jobID, Seq: 5, Step: 0, Status: "success"},
			&protocol.JobStatus{JobID: jobID, Seq: 6, Status: "success"},
		}); err != nil {
			t.Fatal(err)
		}
		res, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{
			&protocol.LogChunk{JobID: jobID, Seq: 4, Step: 0, Lines: []protocol.LogLine{{Text: "before the end"}}},
			&protocol.LogChunk{JobID: jobID, Seq: 7, Step: 0, Lines: []protocol.LogLine{{Text: "after the end"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Ack{{JobID: jobID, Seq: 7}}, res.Acks); diff != "" {
			t.Errorf("acks (-want +got):\n%s", diff)
		}
		if got := f.logs.of(jobID); !cmp.Equal(got, []string{"before the end"}) {
			t.Errorf("stored log: got %q, want only the line sent before the end", got)
		}
	})
}

// A running report clears the dispatch's ack deadline, as a job.ack does,
// when no ack of this connection was applied before it; after an applied
// ack it has nothing left to clear.
func TestRunningReportAcknowledgesTheDispatch(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		deadline := func(jobID string) bool {
			e, err := db.GetQueueEntry(t.Context(), jobID)
			if err != nil {
				t.Fatal(err)
			}
			return e.AckDeadline != nil
		}
		noAck := f.push(t)
		a, conn := f.dispatchTo(t, "host", "token:a")
		if !deadline(noAck) {
			t.Fatalf("dispatched job without an ack deadline")
		}
		if _, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{&protocol.JobStatus{JobID: noAck, Seq: 1, Status: "running"}}); err != nil {
			t.Fatal(err)
		}
		if deadline(noAck) || a.wasAcked(noAck) {
			t.Errorf("after a running report without an ack: deadline set %t, noted acked %t; want cleared, not noted", deadline(noAck), a.wasAcked(noAck))
		}
		if _, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{&protocol.JobStatus{JobID: noAck, Seq: 2, Status: "success"}}); err != nil {
			t.Fatal(err)
		}

		acked := f.push(t) // claimed for the free agent by its run's transaction
		conn.waitCount(t, isDispatch, 2)
		if _, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{&protocol.JobAck{JobID: acked, Seq: 1}}); err != nil {
			t.Fatal(err)
		}
		if deadline(acked) || !a.wasAcked(acked) {
			t.Errorf("after an ack: deadline set %t, noted acked %t; want cleared and noted", deadline(acked), a.wasAcked(acked))
		}
		if _, err := f.disp.ApplyBatch(t.Context(), a, []protocol.Message{&protocol.JobStatus{JobID: acked, Seq: 2, Status: "running"}}); err != nil {
			t.Fatal(err)
		}
		if j := f.jobStatus(t, acked); j.Status != store.JobRunning {
			t.Errorf("acked job after its running report: %s, want running", j.Status)
		}
	})
}
