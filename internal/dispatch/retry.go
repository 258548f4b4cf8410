package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// A job's attempt that fails is classified by why it ended, and retried
// when the job's retry: names that cause (see scheduler.RetryTx):
//
//	agent-lost      its agent went away mid-job and did not come back
//	                (sweepRecoveries, reconcileMissing, a scaler agent
//	                gone in Unregister)
//	infrastructure  the agent could not start the steps (a failure
//	                reported before running, or marked so by the agent),
//	                its dispatches were exhausted, or no agent could be
//	                provisioned before the queue timeout
//	timeout         the agent reports the job or a step timed out
//	failure         the agent reports a step failed
//
// Other failures (a dispatch that cannot be built, output that cannot be
// stored, a queue timeout without a provisioning error) are never
// retried.

// agentCause classifies a failure the agent reported for job, as the job
// was before the report was applied.
func agentCause(job store.Job, m *protocol.JobStatus) string {
	switch {
	case m.Status != protocol.JobFailure:
		return ""
	case m.Cause != "":
		return m.Cause // the protocol's causes are named as retry.when names them
	case timedOut(m.Error):
		return workflow.RetryTimeout
	case job.Status == store.JobDispatched:
		// The agent reports running once the checkout is done, before the
		// first step: a failure before that is the setup's.
		return workflow.RetryInfrastructure
	}
	return workflow.RetryFailure
}

// timedOut reports whether a job error is the agent runner's job or step
// timeout ("job timed out after 10m0s", "step \"test\": step timed out
// after 1m0s").
func timedOut(msg string) bool {
	return strings.HasPrefix(msg, "job timed out after ") || strings.Contains(msg, "step timed out after ")
}

// endJobCause is endJob for an attempt that ended for cause (""
// when no retry applies): a failure the job's retry policy covers sends
// the job back to the queue as its next attempt instead, in tx. Its log
// gets a line that marks where the attempt ended once tx committed (see
// markRetry).
func (d *Dispatcher) endJobCause(ctx context.Context, tx *store.Tx, job store.Job, to store.JobStatus, msg, cause string) ([]apiv1.Event, error) {
	if to == store.JobFailure && cause != "" {
		r, err := d.sched.RetryTx(ctx, tx, job, cause, msg)
		if err != nil {
			return nil, err
		}
		if r != nil {
			d.noteOnPublish(job.ID, string(store.JobQueued), func() { d.markRetry(context.WithoutCancel(ctx), job, r) })
			return r.Events, nil
		}
	}
	return d.endJob(ctx, tx, job, to, msg)
}

// failJobByID fails a job whose attempt ended for cause, or retries it
// (see endJobCause).
func (d *Dispatcher) failJobByID(ctx context.Context, jobID, msg, cause string) {
	d.endJobIf(ctx, jobID, store.JobFailure, msg, cause, nil)
}

// markRetry writes, once the retry of job committed, a line at the end of
// the ended attempt's output in the job-level log and in the log of each
// step the attempt started, so that a reader tells the attempts apart
// (all attempts share a step's log; the next attempt's lines follow). The
// lines take seqs just below markerSeq in the ended dispatch, after
// anything it sent; the next dispatch's lines sort after them. A job that
// was never dispatched has no log to mark.
func (d *Dispatcher) markRetry(ctx context.Context, job store.Job, r *scheduler.Retried) {
	d.log.Warn("job retried", "run_id", job.RunID, "job_id", job.ID, "job", job.Name, "attempt", r.Next, "detail", r.Detail)
	if job.Attempt < 1 {
		return
	}
	now := d.cfg.Now()
	seq := uint64(markerSeq) - 1 - uint64(len(r.Started)) // below the storage-full marker
	lines := map[int]string{protocol.JobLevelStep: "[kici] " + r.Detail}
	steps := append([]int{protocol.JobLevelStep}, r.Started...)
	for _, step := range steps {
		text, ok := lines[step]
		if !ok {
			text = fmt.Sprintf("[kici] attempt %d ended here; attempt %d follows", r.Ended, r.Next)
		}
		err := d.logs.AppendLog(ctx, job.RunID, job.ID, job.Attempt, step, seq, []protocol.LogLine{{TS: now, Text: text}})
		if err != nil {
			d.log.Warn("mark the end of an attempt in the log failed", "job_id", job.ID, "step", step, "error", err)
		}
		seq++
	}
}

// noteCancelSent records, in tx, that the cancel of a job running on an
// agent connected here was asked for and is being sent: an attempt of the
// job that then ends as lost or failed is not retried, and one whose agent
// does not come back ends cancelled (see sweepRecoveries).
func (d *Dispatcher) noteCancelSent(ctx context.Context, tx *store.Tx, jobID string, force bool, reason string) error {
	ok, err := tx.RequestCancel(ctx, jobID, force, reason)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the job has no row: nothing runs it
	}
	if err != nil || !ok {
		return err
	}
	_, err = tx.MarkCancelSent(ctx, d.cfg.Instance, jobID)
	return err
}
