package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// jobRun is one job being run: what every stage of it needs.
type jobRun struct {
	r    *Runner
	log  *slog.Logger
	spec JobSpec
	rep  Reporter
	kill <-chan struct{}
	mask *masker
	out  *output // the job-level log
	dirs jobDirs
	src  string // the directory the steps run in
	// scripts holds the steps' script files, written while the checkout
	// runs (see writeScripts); nil before the job's directory exists.
	scripts *scriptFiles
	// ctr is what the job has on the Docker engine when it has an image
	// or services; nil otherwise.
	ctr *jobContainers
}

// scriptFiles are a job's step scripts being written in the background.
type scriptFiles struct {
	done chan struct{} // closed once every file is written or failed
	errs []error       // per step, valid after done
}

// jobDirs is a job's private directory and its parts.
type jobDirs struct {
	root    string
	src     string // the checkout of archive and git sources
	scripts string // one script file per step
	tmp     string // the steps' TMPDIR
}

// run is the whole job, behind Start. Its states:
//
//	start ─► checkout ─ok─► JobRunning ─► containers ─ok─► step 0 … step n ─► teardown ─► Result
//	            │                             │                  │               ▲
//	            │                             │                  └─ cancel/job timeout:
//	            │                             │                     remaining steps skipped
//	            │                             └─ fail/cancel: every step skipped ┘
//	            └─ fail/cancel: every step skipped ─────────────────────────────────► Result
//
// The containers stage (prepareContainers) and the teardown are only for a
// job with an image or services; the teardown runs however the job ended.
// Right before step 0, beforeSteps fetches the artifacts of the jobs this
// one needs (a failure skips every step, as a failed containers stage
// does) and restores its caches; right after step n, afterSteps uploads
// its artifacts and saves its caches (storage_job.go).
//
// It returns the job's directory too ("" if none was made), which it leaves
// in place: see [Execution.Cleanup].
func (r *Runner) run(ctx context.Context, spec JobSpec, rep Reporter, kill <-chan struct{}) (Result, string) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if spec.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, spec.Timeout, &TimeoutError{Scope: "job", After: spec.Timeout})
		defer stop()
	}
	mask := newMasker(append(append(slices.Collect(maps.Values(spec.Secrets)), spec.Masks...), spec.Token)...)
	j := &jobRun{
		r:    r,
		log:  r.log.With("job_id", spec.ID),
		spec: spec,
		rep:  rep,
		kill: kill,
		mask: mask,
		out:  newOutput(JobLevelStep, rep, mask, r.cfg.MaxStepLogBytes),
	}
	res := j.run(ctx)
	if res.Err != nil {
		res.Err = maskError(mask, res.Err)
	}
	return res, j.dirs.root
}

func (j *jobRun) run(ctx context.Context) Result {
	// An archive's download starts before the job directory is made: the
	// request's round trip overlaps the directory's creation.
	// An inline archive needs no request: it is noted at the same point,
	// and extracted once the directory exists.
	var pre *prefetch
	if src := j.spec.Source; src.Kind == SourceArchive {
		if len(src.ArchiveInline) > 0 {
			j.out.note("using the archive sent with the job (%s)", formatBytes(int64(len(src.ArchiveInline))))
		} else {
			pre = j.startFetch(ctx, src.ArchiveURL)
		}
	}
	dirs, err := j.r.makeDirs(j.spec.ID)
	j.dirs = dirs // on an error too: Cleanup removes what was made
	if err != nil {
		pre.discard()
		return j.abort(ctx, fmt.Errorf("prepare job directory: %w", err))
	}
	j.writeScripts()
	defer func() { <-j.scripts.done }() // nothing writes in the directory after the job
	src, err := j.checkout(ctx, pre)
	if err != nil {
		return j.abort(ctx, infrastructure(fmt.Errorf("checkout: %w", err)))
	}
	j.src = src
	j.rep.JobRunning()
	if j.needsContainers() {
		ctr, err := j.prepareContainers(ctx)
		defer ctr.teardown(ctx)
		if err != nil {
			return j.abort(ctx, fmt.Errorf("prepare containers: %w", err))
		}
		j.ctr = ctr
	}
	k, err := j.beforeSteps(ctx) // artifacts of the needed jobs, caches (storage_job.go)
	if err != nil {
		return j.abort(ctx, err)
	}
	return j.afterSteps(ctx, k, j.steps(ctx))
}

// abort ends a job that could not start its steps: every step is skipped.
func (j *jobRun) abort(ctx context.Context, err error) Result {
	res := Result{Status: StatusFailure, Err: err}
	if ctx.Err() != nil {
		cause := causeOf(ctx)
		res = Result{Status: statusOf(cause), Err: cause}
	}
	j.out.note("%v", res.Err)
	j.out.close()
	for i, st := range j.spec.Job.Steps {
		j.skip(i, st)
	}
	return res
}

// steps runs the steps in order and sums them up.
func (j *jobRun) steps(ctx context.Context) Result {
	status := StatusSuccess // the job's status so far, as `if` sees it
	var failed Result       // the first failure, when status is StatusFailure
	interrupted := false    // a cancel or job timeout stopped the job
	for i, st := range j.spec.Job.Steps {
		if ctx.Err() != nil {
			interrupted = true
			j.skip(i, st)
			continue
		}
		env, ifEnv := j.stepEnv(st)
		cond := st.If
		if strings.TrimSpace(cond) == "" {
			cond = "success()"
		}
		ok, err := workflow.EvalIf(cond, workflow.IfContext{
			Event:  j.spec.Event,
			Env:    ifEnv,
			Matrix: j.spec.Job.Matrix,
			Inputs: j.spec.Inputs,
			Job:    workflow.StatusVars{Status: string(status)},
		})
		var rep StepReport
		switch {
		case err != nil:
			now := time.Now()
			rep = StepReport{Step: i, Name: st.Name, Status: StatusFailure, Err: err, FinishedAt: now}
			j.rep.StepStatus(rep)
		case !ok:
			j.skip(i, st)
			continue
		default:
			rep = j.runStep(ctx, i, st, env)
		}
		switch {
		case rep.Status == StatusCancelled || rep.Status == StatusFailure && ctx.Err() != nil:
			interrupted = true
		case rep.Status == StatusFailure && !st.ContinueOnError && status == StatusSuccess:
			status = StatusFailure
			failed = Result{Status: StatusFailure, Err: fmt.Errorf("step %q: %w", st.Name, rep.Err), ExitCode: rep.ExitCode}
		}
	}
	switch {
	case interrupted && ctx.Err() != nil:
		cause := causeOf(ctx)
		return Result{Status: statusOf(cause), Err: cause}
	case status == StatusFailure:
		return failed
	}
	return Result{Status: StatusSuccess}
}

// skip reports a step skipped.
func (j *jobRun) skip(i int, st workflow.Step) {
	j.rep.StepStatus(StepReport{Step: i, Name: st.Name, Status: StatusSkipped, FinishedAt: time.Now()})
}

// runStep runs one step's script and reports it; it returns the final report.
func (j *jobRun) runStep(ctx context.Context, i int, st workflow.Step, env []string) StepReport {
	rep := StepReport{Step: i, Name: st.Name}
	fail := func(code int, err error) StepReport {
		rep.Status, rep.ExitCode, rep.Err, rep.FinishedAt = StatusFailure, code, maskError(j.mask, err), time.Now()
		j.rep.StepStatus(rep)
		return rep
	}
	if st.TimeoutMS > 0 {
		d := time.Duration(st.TimeoutMS) * time.Millisecond
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, d, &TimeoutError{Scope: "step", After: d})
		defer stop()
	}
	dir, err := workingDir(j.src, st.WorkingDirectory)
	if err != nil {
		return fail(0, err)
	}
	script := scriptPath(j.dirs, i)
	<-j.scripts.done
	if err := j.scripts.errs[i]; err != nil {
		return fail(0, fmt.Errorf("write script: %w", err))
	}
	command := shellCommand
	if j.ctr.inImage() {
		command = containerCommand
	}
	argv, err := command(st.Shell, script)
	if err != nil {
		return fail(0, err)
	}
	out := newOutput(i, j.rep, j.mask, j.r.cfg.MaxStepLogBytes)
	started := func(t time.Time) {
		rep.Status, rep.StartedAt = StatusRunning, t
		j.rep.StepStatus(rep)
	}
	var res procResult
	if j.ctr.inImage() {
		res = j.ctr.runStep(ctx, j.kill, i, argv, dir, env, out, started)
	} else {
		res = j.r.runProcess(ctx, j.kill, argv, dir, env, out, started)
		if res.startErr != nil {
			res.startErr = fmt.Errorf("start %q: %w", argv[0], res.startErr)
		}
	}
	if res.startErr != nil {
		return fail(res.exitCode, res.startErr)
	}
	rep.ExitCode, rep.FinishedAt = res.exitCode, time.Now()
	switch {
	case res.stopped:
		cause := ErrCancelled
		if ctx.Err() != nil {
			cause = causeOf(ctx)
		}
		rep.Status, rep.Err = statusOf(cause), cause
	case res.err != nil:
		rep.Status, rep.Err = StatusFailure, maskError(j.mask, res.err)
	case res.exitCode == 0:
		rep.Status = StatusSuccess
	default:
		rep.Status, rep.Err = StatusFailure, fmt.Errorf("exited with code %d", res.exitCode)
	}
	j.rep.StepStatus(rep)
	return rep
}

// writeScripts starts writing every step's script into the job's scripts
// directory, in the background: the files are ready by the time the
// checkout is, instead of the first step waiting for its own.
func (j *jobRun) writeScripts() {
	steps := j.spec.Job.Steps
	w := &scriptFiles{done: make(chan struct{}), errs: make([]error, len(steps))}
	j.scripts = w
	go func() {
		defer close(w.done)
		for i, st := range steps {
			body := st.Run
			if !strings.HasSuffix(body, "\n") {
				body += "\n"
			}
			w.errs[i] = os.WriteFile(scriptPath(j.dirs, i), []byte(body), 0o700)
		}
	}()
}

// scriptPath is the file of step i's script.
func scriptPath(d jobDirs, i int) string {
	return filepath.Join(d.scripts, fmt.Sprintf("step-%d", i))
}

// workingDir resolves a step's working-directory against the checkout.
func workingDir(src, wd string) (string, error) {
	if wd == "" {
		return src, nil
	}
	if !filepath.IsLocal(filepath.FromSlash(wd)) {
		return "", fmt.Errorf("working-directory %q: must be a relative path inside the checkout", wd)
	}
	dir := filepath.Join(src, filepath.FromSlash(wd))
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("working-directory %q: %w", wd, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("working-directory %q: not a directory", wd)
	}
	return dir, nil
}

// removeDirs removes a job's directory, making read-only directories (a Go
// module cache, say) writable first if it has to.
func (r *Runner) removeDirs(log *slog.Logger, root string) {
	if os.RemoveAll(root) == nil {
		return
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(root); err != nil {
		log.Warn("remove job directory", "dir", root, "error", err)
	}
}

// safeName keeps the characters of id that are safe in a file name.
func safeName(id string) string {
	var b strings.Builder
	for _, c := range id {
		if b.Len() >= 40 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// maskedError is an error whose message had secrets masked; it still
// unwraps to the original for errors.Is.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// maskError masks secret values in err's message.
func maskError(m *masker, err error) error {
	if err == nil {
		return nil
	}
	msg := m.apply(err.Error())
	if msg == err.Error() {
		return err
	}
	var me *maskedError
	if errors.As(err, &me) {
		err = me.err
	}
	return &maskedError{msg: msg, err: err}
}
