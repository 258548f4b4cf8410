package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// ScheduleSet is what the schedules of a source are read from: the
// workflows of its default branch head that have a schedule trigger.
type ScheduleSet struct {
	// SHA is the default branch head the workflows were read at.
	SHA string
	// Workflows are the workflows with at least one schedule trigger, in
	// the plan's order.
	Workflows []workflow.Workflow
	// Invalid holds the problems of the files that did not compile (the
	// others are in Workflows); nil when every file compiled.
	Invalid *WorkflowError
}

// DefaultHead resolves the default branch head of a source (HEAD: what a
// manual run without a ref builds).
func (p *Pipeline) DefaultHead(ctx context.Context, sourceName string) (string, error) {
	_, src, err := p.Source(ctx, sourceName)
	if err != nil {
		return "", err
	}
	sha, err := src.Resolve(ctx, "HEAD")
	if err != nil {
		return "", fmt.Errorf("resolve the default branch head of source %q: %w", sourceName, err)
	}
	return sha, nil
}

// SchedulesAt reads the workflows at commit sha of a source and keeps
// those with a schedule trigger. A commit without workflows gives an empty
// set; one whose workflow files are all invalid gives the
// *WorkflowError.
func (p *Pipeline) SchedulesAt(ctx context.Context, sourceName, sha string) (ScheduleSet, error) {
	row, src, err := p.Source(ctx, sourceName)
	if err != nil {
		return ScheduleSet{}, err
	}
	set := ScheduleSet{SHA: sha}
	plan, invalid, err := p.plan(ctx, row, src, sha)
	if errors.Is(err, ErrNoWorkflows) {
		return set, nil
	}
	if err != nil {
		return set, err
	}
	if invalid != nil && len(plan.Workflows) == 0 {
		return set, invalid
	}
	set.Invalid = invalid
	for _, wf := range plan.Workflows {
		for _, t := range wf.Triggers {
			if t.Type == workflow.TriggerSchedule {
				set.Workflows = append(set.Workflows, wf)
				break
			}
		}
	}
	return set, nil
}

// StartScheduled starts the run of workflow wf (read at commit sha of the
// source's default branch) that its schedule trigger with spec cron owes
// for tick. The run's event is a schedule event at sha that records the
// tick. A tick already claimed, by this orchestrator or another one on
// the same database, gives scheduler.ErrTickTaken and starts nothing.
func (p *Pipeline) StartScheduled(ctx context.Context, sourceName, sha string, wf workflow.Workflow, cron string, tick time.Time) (store.Run, error) {
	ev := trigger.ScheduleEvent(cron, "", tick)
	ev.SHA, ev.Repo = sha, sourceName
	d := trigger.Match(&wf, ev)
	if !d.Matched {
		return store.Run{}, fmt.Errorf("schedule %q of workflow %q did not match its own tick: %s", cron, wf.Name, d.Reason)
	}
	return p.sched.CreateRun(ctx, scheduler.RunInput{Source: sourceName, Workflow: wf, Event: ev, Inputs: d.Inputs, ScheduleTick: tick})
}
