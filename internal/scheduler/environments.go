package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
)

// Job timeline entries of deployment environments.
const (
	EventEnvironmentHeld     = "environment_approval"
	EventEnvironmentApproved = "environment_approved"
)

// gateVerdict is what a job's environment says of a job ready to queue.
type gateVerdict int

const (
	gatePass gateVerdict = iota // queue it
	gateHold                    // leave it waiting for an approval
	gateFail                    // fail it: the run may not deploy there
)

// environmentGate decides whether a job that is ready to queue may be: a
// job of an environment whose protection limits its branches fails when
// the run's branch is not one of them (a pull request's run never
// matches: its code is not the branch's), and one whose environment
// requires an approval waits for it, recorded once with a timeline entry
// and an awaiting_approval event.
func (s *Scheduler) environmentGate(ctx context.Context, tx *store.Tx, runID string, ev trigger.Event, j *store.Job, events *[]apiv1.Event) (gateVerdict, string, error) {
	if err := j.DecodeSpec(); err != nil {
		return gatePass, "", err
	}
	name := j.Spec.Environment
	if name == "" {
		return gatePass, "", nil
	}
	env, err := tx.GetEnvironment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return gatePass, "", nil // an environment without a protection
	}
	if err != nil {
		return gatePass, "", err
	}
	if len(env.Branches) > 0 && !branchAllowed(env.Branches, ev) {
		what := "a pull request's run"
		if ev.Kind != trigger.KindPullRequest {
			what = fmt.Sprintf("this run is of %q", ev.Ref)
		}
		return gateFail, fmt.Sprintf("environment %q accepts runs of branches %s only; %s (kici-admin environments set %s --branches ...)",
			name, strings.Join(env.Branches, ", "), what, name), nil
	}
	if !env.RequireApproval {
		return gatePass, "", nil
	}
	approvals, err := tx.ListJobApprovals(ctx, runID)
	if err != nil {
		return gatePass, "", err
	}
	for _, a := range approvals {
		if a.JobID == j.ID {
			if a.State == store.ApprovalApproved {
				return gatePass, "", nil
			}
			return gateHold, "", nil
		}
	}
	held, err := tx.HoldForApproval(ctx, j.ID, runID)
	if err != nil || !held {
		return gateHold, "", err
	}
	detail := fmt.Sprintf("waiting for approval to deploy to %s: someone with run.approve approves it (kici-admin runs approve %s, or the run's page)", name, runID)
	if _, err := tx.AddJobEvent(ctx, store.JobEvent{JobID: j.ID, RunID: runID, Type: EventEnvironmentHeld, Detail: detail, CreatedAt: s.cfg.Now()}); err != nil {
		return gateHold, "", err
	}
	*events = append(*events, apiv1.Event{Kind: "job", RunID: runID, Job: j.Name, JobID: j.ID, Status: apiv1.JobAwaitingApproval, Error: detail})
	return gateHold, "", nil
}

// branchAllowed reports whether the event's branch matches one of the
// globs. Only a push (or a manual or scheduled run) of a branch can match.
func branchAllowed(globs []string, ev trigger.Event) bool {
	if ev.Kind == trigger.KindPullRequest || ev.Branch == "" {
		return false
	}
	for _, g := range globs {
		if ok, err := doublestar.Match(g, ev.Branch); err == nil && ok {
			return true
		}
	}
	return false
}

// approveJobs approves every job of the run held for its environment and
// advances the run, which queues them; it reports how many it approved.
func (s *Scheduler) approveJobs(ctx context.Context, tx *store.Tx, runID, approver string, events *[]apiv1.Event) (int, error) {
	approvals, err := tx.ListJobApprovals(ctx, runID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range approvals {
		if a.State != store.ApprovalPending {
			continue
		}
		ok, err := tx.ApproveJob(ctx, a.JobID, approver)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		n++
		if _, err := tx.AddJobEvent(ctx, store.JobEvent{JobID: a.JobID, RunID: runID, Type: EventEnvironmentApproved,
			Detail: "approved by " + approver, CreatedAt: s.cfg.Now()}); err != nil {
			return 0, err
		}
	}
	if n == 0 {
		return 0, nil
	}
	more, err := s.advance(ctx, tx, runID)
	*events = append(*events, more...)
	return n, err
}
