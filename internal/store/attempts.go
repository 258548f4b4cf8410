package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JobAttempt is one attempt of a job that ended and was retried: the job
// went back to the queue for another attempt (see Tx.RetryJob). A job's
// last attempt has no row; the job's own status and error say how it
// ended.
type JobAttempt struct {
	JobID string
	RunID string
	// Attempt is the attempt's number, from 1.
	Attempt int
	// Cause is why the attempt ended: a workflow.Retry* cause
	// (agent-lost, infrastructure, timeout, failure).
	Cause string
	// Error is what ended it, as the job's error would have said.
	Error string
	// AgentID is the agent the attempt was last dispatched to; empty if
	// it never was.
	AgentID string
	// Dispatch is the job's dispatch count (Job.Attempt) when the attempt
	// ended: the log lines of the attempt carry a dispatch attempt of at
	// most Dispatch, those of the next attempts a higher one.
	Dispatch int
	// StartedAt is when the attempt started running; nil if it never did.
	StartedAt *time.Time
	EndedAt   time.Time
}

const jobAttemptColumns = "job_id, run_id, attempt, cause, error, agent_id, dispatch, started_at, ended_at"

// Retry sends a job whose attempt ended back to the queue for another
// attempt; see Tx.RetryJob.
type Retry struct {
	// Job is the job as the caller read it in the same transaction: its
	// status, dispatch count (Attempt), retries, agent, start and labels
	// are what the retry is decided about.
	Job Job
	// From are the statuses the job may be in; required.
	From []JobStatus
	// Cause and Error say why the attempt ended (JobAttempt).
	Cause string
	Error string
	// QueueExpiresAt is the expiry of the new queue row; nil means never.
	QueueExpiresAt *time.Time
	// Reason is recorded as the new queue row's requeue reason.
	Reason string
}

// RetryJob ends the current attempt of r.Job and queues the next, all in
// tx: the job becomes queued with one more retry (its error, times and
// steps cleared, its queue entry time stamped), the ended attempt is
// recorded (JobAttempt), and the job's queue row is replaced by a new
// pending one, which counts its dispatches from zero. The job's dispatch
// count is kept, so the next dispatch gets a higher one and its log lines
// sort after the ended attempt's.
//
// The update is guarded by the job's status (r.From), dispatch count and
// retries as r.Job has them: a decision taken about an attempt that has
// been retried or ended meanwhile changes nothing and returns false. A
// missing job gives ErrNotFound.
func (tx *Tx) RetryJob(ctx context.Context, r Retry) (bool, error) {
	if len(r.From) == 0 {
		return false, fmt.Errorf("retry job %q: %w", r.Job.ID, errNoFrom)
	}
	now := tx.clock.Now()
	j := r.Job
	args := []any{timeArg(now), j.ID, j.Attempt, j.Retries}
	changed, err := tx.execChanged(ctx,
		`UPDATE jobs SET status = 'queued', retries = retries + 1, error = NULL,
		   started_at = NULL, finished_at = NULL, queued_at = ?
		 WHERE id = ? AND attempt = ? AND retries = ? AND status IN (`+placeholders(len(r.From))+`)`,
		append(args, statusArgs(r.From)...)...)
	if err == nil {
		changed, err = tx.guarded(ctx, changed, "SELECT 1 FROM jobs WHERE id = ?", j.ID)
	}
	if err != nil || !changed {
		return false, wrapRetry(j.ID, err)
	}
	if _, err := tx.exec(ctx, "INSERT INTO job_attempts ("+jobAttemptColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		j.ID, j.RunID, j.Retries+1, r.Cause, r.Error, j.AgentID, j.Attempt, nullTimeArg(j.StartedAt), timeArg(now)); err != nil {
		return false, wrapRetry(j.ID, fmt.Errorf("record attempt %d: %w", j.Retries+1, err))
	}
	if _, err := tx.exec(ctx,
		`UPDATE steps SET status = 'pending', exit_code = NULL, error = NULL, started_at = NULL, finished_at = NULL
		 WHERE job_id = ?`, j.ID); err != nil {
		return false, wrapRetry(j.ID, fmt.Errorf("reset steps: %w", err))
	}
	e := newQueueEntry(NewQueueEntry{JobID: j.ID, RunID: j.RunID, Labels: j.RunsOn, ExpiresAt: r.QueueExpiresAt}, now)
	e.LastRequeueReason = r.Reason
	// An attempt that ended waiting for an agent passes on why none could
	// be provisioned: it stays the job's last word on that (a dispatch
	// clears it).
	if old, err := tx.GetQueueEntry(ctx, j.ID); err == nil {
		e.LastProvisioningError = old.LastProvisioningError
	} else if !errors.Is(err, ErrNotFound) {
		return false, wrapRetry(j.ID, err)
	}
	if _, err := tx.Dequeue(ctx, j.ID); err != nil {
		return false, wrapRetry(j.ID, err)
	}
	if _, err := tx.exec(ctx,
		"INSERT INTO dispatch_queue ("+queueInsertColumns+", last_requeue_reason, last_provisioning_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		append(queueInsertArgs(e), nullStringArg(e.LastRequeueReason), nullStringArg(e.LastProvisioningError))...); err != nil {
		return false, wrapRetry(j.ID, fmt.Errorf("enqueue: %w", err))
	}
	return true, nil
}

func wrapRetry(jobID string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("retry job %q: %w", jobID, classify(err))
}

// ListJobAttempts returns the retried attempts of a job, oldest first.
func (q *queries) ListJobAttempts(ctx context.Context, jobID string) ([]JobAttempt, error) {
	out, err := q.listAttempts(ctx, "job_id = ?", jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %q: %w", jobID, err)
	}
	return out, nil
}

// ListRunAttempts returns the retried attempts of every job of a run, by
// job id, each job's oldest first.
func (q *queries) ListRunAttempts(ctx context.Context, runID string) (map[string][]JobAttempt, error) {
	list, err := q.listAttempts(ctx, "run_id = ?", runID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of run %q: %w", runID, err)
	}
	out := map[string][]JobAttempt{}
	for _, a := range list {
		out[a.JobID] = append(out[a.JobID], a)
	}
	return out, nil
}

func (q *queries) listAttempts(ctx context.Context, where string, args ...any) ([]JobAttempt, error) {
	rows, err := q.query(ctx, "SELECT "+jobAttemptColumns+" FROM job_attempts WHERE "+where+" ORDER BY job_id, attempt", args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []JobAttempt
	for rows.Next() {
		var a JobAttempt
		if err := rows.Scan(&a.JobID, &a.RunID, &a.Attempt, &a.Cause, &a.Error, &a.AgentID, &a.Dispatch,
			nullTimeCol{&a.StartedAt}, timeCol{&a.EndedAt}); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, classify(rows.Err())
}

// CopyJobResult gives job jobID, still waiting in a run just created, the
// outcome of job from of an earlier run: its status, agent, error, times
// and its steps' statuses, exit codes, errors and times. It is how a rerun
// of the failed jobs reuses a job that succeeded. It returns false if the
// job is not waiting, and ErrNotFound if there is no such job.
func (tx *Tx) CopyJobResult(ctx context.Context, jobID string, from Job) (bool, error) {
	changed, err := tx.execChanged(ctx,
		`UPDATE jobs SET status = ?, agent_id = ?, error = ?, started_at = ?, finished_at = ?
		 WHERE id = ? AND status = 'waiting'`,
		string(from.Status), nullStringArg(from.AgentID), nullStringArg(from.Error),
		nullTimeArg(from.StartedAt), nullTimeArg(from.FinishedAt), jobID)
	if err == nil {
		changed, err = tx.guarded(ctx, changed, "SELECT 1 FROM jobs WHERE id = ?", jobID)
	}
	if err != nil || !changed {
		return false, wrapCopy(jobID, from.ID, err)
	}
	for _, st := range from.Steps {
		if _, err := tx.exec(ctx,
			`UPDATE steps SET status = ?, exit_code = ?, error = ?, started_at = ?, finished_at = ?
			 WHERE job_id = ? AND idx = ?`,
			string(st.Status), nullPtrArg(st.ExitCode), nullStringArg(st.Error),
			nullTimeArg(st.StartedAt), nullTimeArg(st.FinishedAt), jobID, st.Index); err != nil {
			return false, wrapCopy(jobID, from.ID, err)
		}
	}
	return true, nil
}

func wrapCopy(jobID, fromID string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("copy the result of job %q to job %q: %w", fromID, jobID, classify(err))
}
