package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestQueuedAtStampsEveryEntryIntoTheQueue: a root job is queued at its
// creation, a waiting one when it moves to queued, and a requeued one
// again.
func TestQueuedAtStampsEveryEntryIntoTheQueue(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", nil), testJob("test", nil, "build"))
		build, test := run.Jobs[0], run.Jobs[1]
		got, err := db.GetJobHead(ctx, build.ID)
		if err != nil || got.QueuedAt == nil || !got.QueuedAt.Equal(got.CreatedAt) {
			t.Errorf("root job: queued at %v (%v), want its creation %v", got.QueuedAt, err, got.CreatedAt)
		}
		if got, _ := db.GetJobHead(ctx, test.ID); got.QueuedAt != nil {
			t.Errorf("waiting job: queued at %v, want nil", got.QueuedAt)
		}
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: test.ID, From: []JobStatus{JobWaiting}, To: JobQueued}); err != nil {
			t.Fatal(err)
		}
		got, _ = db.GetJobHead(ctx, test.ID)
		if got.QueuedAt == nil || !got.QueuedAt.After(test.CreatedAt) {
			t.Errorf("job moved to queued: queued at %v, want after its creation %v", got.QueuedAt, test.CreatedAt)
		}
		first := *got.QueuedAt
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: test.ID, From: []JobStatus{JobQueued}, To: JobDispatched}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: test.ID, From: []JobStatus{JobDispatched}, To: JobQueued}); err != nil {
			t.Fatal(err)
		}
		got, _ = db.GetJobHead(ctx, test.ID)
		if got.QueuedAt == nil || !got.QueuedAt.After(first) {
			t.Errorf("requeued job: queued at %v, want after %v", got.QueuedAt, first)
		}
	})
}

// TestRetryJob: the retry of a running job queues its next attempt,
// resets its steps, records the attempt that ended and replaces its queue
// row, all at once; a retry about an attempt already retried, or of a job
// in a status not allowed, changes nothing.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		id := run.Jobs[0].ID
		start := time.Now().UTC().Truncate(time.Second)
		if _, _, err := db.ClaimForAgent(ctx, "i1", "a1", []string{"linux"}, start.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, tr := range []JobTransition{
			{ID: id, From: []JobStatus{JobQueued}, To: JobDispatched, AgentID: new("a1"), Attempt: new(1)},
			{ID: id, From: []JobStatus{JobDispatched}, To: JobRunning, StartedAt: &start},
		} {
			if _, err := db.UpdateJobStatus(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		code := 1
		if _, err := db.UpdateStepStatus(ctx, StepTransition{JobID: id, Index: 0, From: []StepStatus{StepPending}, To: StepFailure,
			ExitCode: &code, Error: new("exited with code 1"), StartedAt: &start, FinishedAt: &start}); err != nil {
			t.Fatal(err)
		}
		job, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		exp := start.Add(time.Hour)
		retry := Retry{Job: job, From: []JobStatus{JobQueued, JobDispatched, JobRunning}, Cause: "failure",
			Error: `step "build": exited with code 1`, QueueExpiresAt: &exp, Reason: "attempt 1 ended"}
		var ok bool
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err = tx.RetryJob(ctx, retry)
			return err
		})
		if err != nil || !ok {
			t.Fatalf("retry: (%v, %v), want (true, nil)", ok, err)
		}
		after, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != JobQueued || after.Retries != 1 || after.Attempt != 1 || after.Error != "" ||
			after.StartedAt != nil || after.QueuedAt == nil || after.AgentID != "a1" {
			t.Errorf("job after the retry: %+v; want queued, 1 retry, dispatch count 1 kept, no error or start", after)
		}
		for _, st := range after.Steps {
			if st.Status != StepPending || st.ExitCode != nil || st.Error != "" || st.StartedAt != nil || st.FinishedAt != nil {
				t.Errorf("step %d after the retry: %+v, want pending with nothing of the ended attempt", st.Index, st)
			}
		}
		e, err := db.GetQueueEntry(ctx, id)
		if err != nil || e.Status != QueuePending || e.AgentID != "" || e.DispatchAttempts != 0 || e.LastRequeueReason != "attempt 1 ended" ||
			e.ExpiresAt == nil || !e.ExpiresAt.Equal(exp) {
			t.Errorf("queue row after the retry: %+v (%v); want a new pending row expiring at %v", e, err, exp)
		}
		attempts, err := db.ListJobAttempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := []JobAttempt{{JobID: id, RunID: run.ID, Attempt: 1, Cause: "failure", Error: `step "build": exited with code 1`,
			AgentID: "a1", Dispatch: 1, StartedAt: &start}}
		if diff := cmp.Diff(want, attempts, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".EndedAt" }, cmp.Ignore())); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		byJob, err := db.ListRunAttempts(ctx, run.ID)
		if err != nil || len(byJob[id]) != 1 {
			t.Errorf("attempts of the run: %+v (%v), want the one of the job", byJob, err)
		}

		// The same verdict again (its job read before the retry) is stale.
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err = tx.RetryJob(ctx, retry)
			return err
		})
		if err != nil || ok {
			t.Errorf("stale retry: (%v, %v), want (false, nil)", ok, err)
		}
		// A job that ended is never retried.
		ended := after
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: id, From: []JobStatus{JobQueued}, To: JobCancelled}); err != nil {
			t.Fatal(err)
		}
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err = tx.RetryJob(ctx, Retry{Job: ended, From: []JobStatus{JobQueued, JobDispatched, JobRunning}, Cause: "failure"})
			return err
		})
		if err != nil || ok {
			t.Errorf("retry of a cancelled job: (%v, %v), want (false, nil)", ok, err)
		}
		if n := countRows(t, db, "job_attempts"); n != 1 {
			t.Errorf("got %d attempt rows, want 1", n)
		}
	})
}

// TestCopyJobResult: a job of a new run takes the outcome of a job of an
// earlier run, steps included, once, and only while it waits.
func TestCopyJobResult(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		t0 := time.Now().UTC().Truncate(time.Second)
		t1 := t0.Add(3 * time.Second)
		code := 0
		from := Job{ID: "old", Status: JobSuccess, AgentID: "a1", StartedAt: &t0, FinishedAt: &t1, Steps: []Step{
			{Index: 0, Status: StepSuccess, ExitCode: &code, StartedAt: &t0, FinishedAt: &t1},
			{Index: 1, Status: StepSkipped},
		}}
		nr := testRun(testJob("build", nil))
		nr.Jobs[0].Status, nr.Jobs[0].Enqueue = JobWaiting, false
		run, err := db.CreateRun(ctx, nr)
		if err != nil {
			t.Fatal(err)
		}
		id := run.Jobs[0].ID
		var ok bool
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err = tx.CopyJobResult(ctx, id, from)
			return err
		})
		if err != nil || !ok {
			t.Fatalf("copy: (%v, %v), want (true, nil)", ok, err)
		}
		got, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != JobSuccess || got.AgentID != "a1" || !got.StartedAt.Equal(t0) || !got.FinishedAt.Equal(t1) {
			t.Errorf("copied job: %+v, want success on a1 from %v to %v", got, t0, t1)
		}
		if s := got.Steps[0]; s.Status != StepSuccess || s.ExitCode == nil || *s.ExitCode != 0 || !s.FinishedAt.Equal(t1) {
			t.Errorf("copied step 0: %+v, want success, exit 0, finished at %v", s, t1)
		}
		if s := got.Steps[1]; s.Status != StepSkipped || s.StartedAt != nil {
			t.Errorf("copied step 1: %+v, want skipped, never started", s)
		}
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err = tx.CopyJobResult(ctx, id, from)
			return err
		})
		if err != nil || ok {
			t.Errorf("second copy: (%v, %v), want (false, nil): the job no longer waits", ok, err)
		}
	})
}
