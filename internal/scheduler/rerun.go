package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
)

// ErrRunNotEnded is returned by ReusableJobs for a run that has not ended:
// which of its jobs failed is not known yet.
var ErrRunNotEnded = errors.New("the run has not ended yet; wait for it to end, or cancel it")

// ErrNothingFailed is returned by ReusableJobs for a run none of whose
// jobs failed or was cancelled: a rerun of its failed jobs would run
// nothing.
var ErrNothingFailed = errors.New("no job of the run failed or was cancelled, so there is nothing to rerun; rerun the whole run instead")

// ReusableJobs returns, by name, the jobs of parent (read with its jobs
// and steps) that a rerun of its failed jobs copies instead of running:
// every job except those that failed or were cancelled and those
// downstream of them (through needs, transitively), which run again. A job
// skipped because such a job did not succeed is downstream of it, so it
// runs again too; one skipped by its own if: is copied as skipped. parent
// must have ended (ErrRunNotEnded) and have a job that failed or was
// cancelled (ErrNothingFailed).
func ReusableJobs(parent store.Run) (map[string]store.Job, error) {
	if !runstate.RunTerminal(parent.Status) {
		return nil, fmt.Errorf("run %s is %s: %w", parent.ID, parent.Status, ErrRunNotEnded)
	}
	dependants := map[string][]string{}
	var again []string
	for _, j := range parent.Jobs {
		for _, n := range j.Spec.Needs {
			dependants[n.Job] = append(dependants[n.Job], j.Name)
		}
		if j.Status == store.JobFailure || j.Status == store.JobCancelled {
			again = append(again, j.Name)
		}
	}
	if len(again) == 0 {
		return nil, fmt.Errorf("run %s: %w", parent.ID, ErrNothingFailed)
	}
	rerun := map[string]bool{}
	for len(again) > 0 {
		name := again[len(again)-1]
		again = again[:len(again)-1]
		if rerun[name] {
			continue
		}
		rerun[name] = true
		again = append(again, dependants[name]...)
	}
	reuse := map[string]store.Job{}
	for _, j := range parent.Jobs {
		if !rerun[j.Name] {
			reuse[j.Name] = j
		}
	}
	return reuse, nil
}

// reuseJobs copies into run, just created in tx from in, the outcome of
// each job in.Reuse names (see ReusableJobs), and notes on the job's
// timeline where it comes from. The copies have ended, so their
// dependants see them as they ended in the earlier run.
func (s *Scheduler) reuseJobs(ctx context.Context, tx *store.Tx, run store.Run, in RunInput, now time.Time) error {
	for _, j := range run.Jobs {
		from, ok := in.Reuse[j.Name]
		if !ok {
			continue
		}
		if _, err := tx.CopyJobResult(ctx, j.ID, from); err != nil {
			return err
		}
		detail := fmt.Sprintf("reused from run %s: the job ended %s there (job %s) and does not run again", in.ParentRunID, from.Status, from.ID)
		if _, err := tx.AddJobEvent(ctx, store.JobEvent{JobID: j.ID, RunID: run.ID, Type: EventReused,
			AgentID: from.AgentID, Detail: detail, CreatedAt: now}); err != nil {
			return err
		}
	}
	return nil
}
