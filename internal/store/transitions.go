package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The updates in this file are guarded: each applies only if the row's
// current status is one of the From statuses the caller allows, checked and
// written in one statement, so two writers racing on one row cannot both
// win. The caller's state machine decides which from-states are legal; the
// store only enforces them atomically. Each returns true if the row
// changed, false (and no error) if the row exists in another status, and
// ErrNotFound if there is no such row.
//
// Optional fields are pointers: nil leaves the column as it is. Use
// new(value) to set one.

// errNoFrom is returned when a guarded update names no from-state.
var errNoFrom = errors.New("no allowed from-status given")

// RunTransition moves a run to another status.
type RunTransition struct {
	ID string
	// From are the statuses the run may be in; required.
	From []RunStatus
	To   RunStatus
	// Error sets the run's error ("" clears it).
	Error *string
	// StartedAt and FinishedAt set those times.
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// UpdateRunStatus applies t if the run is in one of t.From.
func (q *queries) UpdateRunStatus(ctx context.Context, t RunTransition) (bool, error) {
	changed, err := q.updateRunStatus(ctx, t)
	if err != nil {
		return false, fmt.Errorf("set run %q to %q: %w", t.ID, t.To, classify(err))
	}
	return changed, nil
}

func (q *queries) updateRunStatus(ctx context.Context, t RunTransition) (bool, error) {
	if len(t.From) == 0 {
		return false, errNoFrom
	}
	args := []any{string(t.To)}
	args = append(args, optionalText(t.Error)...)
	args = append(args, nullTimeArg(t.StartedAt), nullTimeArg(t.FinishedAt), t.ID)
	args = append(args, statusArgs(t.From)...)
	changed, err := q.execChanged(ctx,
		`UPDATE runs SET status = ?,
		   error = `+optionalTextSQL("error")+`,
		   started_at = COALESCE(?, started_at),
		   finished_at = COALESCE(?, finished_at)
		 WHERE id = ? AND status IN (`+placeholders(len(t.From))+`)`,
		args...)
	if err != nil {
		return false, err
	}
	return q.guarded(ctx, changed, "SELECT 1 FROM runs WHERE id = ?", t.ID)
}

// JobTransition moves a job to another status.
type JobTransition struct {
	ID string
	// From are the statuses the job may be in; required.
	From []JobStatus
	To   JobStatus
	// AgentID sets the job's agent ("" clears it).
	AgentID *string
	// Error sets the job's error ("" clears it).
	Error *string
	// Attempt sets the job's attempt counter.
	Attempt *int
	// StartedAt and FinishedAt set those times.
	StartedAt  *time.Time
	FinishedAt *time.Time
	// ResetSeq sets the job's last applied message seq back to 0, as a new
	// dispatch does: sequence numbers start again with each dispatch.
	ResetSeq bool
}

// UpdateJobStatus applies t if the job is in one of t.From.
func (q *queries) UpdateJobStatus(ctx context.Context, t JobTransition) (bool, error) {
	changed, err := q.updateJobStatus(ctx, t)
	if err != nil {
		return false, fmt.Errorf("set job %q to %q: %w", t.ID, t.To, classify(err))
	}
	return changed, nil
}

func (q *queries) updateJobStatus(ctx context.Context, t JobTransition) (bool, error) {
	if len(t.From) == 0 {
		return false, errNoFrom
	}
	args := []any{string(t.To)}
	args = append(args, optionalText(t.AgentID)...)
	args = append(args, optionalText(t.Error)...)
	args = append(args, nullPtrArg(t.Attempt), nullTimeArg(t.StartedAt), nullTimeArg(t.FinishedAt))
	seq := ""
	if t.ResetSeq {
		seq = ", last_seq = 0"
	}
	if t.To == JobQueued {
		// A move to queued is an entry into the queue (Job.QueuedAt).
		seq += ", queued_at = ?"
		args = append(args, timeArg(q.clock.Now()))
	}
	args = append(args, t.ID)
	args = append(args, statusArgs(t.From)...)
	changed, err := q.execChanged(ctx,
		`UPDATE jobs SET status = ?,
		   agent_id = `+optionalTextSQL("agent_id")+`,
		   error = `+optionalTextSQL("error")+`,
		   attempt = COALESCE(?, attempt),
		   started_at = COALESCE(?, started_at),
		   finished_at = COALESCE(?, finished_at)`+seq+`
		 WHERE id = ? AND status IN (`+placeholders(len(t.From))+`)`,
		args...)
	if err != nil {
		return false, err
	}
	return q.guarded(ctx, changed, "SELECT 1 FROM jobs WHERE id = ?", t.ID)
}

// StepTransition moves a step to another status.
type StepTransition struct {
	JobID string
	Index int
	// From are the statuses the step may be in; required.
	From []StepStatus
	To   StepStatus
	// ExitCode sets the step's exit code.
	ExitCode *int
	// Error sets the step's error ("" clears it).
	Error *string
	// StartedAt and FinishedAt set those times.
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// UpdateStepStatus applies t if the step is in one of t.From.
func (q *queries) UpdateStepStatus(ctx context.Context, t StepTransition) (bool, error) {
	changed, err := q.updateStepStatus(ctx, t)
	if err != nil {
		return false, fmt.Errorf("set step %d of job %q to %q: %w", t.Index, t.JobID, t.To, classify(err))
	}
	return changed, nil
}

func (q *queries) updateStepStatus(ctx context.Context, t StepTransition) (bool, error) {
	if len(t.From) == 0 {
		return false, errNoFrom
	}
	args := []any{string(t.To), nullPtrArg(t.ExitCode)}
	args = append(args, optionalText(t.Error)...)
	args = append(args, nullTimeArg(t.StartedAt), nullTimeArg(t.FinishedAt), t.JobID, t.Index)
	args = append(args, statusArgs(t.From)...)
	changed, err := q.execChanged(ctx,
		`UPDATE steps SET status = ?,
		   exit_code = COALESCE(?, exit_code),
		   error = `+optionalTextSQL("error")+`,
		   started_at = COALESCE(?, started_at),
		   finished_at = COALESCE(?, finished_at)
		 WHERE job_id = ? AND idx = ? AND status IN (`+placeholders(len(t.From))+`)`,
		args...)
	if err != nil {
		return false, err
	}
	return q.guarded(ctx, changed, "SELECT 1 FROM steps WHERE job_id = ? AND idx = ?", t.JobID, t.Index)
}

// ApplyJobMessage records that the agent message with sequence number seq
// for the job is being applied: it raises the job's last_seq to seq if seq
// is higher, and reports whether it did. False means the message is a
// duplicate (or older than one already applied) and must be ignored. Call
// it in the same transaction as the writes the message causes, so that the
// message is applied exactly once even if the process dies half-way. A
// missing job gives ErrNotFound.
func (q *queries) ApplyJobMessage(ctx context.Context, jobID string, seq int64) (bool, error) {
	changed, err := q.execChanged(ctx, "UPDATE jobs SET last_seq = ? WHERE id = ? AND last_seq < ?", seq, jobID, seq)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM jobs WHERE id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("apply message %d of job %q: %w", seq, jobID, classify(err))
	}
	return changed, nil
}

// LockJobHead is GetJobHead that also takes the job row's lock until the
// transaction ends (SELECT … FOR NO KEY UPDATE on PostgreSQL; SQLite has a
// single writer), so that the job's last_seq read here stays the one to
// compare with until RaiseJobLastSeq: a transaction that applies several
// messages of the job checks each against it and raises it once.
func (tx *Tx) LockJobHead(ctx context.Context, id string) (Job, error) {
	lock := ""
	if tx.d.numbered {
		lock = " FOR NO KEY UPDATE"
	}
	j, err := scanJobEncoded(tx.queryRow(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = ?"+lock, id))
	if err != nil {
		return Job{}, fmt.Errorf("lock job %q: %w", id, classify(err))
	}
	return j, nil
}

// RaiseJobLastSeq sets the job's last_seq to seq if that is higher: the
// write of ApplyJobMessage, for messages checked against a last_seq read
// with LockJobHead in the same transaction.
func (tx *Tx) RaiseJobLastSeq(ctx context.Context, jobID string, seq int64) error {
	if _, err := tx.exec(ctx, "UPDATE jobs SET last_seq = ? WHERE id = ? AND last_seq < ?", seq, jobID, seq); err != nil {
		return fmt.Errorf("apply messages up to %d of job %q: %w", seq, jobID, classify(err))
	}
	return nil
}

// optionalText returns the two arguments optionalTextSQL expects: whether
// to set the column, and the value ("" for NULL).
func optionalText(p *string) []any {
	if p == nil {
		return []any{false, nil}
	}
	return []any{true, nullStringArg(*p)}
}

// optionalTextSQL is the new value of a nullable text column that is set
// only when the first of two arguments is true.
func optionalTextSQL(column string) string {
	return "CASE WHEN ? THEN ? ELSE " + column + " END"
}

// LockRun serialises the transactions that advance one run: it takes the
// run row's lock (SELECT … FOR NO KEY UPDATE on PostgreSQL) until the
// transaction ends. NO KEY UPDATE, not UPDATE: rows that reference the
// run (queue rows, jobs) take KEY SHARE locks on it, and two transactions
// each holding one and asking for FOR UPDATE deadlock. Without it, two transactions that each end one of a
// run's last jobs could each see the other job still running, and neither
// would end the run. SQLite has a single writer, so there it only checks
// that the run exists. A missing run gives ErrNotFound.
func (tx *Tx) LockRun(ctx context.Context, runID string) error {
	lock := ""
	if tx.d.numbered {
		lock = " FOR NO KEY UPDATE"
	}
	var id string
	err := tx.queryRow(ctx, "SELECT id FROM runs WHERE id = ?"+lock, runID).Scan(&id)
	if err != nil {
		return fmt.Errorf("lock run %q: %w", runID, classify(err))
	}
	return nil
}
