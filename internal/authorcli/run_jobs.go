package authorcli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// statusNotRun is the summary status of a job left out because the run
// stopped first (a failure without --keep-going, or an interrupt).
const statusNotRun = "not run"

// localRunConfig is what a localRun needs.
type localRunConfig struct {
	// Workflow is the workflow whose jobs run.
	Workflow *workflow.Workflow
	// Dir is the checkout the steps run in, an absolute path.
	Dir string
	// Event and Inputs are the run's event and resolved manual inputs.
	Event  trigger.Event
	Inputs map[string]string
	// Selected holds the expanded names of the jobs to run; nil means all.
	Selected map[string]bool
	// Env (--env) is set for every step, over the workflow's, job's and
	// step's env.
	Env map[string]string
	// Secrets (--secret) are handed to the jobs that declare them, and
	// masked in every job.
	Secrets map[string]string
	// KeepGoing goes on after a failed job instead of stopping.
	KeepGoing bool
	// Runner runs each job; Kill, once closed, kills the running job at
	// once.
	Runner *runner.Runner
	Kill   <-chan struct{}
	// Stdout gets the jobs' output and the summary; Stderr the warnings.
	Stdout, Stderr io.Writer
}

// localRun is one `kici run`: the selected jobs of a workflow, run one at
// a time in dependency order. Like the scheduler, it decides each job once
// its upstreams have ended:
//
//	pending ──upstreams ended──► needs met? ──no──► skipped
//	                                  │ yes
//	                                  ▼
//	                               if true? ──no──► skipped
//	                                  │ └──error──► failure
//	                                  │ yes
//	                                  ▼
//	                               runner ──► success | failure | cancelled
//
//	pending ──the run stops (a failed job without --keep-going, or an
//	          interrupt)──► not run
//
// It is not safe for concurrent use.
type localRun struct {
	cfg    localRunConfig
	vars   workflow.EventVars
	jobs   []*localJob // the selected jobs, in plan order
	byName map[string]*localJob
}

// localJob is one job of a localRun and how it ended.
type localJob struct {
	job    workflow.Job
	status string // "" while pending; then a runner.Status or statusNotRun
	note   string // why it failed, was skipped or counts as success
	dur    time.Duration
	ran    bool // it went through the runner
}

func newLocalRun(cfg localRunConfig) *localRun {
	lr := &localRun{cfg: cfg, vars: cfg.Event.Vars(), byName: map[string]*localJob{}}
	for _, j := range cfg.Workflow.Jobs {
		if cfg.Selected != nil && !cfg.Selected[j.Name] {
			continue
		}
		lj := &localJob{job: j}
		lr.jobs = append(lr.jobs, lj)
		lr.byName[j.Name] = lj
	}
	return lr
}

// run runs the jobs until every one has ended.
func (lr *localRun) run(ctx context.Context) {
	stopping := false
	for lj := lr.next(); lj != nil; lj = lr.next() {
		if stopping || ctx.Err() != nil {
			stopping = true
			lj.status = statusNotRun
			continue
		}
		lr.runJob(ctx, lj)
		switch {
		case ctx.Err() != nil:
			stopping = true
		case lj.failed() && !lr.cfg.KeepGoing:
			stopping = true
			if len(lr.pending()) > 0 {
				fmt.Fprintf(lr.cfg.Stderr, "kici: job %s failed: stopping (--keep-going runs the jobs that do not need it)\n", lj.job.Name)
			}
		}
	}
}

// next returns the first pending job, in plan order, whose selected
// upstreams have all ended; nil when none is left. The compiler refuses
// needs cycles, so while jobs are pending one of them is ready.
func (lr *localRun) next() *localJob {
	for _, lj := range lr.pending() {
		ready := true
		for _, n := range lj.job.Needs {
			if up := lr.byName[n.Job]; up != nil && up.status == "" {
				ready = false
				break
			}
		}
		if ready {
			return lj
		}
	}
	return nil
}

func (lr *localRun) pending() []*localJob {
	var out []*localJob
	for _, lj := range lr.jobs {
		if lj.status == "" {
			out = append(out, lj)
		}
	}
	return out
}

// runJob decides one ready job and, if it is to run, runs it.
func (lr *localRun) runJob(ctx context.Context, lj *localJob) {
	j := lj.job
	p := &jobPrinter{w: lr.cfg.Stdout, job: j.Name, steps: j.Steps, quiet: "[kici] running in " + lr.cfg.Dir}
	needs, overall, unmet := lr.upstreams(j)
	if len(unmet) > 0 {
		lj.skip(p, "needs not met: "+strings.Join(unmet, ", "))
		return
	}
	if absent := lr.absentNeeds(j); len(absent) > 0 {
		fmt.Fprintf(lr.cfg.Stderr, "[%s] warning: needs %s, which --job left out: running anyway, as if they succeeded\n", j.Name, strings.Join(absent, ", "))
	}
	bound := lr.bind(j)
	run, err := workflow.EvalIf(j.If, workflow.IfContext{
		Event: lr.vars, Env: bound.Env, Matrix: j.Matrix, Inputs: lr.cfg.Inputs,
		Needs: needs, Job: workflow.StatusVars{Status: overall},
	})
	switch {
	case err != nil:
		lj.status, lj.note = string(runner.StatusFailure), err.Error()
		p.printf("✗ %s", err)
		return
	case !run:
		lj.skip(p, fmt.Sprintf("if: %s is false", j.If))
		return
	}
	secrets := map[string]string{}
	for _, name := range j.Secrets {
		v, ok := lr.cfg.Secrets[name]
		if !ok {
			fmt.Fprintf(lr.cfg.Stderr, "[%s] warning: secret %s not given (--secret %s=VALUE): its steps see it unset\n", j.Name, name, name)
			continue
		}
		secrets[name] = v
	}
	meta := map[string]string{"KICI_WORKFLOW": lr.cfg.Workflow.Name, "KICI_JOB_NAME": j.Name}
	if lr.cfg.Event.SHA != "" {
		meta["KICI_SHA"] = lr.cfg.Event.SHA
	}
	spec := runner.JobSpec{
		ID:       j.Name,
		Job:      bound,
		Source:   runner.Source{Kind: runner.SourceDir, Dir: lr.cfg.Dir, SHA: lr.cfg.Event.SHA, Ref: lr.cfg.Event.Ref},
		Env:      meta,
		EventEnv: workflow.RuntimeEnv(lr.vars, lr.cfg.Inputs),
		Secrets:  secrets,
		Masks:    slices.Collect(maps.Values(lr.cfg.Secrets)),
		Timeout:  time.Duration(j.TimeoutMS) * time.Millisecond,
		Event:    lr.vars,
		Inputs:   lr.cfg.Inputs,
	}
	start := time.Now()
	exec := lr.cfg.Runner.Start(ctx, spec, p)
	select {
	case <-exec.Done():
	case <-lr.cfg.Kill:
		exec.Kill()
	}
	res := exec.Wait()
	lj.ran, lj.dur = true, time.Since(start)
	lj.status, lj.note = string(res.Status), errText(res.Err)
	if res.Status == runner.StatusFailure && j.ContinueOnError {
		lj.note = "continue-on-error: " + lj.note
	}
}

// bind fills the job with the event and inputs, as the scheduler does, and
// lays --env over every level of its environment.
func (lr *localRun) bind(j workflow.Job) workflow.Job {
	bound := j.Bind(lr.vars, lr.cfg.Inputs)
	maps.Copy(bound.Env, lr.cfg.Env)
	for i, st := range bound.Steps {
		for k, v := range lr.cfg.Env {
			if _, ok := st.Env[k]; ok {
				bound.Steps[i].Env[k] = v // Bind cloned the map
			}
		}
	}
	return bound
}

// upstreams sums up j's needs as the scheduler does: needs maps each
// upstream's base name to its status (the worst of a matrix's
// combinations), overall is what success() and failure() see, and unmet
// lists the upstreams whose status j's conditions do not allow. An upstream
// that --job left out counts as succeeded and meets any condition.
func (lr *localRun) upstreams(j workflow.Job) (needs map[string]workflow.StatusVars, overall string, unmet []string) {
	needs = map[string]workflow.StatusVars{}
	for _, n := range j.Needs {
		status := workflow.NeedSuccess
		if up := lr.byName[n.Job]; up != nil {
			status = up.effectiveStatus()
		}
		base := baseOf(lr.cfg.Workflow, n.Job)
		if lr.byName[n.Job] != nil && !slices.Contains(n.On, status) {
			unmet = append(unmet, fmt.Sprintf("%s (%s)", n.Job, status))
		}
		needs[base] = workflow.StatusVars{Status: worseStatus(needs[base].Status, status)}
	}
	overall = workflow.NeedSuccess
	for _, n := range needs {
		overall = worseStatus(overall, n.Status)
	}
	if overall == workflow.NeedSkipped {
		overall = workflow.NeedSuccess
	}
	return needs, overall, unmet
}

// absentNeeds lists the upstreams of j that --job left out: a matrix job
// by its base name when all its combinations are out.
func (lr *localRun) absentNeeds(j workflow.Job) []string {
	all := map[string]int{} // base name -> combinations in the workflow
	for _, wj := range lr.cfg.Workflow.Jobs {
		all[wj.Base]++
	}
	var names []string
	out := map[string][]string{} // base name -> its absent combinations
	for _, n := range j.Needs {
		if lr.byName[n.Job] != nil {
			continue
		}
		base := baseOf(lr.cfg.Workflow, n.Job)
		if out[base] == nil {
			names = append(names, base)
		}
		out[base] = append(out[base], n.Job)
	}
	var list []string
	for _, base := range names {
		if len(out[base]) == all[base] {
			list = append(list, base)
			continue
		}
		list = append(list, out[base]...)
	}
	return list
}

// baseOf returns the base name of the job called name.
func baseOf(wf *workflow.Workflow, name string) string {
	for _, j := range wf.Jobs {
		if j.Name == name {
			return j.Base
		}
	}
	return name
}

// worseStatus combines the statuses of a matrix job's combinations as the
// scheduler does: failure beats cancelled beats success beats skipped.
func worseStatus(a, b string) string {
	rank := map[string]int{"": 0, workflow.NeedSkipped: 1, workflow.NeedSuccess: 2, workflow.NeedCancelled: 3, workflow.NeedFailure: 4}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// skip ends a job that does not run.
func (lj *localJob) skip(p *jobPrinter, reason string) {
	lj.status, lj.note = string(runner.StatusSkipped), reason
	p.printf("○ skipped: %s", reason)
}

// effectiveStatus is the status the job counts as for its dependants: a
// failure under continue-on-error counts as success.
func (lj *localJob) effectiveStatus() string {
	if lj.status == string(runner.StatusFailure) && lj.job.ContinueOnError {
		return workflow.NeedSuccess
	}
	return lj.status
}

// failed reports whether the job makes the run fail: it failed (without
// continue-on-error), was cancelled, or was left out.
func (lj *localJob) failed() bool {
	switch lj.effectiveStatus() {
	case string(runner.StatusSuccess), string(runner.StatusSkipped):
		return false
	}
	return true
}

// succeeded reports whether every job that ran succeeded.
func (lr *localRun) succeeded() bool {
	return !slices.ContainsFunc(lr.jobs, (*localJob).failed)
}
