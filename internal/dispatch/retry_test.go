package dispatch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

func TestAgentCause(t *testing.T) {
	t.Parallel()
	running := store.Job{Status: store.JobRunning}
	dispatched := store.Job{Status: store.JobDispatched}
	tests := []struct {
		name string
		job  store.Job
		msg  protocol.JobStatus
		want string
	}{
		{name: "a step failed", job: running, msg: protocol.JobStatus{Status: "failure", Error: `step "test": exited with code 1`}, want: workflow.RetryFailure},
		{name: "failed before running", job: dispatched, msg: protocol.JobStatus{Status: "failure", Error: "checkout: fetch: connection refused"}, want: workflow.RetryInfrastructure},
		{name: "job timeout", job: running, msg: protocol.JobStatus{Status: "failure", Error: "job timed out after 10m0s"}, want: workflow.RetryTimeout},
		{name: "job timeout in the checkout", job: dispatched, msg: protocol.JobStatus{Status: "failure", Error: "job timed out after 1s"}, want: workflow.RetryTimeout},
		{name: "step timeout", job: running, msg: protocol.JobStatus{Status: "failure", Error: `step "slow": step timed out after 1m0s`}, want: workflow.RetryTimeout},
		{name: "the agent says infrastructure", job: running, msg: protocol.JobStatus{Status: "failure", Error: "pull image: denied", Cause: protocol.CauseInfrastructure}, want: workflow.RetryInfrastructure},
		{name: "the agent says failure", job: dispatched, msg: protocol.JobStatus{Status: "failure", Error: "x", Cause: protocol.CauseFailure}, want: workflow.RetryFailure},
		{name: "success", job: running, msg: protocol.JobStatus{Status: "success"}, want: ""},
		{name: "cancelled", job: running, msg: protocol.JobStatus{Status: "cancelled", Error: "cancelled"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := agentCause(tt.job, &tt.msg); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// pushJob creates a run of the given jobs (labels [linux]) and returns
// the run with its jobs.
func (f *fixture) pushJobs(t *testing.T, jobs ...workflow.Job) store.Run {
	t.Helper()
	for i := range jobs {
		jobs[i].Base, jobs[i].RunsOn = jobs[i].Name, []string{"linux"}
		if jobs[i].Steps == nil {
			jobs[i].Steps = []workflow.Step{{Name: "s", Run: "true"}}
		}
	}
	wf := workflow.Workflow{Name: "ci", File: ".kici/workflows/ci.yml", Jobs: jobs}
	run, err := f.disp.sched.CreateRun(t.Context(), scheduler.RunInput{Source: "repo", Workflow: wf,
		Event: trigger.Event{Kind: "push", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40)}})
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return run
}

// apply applies messages of a job from a, in order.
func (f *fixture) apply(t *testing.T, a *Agent, msgs ...protocol.Message) {
	t.Helper()
	for _, m := range msgs {
		if _, err := f.disp.Apply(t.Context(), a, m); err != nil {
			t.Fatalf("apply %s: %v", m.Type(), err)
		}
	}
}

// attempt plays one dispatch of jobID on a fresh agent that ends as end
// says: "failure", "infrastructure", "timeout" (agent reports) or
// "agent-lost" (the agent goes and its recovery window passes).
func (f *fixture) attempt(t *testing.T, jobID, agentID, end string, now *time.Time) {
	t.Helper()
	a, c := f.dispatchTo(t, agentID, "token:x")
	var d *protocol.JobDispatch
	for _, m := range c.messages() {
		if m, ok := m.(*protocol.JobDispatch); ok && m.JobID == jobID {
			d = m
		}
	}
	if d == nil {
		t.Fatalf("agent %s got no dispatch of job %s", agentID, jobID)
	}
	f.apply(t, a, &protocol.JobAck{JobID: jobID, Seq: 1})
	switch end {
	case "infrastructure":
		f.apply(t, a, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "failure", Error: "checkout: git fetch: exit status 128"})
	case "failure", "timeout":
		msg := `step "s": exited with code 1`
		if end == "timeout" {
			msg = "job timed out after 1s"
		}
		f.apply(t, a, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"},
			&protocol.StepStatus{JobID: jobID, Seq: 3, Step: 0, Status: "running", StartedAt: *now},
			&protocol.LogChunk{JobID: jobID, Seq: 4, Step: 0, Lines: []protocol.LogLine{{TS: *now, Text: fmt.Sprintf("dispatch %d says hello", d.Attempt)}}},
			&protocol.StepStatus{JobID: jobID, Seq: 5, Step: 0, Status: "failure", ExitCode: 1, Error: "exited with code 1", StartedAt: *now, FinishedAt: *now},
			&protocol.JobStatus{JobID: jobID, Seq: 6, Status: "failure", Error: msg, ExitCode: 1})
	case "agent-lost":
		f.apply(t, a, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"})
		f.disp.Unregister(t.Context(), a)
		*now = now.Add(2 * time.Minute) // past the recovery window
		f.disp.sweepRecoveries(t.Context())
		return
	default:
		t.Fatalf("unknown end %q", end)
	}
	// Gone, so that the jobs created next are not claimed for it.
	f.disp.Unregister(t.Context(), a)
}

func (f *fixture) timeline(t *testing.T, jobID string) []string {
	t.Helper()
	evs, err := f.db.ListJobEvents(t.Context(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type+": "+ev.Detail)
	}
	return out
}

// TestRetryByCause: an attempt that fails goes back to the queue as the
// next attempt when the job's retry: names the cause, and ends the job
// otherwise; a job without retry: retries agent-lost and infrastructure
// once.
func TestRetryByCause(t *testing.T) {
	t.Parallel()
	causes := []string{workflow.RetryAgentLost, workflow.RetryInfrastructure, workflow.RetryTimeout, workflow.RetryFailure}
	tests := []struct {
		name  string
		retry *workflow.Retry
		want  map[string]bool // cause → retried
	}{
		{name: "default", retry: nil,
			want: map[string]bool{"agent-lost": true, "infrastructure": true, "timeout": false, "failure": false}},
		{name: "failure only", retry: &workflow.Retry{Max: 1, When: []string{"failure"}},
			want: map[string]bool{"agent-lost": false, "infrastructure": false, "timeout": false, "failure": true}},
		{name: "timeout and agent-lost", retry: &workflow.Retry{Max: 2, When: []string{"timeout", "agent-lost"}},
			want: map[string]bool{"agent-lost": true, "infrastructure": false, "timeout": true, "failure": false}},
		{name: "max 0", retry: &workflow.Retry{Max: 0, When: causes},
			want: map[string]bool{"agent-lost": false, "infrastructure": false, "timeout": false, "failure": false}},
	}
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		now := time.Now()
		f.disp.cfg.Now = func() time.Time { return now }
		for _, tt := range tests {
			for _, cause := range causes {
				run := f.pushJobs(t, workflow.Job{Name: "build", Retry: tt.retry})
				jobID := run.Jobs[0].ID
				agentID := strings.ReplaceAll(tt.name+"-"+cause, " ", "-")
				f.attempt(t, jobID, agentID, cause, &now)
				job := f.jobStatus(t, jobID)
				got := job.Status == store.JobQueued
				if got != tt.want[cause] {
					t.Errorf("%s, attempt ended by %s: job %s (%q), retried %v, want %v", tt.name, cause, job.Status, job.Error, got, tt.want[cause])
					continue
				}
				attempts, err := db.ListJobAttempts(t.Context(), jobID)
				if err != nil {
					t.Fatal(err)
				}
				if !got {
					if job.Status != store.JobFailure || len(attempts) != 0 || job.Retries != 0 {
						t.Errorf("%s, %s: job %s with %d retries and attempts %+v, want failure with none", tt.name, cause, job.Status, job.Retries, attempts)
					}
					continue
				}
				if job.Retries != 1 || len(attempts) != 1 || attempts[0].Cause != cause || attempts[0].AgentID != agentID || attempts[0].Dispatch != 1 {
					t.Errorf("%s, %s: job has %d retries and attempts %+v, want 1 retry of attempt 1 by %s on %s", tt.name, cause, job.Retries, attempts, cause, agentID)
				}
				tl := f.timeline(t, jobID)
				if len(tl) != 1 || !strings.HasPrefix(tl[0], "attempt_ended: attempt 1 ended: ") || !strings.Contains(tl[0], "retrying as attempt 2 of") {
					t.Errorf("%s, %s: timeline %q, want the end of attempt 1 and its retry", tt.name, cause, tl)
				}
				e, err := db.GetQueueEntry(t.Context(), jobID)
				if err != nil || e.Status != store.QueuePending || e.DispatchAttempts != 0 {
					t.Errorf("%s, %s: queue row %+v (%v), want a fresh pending row", tt.name, cause, e, err)
				}
				// Retried jobs leave the queue for the next case.
				if _, err := f.disp.Cancel(t.Context(), run.ID, true, "test over"); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestRetryHonoursMax: a job with retry max 2 on failure runs three
// attempts, each dispatched with the next dispatch attempt, its steps
// reset between them, and ends failed after the third; its dependant is
// decided only then.
func TestRetryHonoursMax(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		now := time.Now()
		f.disp.cfg.Now = func() time.Time { return now }
		run := f.pushJobs(t,
			workflow.Job{Name: "flaky", Retry: &workflow.Retry{Max: 2, When: []string{workflow.RetryFailure}}},
			workflow.Job{Name: "after", Needs: []workflow.Need{{Job: "flaky", On: []string{"success"}}}})
		jobID := run.Jobs[0].ID
		for i := 1; i <= 3; i++ {
			f.attempt(t, jobID, fmt.Sprintf("host-%d", i), "failure", &now)
			r, err := db.GetRun(t.Context(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			flaky, after := r.Jobs[0], r.Jobs[1]
			if i < 3 {
				if flaky.Status != store.JobQueued || flaky.Retries != i || flaky.Steps[0].Status != store.StepPending ||
					flaky.Steps[0].StartedAt != nil || flaky.Error != "" || flaky.QueuedAt == nil {
					t.Fatalf("after attempt %d: job %s, %d retries, error %q, queued at %v, step %+v; want queued for attempt %d with its step reset",
						i, flaky.Status, flaky.Retries, flaky.Error, flaky.QueuedAt, flaky.Steps[0], i+1)
				}
				if after.Status != store.JobWaiting || r.Status == store.RunFailure {
					t.Fatalf("after attempt %d: dependant %s, run %s; want it waiting in a run not ended", i, after.Status, r.Status)
				}
				continue
			}
			if flaky.Status != store.JobFailure || flaky.Retries != 2 || after.Status != store.JobSkipped || r.Status != store.RunFailure {
				t.Fatalf("after the last attempt: job %s with %d retries, dependant %s, run %s; want failure, 2, skipped, failure",
					flaky.Status, flaky.Retries, after.Status, r.Status)
			}
		}
		want := []string{
			`attempt_ended: attempt 1 ended: failed (step "s": exited with code 1); retrying as attempt 2 of 3`,
			`attempt_ended: attempt 2 ended: failed (step "s": exited with code 1); retrying as attempt 3 of 3`,
			`attempt_ended: attempt 3 ended: failed (step "s": exited with code 1); no retries left (retry max 2)`,
		}
		if diff := cmp.Diff(want, f.timeline(t, jobID)); diff != "" {
			t.Errorf("timeline (-want +got):\n%s", diff)
		}
		// Each dispatch had its own attempt, so no chunk was refused, and
		// the end of each attempt is marked in the step's log.
		wantLog := []string{
			"dispatch 1 says hello", "[kici] attempt 1 ended here; attempt 2 follows",
			"dispatch 2 says hello", "[kici] attempt 2 ended here; attempt 3 follows",
			"dispatch 3 says hello",
		}
		var gotLog []string
		for _, l := range f.logs.of(jobID) {
			if !strings.HasPrefix(l, "[kici] attempt") || strings.Contains(l, "ended here") {
				gotLog = append(gotLog, l)
			}
		}
		if diff := cmp.Diff(wantLog, gotLog); diff != "" {
			t.Errorf("log lines (-want +got):\n%s", diff)
		}
	})
}

// TestRetrySucceedsAndQueuesDependants: a job lost on its first attempt
// succeeds on its second; only then is its dependant queued.
func TestRetrySucceedsAndQueuesDependants(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		now := time.Now()
		f.disp.cfg.Now = func() time.Time { return now }
		run := f.pushJobs(t, workflow.Job{Name: "build"},
			workflow.Job{Name: "test", Needs: []workflow.Need{{Job: "build", On: []string{"success"}}}})
		build, test := run.Jobs[0].ID, run.Jobs[1].ID
		f.attempt(t, build, "doomed", workflow.RetryAgentLost, &now)
		if got := f.jobStatus(t, test).Status; got != store.JobWaiting {
			t.Fatalf("dependant after the lost attempt: %s, want waiting", got)
		}
		a, c := f.dispatchTo(t, "healthy", "token:x")
		d, _ := c.messages()[0].(*protocol.JobDispatch)
		if d == nil || d.JobID != build || d.Attempt != 2 {
			t.Fatalf("second dispatch: %+v, want job %s with dispatch attempt 2", c.messages()[0], build)
		}
		f.apply(t, a, &protocol.JobAck{JobID: build, Seq: 1}, &protocol.JobStatus{JobID: build, Seq: 2, Status: "running"},
			&protocol.JobStatus{JobID: build, Seq: 3, Status: "success"})
		j := f.jobStatus(t, build)
		if j.Status != store.JobSuccess || j.Retries != 1 || j.AgentID != "healthy" {
			t.Errorf("build: %s after %d retries on %s, want success after 1 on healthy", j.Status, j.Retries, j.AgentID)
		}
		if got := f.jobStatus(t, test).Status; got != store.JobQueued {
			t.Errorf("dependant after the successful attempt: %s, want queued", got)
		}
	})
}

// TestCancelStopsRetries: once a run's cancel was asked for, a job of it
// that then fails, or whose agent is lost, is not retried.
func TestCancelStopsRetries(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		now := time.Now()
		f.disp.cfg.Now = func() time.Time { return now }
		always := &workflow.Retry{Max: 3, When: []string{workflow.RetryFailure, workflow.RetryAgentLost}}
		for _, end := range []string{"failure", "agent-lost"} {
			run := f.pushJobs(t, workflow.Job{Name: "build", Retry: always})
			jobID := run.Jobs[0].ID
			a, c := f.dispatchTo(t, "host-"+end, "token:x")
			f.apply(t, a, &protocol.JobAck{JobID: jobID, Seq: 1}, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"})
			if _, err := f.disp.Cancel(t.Context(), run.ID, false, "cancelled by request"); err != nil {
				t.Fatal(err)
			}
			if c.count(isCancel) != 1 {
				t.Fatalf("%s: the agent got %d cancels, want 1", end, c.count(isCancel))
			}
			want := store.JobFailure
			if end == "failure" {
				// The agent ignores the cancel's grace and reports a failure.
				f.apply(t, a, &protocol.JobStatus{JobID: jobID, Seq: 3, Status: "failure", Error: `step "s": exited with code 1`})
			} else {
				f.disp.Unregister(t.Context(), a)
				now = now.Add(2 * time.Minute)
				f.disp.sweepRecoveries(t.Context())
				want = store.JobCancelled
			}
			f.disp.Unregister(t.Context(), a)
			j := f.jobStatus(t, jobID)
			if j.Status != want || j.Retries != 0 {
				t.Errorf("%s after the cancel: job %s after %d retries, want %s, not retried", end, j.Status, j.Retries, want)
			}
			r, err := db.GetRunHead(t.Context(), run.ID)
			if err != nil || (r.Status != store.RunCancelled && r.Status != store.RunFailure) {
				t.Errorf("%s: run %s (%v), want it ended", end, r.Status, err)
			}
		}
	})
}

var errCrash = errors.New("simulated crash")

// TestRetryIsOneTransaction: a retry whose transaction does not commit
// (the orchestrator dies after the requeue was written) leaves the job as
// it was, and the agent's replay of its final report then retries it
// exactly once: one attempt recorded, one queue row, one retry. A second
// verdict about the same attempt changes nothing.
func TestRetryIsOneTransaction(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		run := f.pushJobs(t, workflow.Job{Name: "build", Retry: &workflow.Retry{Max: 2, When: []string{workflow.RetryFailure}}})
		jobID := run.Jobs[0].ID
		a, _ := f.dispatchTo(t, "host", "token:x")
		f.apply(t, a, &protocol.JobAck{JobID: jobID, Seq: 1}, &protocol.JobStatus{JobID: jobID, Seq: 2, Status: "running"})
		final := &protocol.JobStatus{JobID: jobID, Seq: 3, Status: "failure", Error: `step "s": exited with code 1`}

		err := db.Tx(t.Context(), func(tx *store.Tx) error {
			job, err := tx.GetJobHead(t.Context(), jobID)
			if err != nil {
				return err
			}
			if _, err := tx.ApplyJobMessage(t.Context(), jobID, int64(final.Seq)); err != nil {
				return err
			}
			if _, err := f.disp.endJobCause(t.Context(), tx, job, store.JobFailure, final.Error, workflow.RetryFailure); err != nil {
				return err
			}
			return errCrash // dies before the commit
		})
		if !errors.Is(err, errCrash) {
			t.Fatalf("crashed transaction: %v", err)
		}
		j := f.jobStatus(t, jobID)
		at, _ := db.ListJobAttempts(t.Context(), jobID)
		e, qerr := db.GetQueueEntry(t.Context(), jobID)
		if j.Status != store.JobRunning || j.Retries != 0 || j.LastSeq != 2 || len(at) != 0 || qerr != nil || e.Status != store.QueueDispatched {
			t.Fatalf("after the crash: job %s, %d retries, last seq %d, attempts %+v, queue row %s (%v); want it untouched",
				j.Status, j.Retries, j.LastSeq, at, e.Status, qerr)
		}

		// The agent was not acknowledged: it sends the report again.
		f.apply(t, a, final)
		// Once more: the attempt is over, so the job is no longer the
		// agent's, and nothing is applied.
		if _, err := f.disp.Apply(t.Context(), a, final); !errors.Is(err, ErrNotOwner) {
			t.Errorf("a replay after the retry: got %v, want ErrNotOwner", err)
		}
		j = f.jobStatus(t, jobID)
		at, _ = db.ListJobAttempts(t.Context(), jobID)
		rows, _ := db.ListQueue(t.Context())
		if j.Status != store.JobQueued || j.Retries != 1 || len(at) != 1 || len(rows) != 1 || rows[0].Status != store.QueuePending {
			t.Fatalf("after the replays: job %s, %d retries, attempts %+v, queue %+v; want queued once", j.Status, j.Retries, at, rows)
		}
		// A stale verdict about attempt 1 (taken before the retry) is a
		// no-op.
		stale := j
		stale.Status, stale.Retries = store.JobRunning, 0
		err = db.Tx(t.Context(), func(tx *store.Tx) error {
			r, err := f.disp.sched.RetryTx(t.Context(), tx, stale, workflow.RetryFailure, "late")
			if r != nil {
				return fmt.Errorf("retried again: %+v", r)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if j = f.jobStatus(t, jobID); j.Retries != 1 {
			t.Errorf("after a stale verdict: %d retries, want 1", j.Retries)
		}
	})
}
