package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// Timeline entries (job events) about a job's attempts and about the jobs
// a rerun of the failed jobs reuses.
const (
	// EventAttemptEnded records an attempt that ended with a retry cause:
	// how it ended and whether the job is tried again.
	EventAttemptEnded = "attempt_ended"
	// EventReused records a job copied from the run a rerun reruns.
	EventReused = "reused"
)

// Retried is a job that RetryTx sent back to the queue for another
// attempt.
type Retried struct {
	// Events are to be published once the transaction committed.
	Events []apiv1.Event
	// Detail is the timeline entry written, e.g. "attempt 1 ended: agent
	// lost (…); retrying as attempt 2 of 3".
	Detail string
	// Ended and Next are the numbers of the attempt that ended and of the
	// one queued.
	Ended, Next int
	// Started are the steps (by index) that had started in the ended
	// attempt: their logs hold its lines.
	Started []int
}

// causeLabels say in words how an attempt with each cause ended.
var causeLabels = map[string]string{
	workflow.RetryAgentLost:      "agent lost",
	workflow.RetryInfrastructure: "infrastructure failure",
	workflow.RetryTimeout:        "timed out",
	workflow.RetryFailure:        "failed",
}

// RetryTx is asked, in the transaction that is about to end job with
// failure, whether the job's attempt should instead be followed by
// another: cause is why the attempt ended (a workflow.Retry* cause; ""
// for an end no retry applies to) and reason the error the job would end
// with. The job must have been read in tx.
//
// The job is retried when its retry policy (workflow.Job.EffectiveRetry)
// names the cause, it has retries left, and no cancel of it was asked for
// (a run's cancel stops its retries). Then, in tx, it goes back to the
// queue as its next attempt (store.Tx.RetryJob) and its timeline records
// how the attempt ended; the caller must not end the job. Its dependants
// stay waiting: nothing downstream is decided before the final attempt
// ends. RetryTx returns nil when the job is not retried (and then records
// the end of a last attempt of a job that was retried before, or whose
// retries ran out, in its timeline).
func (s *Scheduler) RetryTx(ctx context.Context, tx *store.Tx, job store.Job, cause, reason string) (*Retried, error) {
	if cause == "" {
		return nil, nil
	}
	if err := job.DecodeSpec(); err != nil {
		return nil, err
	}
	policy := job.Spec.EffectiveRetry()
	ended := job.Retries + 1
	what := fmt.Sprintf("attempt %d ended: %s (%s)", ended, causeLabels[cause], strings.TrimPrefix(reason, "agent lost: "))
	now := s.cfg.Now()
	note := func(detail string) error {
		_, err := tx.AddJobEvent(ctx, store.JobEvent{JobID: job.ID, RunID: job.RunID, Type: EventAttemptEnded,
			AgentID: job.AgentID, Detail: detail, CreatedAt: now})
		return err
	}
	switch {
	case !slices.Contains(policy.When, cause):
		if job.Retries == 0 {
			return nil, nil // an ordinary end: the job's error says it all
		}
		return nil, note(fmt.Sprintf("%s; not retried: its retry.when does not name %s", what, cause))
	case job.Retries >= policy.Max:
		return nil, note(fmt.Sprintf("%s; no retries left (retry max %d)", what, policy.Max))
	}
	asked, err := cancelAsked(ctx, tx, job.ID)
	if err != nil {
		return nil, err
	}
	if asked {
		return nil, note(what + "; not retried: its cancel was asked for")
	}
	steps := job.Steps
	if steps == nil { // read without its steps (GetJobHead)
		if steps, err = tx.ListJobSteps(ctx, job.ID); err != nil {
			return nil, err
		}
	}
	r := &Retried{Ended: ended, Next: ended + 1,
		Detail: fmt.Sprintf("%s; retrying as attempt %d of %d", what, ended+1, policy.Max+1)}
	req := store.Retry{Job: job, From: runstate.RetryFrom(), Cause: cause, Error: reason, Reason: r.Detail}
	if s.cfg.QueueTimeout > 0 {
		exp := now.Add(s.cfg.QueueTimeout)
		req.QueueExpiresAt = &exp
	}
	ok, err := tx.RetryJob(ctx, req)
	if err != nil || !ok {
		return nil, err // the attempt was settled otherwise meanwhile
	}
	if err := note(r.Detail); err != nil {
		return nil, err
	}
	r.Events = append(r.Events, apiv1.Event{Kind: "job", RunID: job.RunID, Job: job.Name, JobID: job.ID,
		Status: string(store.JobQueued), Error: r.Detail})
	for _, st := range steps {
		if st.StartedAt != nil {
			r.Started = append(r.Started, st.Index)
		}
		if st.Status != store.StepPending {
			idx := st.Index
			r.Events = append(r.Events, apiv1.Event{Kind: "step", RunID: job.RunID, Job: job.Name, JobID: job.ID,
				Step: &idx, Status: string(store.StepPending)})
		}
	}
	return r, nil
}

// cancelAsked reports whether a cancel of the job was asked for and not
// yet carried out: it is recorded on the job's queue row (see
// store.Tx.RequestCancel).
func cancelAsked(ctx context.Context, tx *store.Tx, jobID string) (bool, error) {
	e, err := tx.GetQueueEntry(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return e.CancelReason != "", nil
}
