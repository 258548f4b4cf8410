package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

// ErrAbandoned is the cancel cause of a job the orchestrator no longer gives
// this agent: after a reconnect, registered.resume did not list it. The job
// is killed at once and its buffered messages are dropped unsent.
var ErrAbandoned = errors.New("job no longer assigned to this agent")

// runningJob is one accepted dispatch while it runs.
type runningJob struct {
	id     string
	cancel context.CancelCauseFunc
	exec   *runner.Execution
	rep    *jobReporter
	buf    *jobBuffer
}

// maxJobDirHold bounds how long an ended job's directory waits for the
// orchestrator to acknowledge the job's final status before it is removed
// anyway (the orchestrator is away; the disk should not fill meanwhile).
const maxJobDirHold = 30 * time.Second

// dispatch answers a job.dispatch: it queues job.reject (seq 1) if the job
// cannot run here, or job.ack (seq 1) and starts the job.
func (a *Agent) dispatch(d *protocol.JobDispatch) {
	log := a.log.With("job_id", d.JobID, "run_id", d.RunID, "attempt", d.Attempt)
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.jobs[d.JobID]; old != nil {
		// A new dispatch of a job still running here: the orchestrator gave
		// up on this run of it.
		log.Warn("job dispatched again while running; abandoning the old run")
		a.abandonLocked(old)
	}
	buf := a.box.open(d.JobID)
	if reason := a.admitLocked(d); reason != "" {
		log.Info("job rejected", "reason", reason)
		a.box.append(buf, &protocol.JobReject{JobID: d.JobID, Reason: reason}, true)
		return
	}
	a.box.append(buf, &protocol.JobAck{JobID: d.JobID}, false)
	a.accepted++
	log.Info("job accepted", "job", d.Job.Name, "sha", d.Source.SHA, "steps", len(d.Job.Steps))

	ctx, cancel := context.WithCancelCause(context.Background())
	rep := newJobReporter(a.box, buf, d.JobID, a.cfg.LogFlushLines, a.cfg.LogFlushInterval)
	j := &runningJob{id: d.JobID, cancel: cancel, rep: rep, buf: buf}
	j.exec = a.runner.Start(ctx, a.jobSpec(d), rep)
	a.jobs[d.JobID] = j
	a.jobsWG.Add(1)
	go a.finishJob(j, log)
}

// admitLocked returns why a dispatch cannot run here, or "".
func (a *Agent) admitLocked(d *protocol.JobDispatch) string {
	switch {
	case a.draining:
		return protocol.RejectShuttingDown
	case slices.ContainsFunc(d.Job.RunsOn, func(l string) bool { return !slices.Contains(a.labels, l) }):
		return protocol.RejectLabels
	case len(a.jobs) >= a.cfg.Concurrency, a.cfg.OneShot && a.accepted > 0:
		return protocol.RejectBusy
	}
	return ""
}

// finishJob waits for a job to end, then queues its final job.status, then
// removes the job's directory (see cleanupJob). The job's processes are all
// gone when the runner reports its end: only the directory outlives it.
func (a *Agent) finishJob(j *runningJob, log *slog.Logger) {
	res := j.exec.Wait()
	j.cancel(nil)
	j.rep.finish(res)
	a.mu.Lock()
	if a.jobs[j.id] == j {
		delete(a.jobs, j.id)
	}
	a.mu.Unlock()
	log.Info("job ended", "status", string(res.Status), "error", errString(res.Err), "exit_code", res.ExitCode)
	a.cleanupWG.Add(1) // before jobsWG.Done: a shutdown that saw the job end waits for this too
	a.jobsWG.Done()
	if a.cfg.OneShot {
		a.oneShotOnce.Do(func() { close(a.oneShotDone) })
	}
	a.cleanupJob(j)
}

// cleanupJob removes an ended job's directory once the orchestrator has
// acknowledged the job's final status (its outbox buffer is gone), so that
// removing a large checkout never delays the status. It removes it sooner
// when the agent stops (cleanupNow) and after maxJobDirHold at the latest.
func (a *Agent) cleanupJob(j *runningJob) {
	defer a.cleanupWG.Done()
	hold := time.NewTimer(maxJobDirHold)
	defer hold.Stop()
	select {
	case <-j.buf.gone:
	case <-a.cleanupNow:
	case <-hold.C:
		a.log.Warn("job's final status not acknowledged; removing its directory anyway", "job_id", j.id, "after", maxJobDirHold.String())
	}
	j.exec.Cleanup()
}

// finishCleanups makes every pending job directory removal start now and
// waits for them, up to the shutdown timeout: a directory left behind is
// removed by the next start (removeStaleJobDirs).
func (a *Agent) finishCleanups() {
	a.cleanupOnce.Do(func() { close(a.cleanupNow) })
	done := make(chan struct{})
	go func() {
		a.cleanupWG.Wait()
		close(done)
	}()
	t := time.NewTimer(a.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
		a.runner.RemoveSpares()
	case <-t.C:
		a.log.Warn("job directories still being removed at exit; the next start removes them", "waited", a.cfg.ShutdownTimeout.String())
	}
}

// cancel answers a job.cancel; a cancel of a job not running here is
// ignored.
func (a *Agent) cancel(c *protocol.JobCancel) {
	a.mu.Lock()
	j := a.jobs[c.JobID]
	a.mu.Unlock()
	if j == nil {
		a.log.Debug("cancel of a job not running here ignored", "job_id", c.JobID)
		return
	}
	reason := c.Reason
	if reason == "" {
		reason = "cancelled by the orchestrator"
	}
	var cause error = fmt.Errorf("%w: %s", runner.ErrCancelled, reason)
	how := "interrupting"
	if c.Force {
		cause, how = runner.Forced(cause), "killing"
	}
	a.log.Info("job cancel", "job_id", c.JobID, "force", c.Force, "reason", reason)
	j.rep.note("cancel requested (%s); %s the running step", reason, how)
	j.cancel(cause)
	if c.Force {
		j.exec.Kill() // also ends a grace period already running
	}
}

// abandon kills a job that is no longer this agent's.
func (a *Agent) abandon(jobID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.jobs[jobID]; j != nil {
		a.abandonLocked(j)
	}
}

func (a *Agent) abandonLocked(j *runningJob) {
	a.log.Warn("job abandoned: the orchestrator no longer assigns it to this agent", "job_id", j.id)
	j.cancel(runner.Forced(ErrAbandoned))
	delete(a.jobs, j.id)
}

// stopJobs cancels every running job with cause.
func (a *Agent) stopJobs(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		j.cancel(cause)
	}
}

// busy lists the running jobs, for heartbeats.
func (a *Agent) busy() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.jobs))
}

// jobSpec turns a dispatch into what the runner runs.
func (a *Agent) jobSpec(d *protocol.JobDispatch) runner.JobSpec {
	src := runner.Source{Kind: d.Source.Kind, CloneURL: d.Source.CloneURL, SHA: d.Source.SHA, Ref: d.Source.Ref}
	if d.Source.Kind == protocol.SourceArchive {
		src.ArchiveURL = a.resolve(d.Source.ArchiveURL)
		src.ArchiveInline, src.ArchiveSHA256 = d.Source.ArchiveInline, d.Source.ArchiveSHA256
	}
	event, inputs := eventFromEnv(d.EventEnv)
	if d.Event != nil {
		event, inputs = *d.Event, d.Inputs
	}
	return runner.JobSpec{
		ID:       d.JobID,
		Job:      d.Job,
		Source:   src,
		Env:      d.Env,
		EventEnv: d.EventEnv,
		Secrets:  d.Secrets,
		Masks:    d.Masks,
		Token:    d.JobToken,
		Timeout:  time.Duration(d.TimeoutMS) * time.Millisecond,
		Event:    event,
		Inputs:   inputs,
		// The API root, resolved as the archive URL is.
		Storage: runner.Storage{APIURL: a.resolve("/api/v1/"), RunID: d.RunID},
	}
}

// resolve turns an archive URL relative to the orchestrator into an
// absolute http(s) URL.
func (a *Agent) resolve(ref string) string {
	u, err := url.Parse(ref)
	if err != nil {
		return ref // the fetch reports it
	}
	return a.bases[a.cur.Load()].ResolveReference(u).String()
}

// eventFromEnv rebuilds what `event.*` and `inputs.*` mean in a step's `if`
// from the KICI_EVENT_* and KICI_INPUT_* variables of a dispatch. The
// variables do not carry event.changed_files, and an input's variable name
// is its name upper-cased with '-' as '_': inputs.NAME is found under the
// lower-cased name, with '_', and with '-'.
func eventFromEnv(env map[string]string) (workflow.EventVars, map[string]string) {
	ev := workflow.EventVars{
		Kind:       env["KICI_EVENT_KIND"],
		Repo:       env["KICI_EVENT_REPO"],
		Ref:        env["KICI_EVENT_REF"],
		Branch:     env["KICI_EVENT_BRANCH"],
		Tag:        env["KICI_EVENT_TAG"],
		SHA:        env["KICI_EVENT_SHA"],
		Before:     env["KICI_EVENT_BEFORE"],
		BaseBranch: env["KICI_EVENT_BASE_BRANCH"],
		HeadBranch: env["KICI_EVENT_HEAD_BRANCH"],
		Action:     env["KICI_EVENT_ACTION"],
		Actor:      env["KICI_EVENT_ACTOR"],
		Fork:       env["KICI_EVENT_FORK"] == "true",
	}
	ev.Number, _ = strconv.Atoi(env["KICI_EVENT_NUMBER"])
	inputs := map[string]string{}
	for k, v := range env {
		name, ok := strings.CutPrefix(k, "KICI_INPUT_")
		if !ok || name == "" {
			continue
		}
		lower := strings.ToLower(name)
		inputs[lower] = v
		inputs[strings.ReplaceAll(lower, "_", "-")] = v
	}
	return ev, inputs
}
