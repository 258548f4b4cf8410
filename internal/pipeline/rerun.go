package pipeline

import (
	"context"

	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
)

// RerunFailed starts a new run of a run's workflow, as Rerun does, that
// runs only the jobs of run (read with its jobs and steps) that failed or
// were cancelled, and the jobs downstream of them; every other job is
// copied into the new run as it ended (see scheduler.ReusableJobs). A run
// that has not ended gives scheduler.ErrRunNotEnded, one with nothing to
// rerun scheduler.ErrNothingFailed.
func (p *Pipeline) RerunFailed(ctx context.Context, run store.Run) (store.Run, error) {
	reuse, err := scheduler.ReusableJobs(run)
	if err != nil {
		return store.Run{}, err
	}
	rec, err := scheduler.DecodeRecord(run.Event)
	if err != nil {
		return store.Run{}, err
	}
	return p.sched.CreateRun(ctx, scheduler.RunInput{Source: run.Source, Workflow: run.Plan, Event: rec.Event,
		Inputs: rec.ResolvedInputs, ParentRunID: run.ID, ForkPolicy: rec.ForkPolicy, Reuse: reuse})
}
