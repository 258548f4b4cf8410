// Package pipeline turns an event on a source into runs: it resolves the
// commit, reads the workflows at that commit (for a pull request from a
// fork: at its base commit, never the fork's; a committed lock file, or
// the YAML compiled on the spot), fills in the changed files when a path
// filter needs them, matches every workflow and asks the scheduler for one
// run per matched workflow. It also re-runs a run at its original commit.
//
// A *Pipeline is safe for concurrent use.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// ErrNoWorkflows means the commit holds no workflow and no lock file.
var ErrNoWorkflows = errors.New("no workflows at this commit")

// WorkflowError carries the problems of invalid workflows at a commit.
type WorkflowError struct {
	SHA string
	Err error
}

func (e *WorkflowError) Error() string {
	return fmt.Sprintf("workflows at %s are invalid: %v", short(e.SHA), e.Err)
}

func (e *WorkflowError) Unwrap() error { return e.Err }

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Config tunes the pipeline.
type Config struct {
	// DataDir holds the clone caches of git sources.
	DataDir string
	// GitHubToken and GitHubAPIURL configure github sources.
	GitHubToken  string
	GitHubAPIURL string
	// MaxJobsPerRun is the most jobs a run may have, matrix expansions
	// included (KICI_MAX_JOBS_PER_RUN); 0 means
	// workflow.DefaultMaxJobsPerRun. A workflow over it starts no run.
	MaxJobsPerRun int
	// Changed, when set, is told the source of every branch push the
	// pipeline handles (before its workflows are read) and of every Forget
	// (a source added, changed or removed): the schedules read such a
	// source's default branch again.
	Changed func(source string)
}

// SourceStore reads registered sources.
type SourceStore interface {
	GetSource(ctx context.Context, name string) (store.Source, error)
}

// Pipeline creates runs from events.
type Pipeline struct {
	log   *slog.Logger
	db    SourceStore
	sched *scheduler.Scheduler
	cfg   Config

	mu      sync.Mutex
	sources map[string]cachedSource
	plans   *planCache
}

type cachedSource struct {
	row store.Source
	src source.Source
}

// New returns a pipeline.
func New(logger *slog.Logger, db SourceStore, sched *scheduler.Scheduler, cfg Config) *Pipeline {
	return &Pipeline{log: logger, db: db, sched: sched, cfg: cfg, sources: map[string]cachedSource{}, plans: newPlanCache(planCacheSize)}
}

// Source returns the registered source name and its reader.
func (p *Pipeline) Source(ctx context.Context, name string) (store.Source, source.Source, error) {
	row, err := p.db.GetSource(ctx, name)
	if err != nil {
		return store.Source{}, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.sources[name]; ok && c.row.Kind == row.Kind && c.row.Location == row.Location {
		return row, c.src, nil
	} else if ok {
		closeSource(c.src)
	}
	var src source.Source
	switch row.Kind {
	case store.SourceKind(source.KindLocal):
		src = &source.Local{Path: row.Location}
	case store.SourceKind(source.KindGit):
		dir := filepath.Join(p.cfg.DataDir, "git-cache", name)
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return store.Source{}, nil, fmt.Errorf("create git cache dir: %w", err)
		}
		src = &source.Git{URL: row.Location, CacheDir: dir}
	case store.SourceKind(source.KindGitHub):
		src = &source.GitHub{Repo: row.Location, Token: p.cfg.GitHubToken, APIBaseURL: p.cfg.GitHubAPIURL}
	default:
		return store.Source{}, nil, fmt.Errorf("source %q has unknown kind %q", name, row.Kind)
	}
	p.sources[name] = cachedSource{row: row, src: src}
	return row, src, nil
}

// Forget drops a cached source reader (after the source is removed or
// changed).
func (p *Pipeline) Forget(name string) {
	p.mu.Lock()
	if c, ok := p.sources[name]; ok {
		closeSource(c.src)
	}
	delete(p.sources, name)
	p.mu.Unlock()
	if p.cfg.Changed != nil {
		p.cfg.Changed(name)
	}
}

// Close stops the git processes of every source reader (a read still
// under way finishes first). The pipeline stays usable: a later read
// starts a new process.
func (p *Pipeline) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.sources {
		closeSource(c.src)
		delete(p.sources, name)
	}
}

// closeSource stops the git process a local or git source keeps (a read
// still under way finishes first; a later one starts a new process).
func closeSource(src source.Source) {
	if c, ok := src.(io.Closer); ok {
		_ = c.Close()
	}
}

// Result is what one event did.
type Result struct {
	Event     trigger.Event
	Decisions []trigger.Decision
	Runs      []store.Run
	// Ignored says why nothing was even matched (a pull request from a
	// fork on a source whose fork policy is ignore); empty otherwise.
	Ignored string
	// Invalid holds the problems of the workflow files that did not
	// compile while others did: the valid ones were matched and run, the
	// invalid ones skipped. Nil when every file compiled. (When no file
	// compiles, Trigger returns the *WorkflowError as its error.)
	Invalid *WorkflowError
}

// Trigger runs the pipeline for one event on a source.
//
// A pull request from a fork (ev.Fork) is matched against the workflows of
// its base commit (ev.BaseSHA), never the fork's own, while its runs build
// the fork's head commit (ev.SHA). The source's fork policy then says what
// happens: approve (the default) creates each run awaiting approval, run
// starts it with secrets withheld, ignore starts nothing and says so in
// Result.Ignored.
func (p *Pipeline) Trigger(ctx context.Context, sourceName string, ev trigger.Event) (Result, error) {
	return p.TriggerWorkflows(ctx, sourceName, ev, nil)
}

// TriggerWorkflows is Trigger limited to the workflows named in only
// (every workflow when only is empty): the others are neither matched nor
// listed in the decisions. A name the commit has no workflow of gives an
// *UnknownWorkflowError and starts nothing.
func (p *Pipeline) TriggerWorkflows(ctx context.Context, sourceName string, ev trigger.Event, only []string) (Result, error) {
	row, src, err := p.Source(ctx, sourceName)
	if err != nil {
		return Result{}, err
	}
	if ev.Kind == trigger.KindPush && p.cfg.Changed != nil {
		p.cfg.Changed(sourceName)
	}
	var policy store.ForkPolicy
	workflowsAt := "" // the commit the workflows are read at; "" means ev.SHA
	if ev.Kind == trigger.KindPullRequest && ev.Fork {
		policy = row.ForkPullRequests
		if policy == "" {
			policy = store.ForkApprove
		}
		if policy == store.ForkIgnore {
			return Result{Event: ev, Ignored: fmt.Sprintf(
				"pull request from a fork: source %q's fork policy (fork_pull_requests) is ignore", sourceName)}, nil
		}
		if ev.BaseSHA == "" {
			return Result{Event: ev}, fmt.Errorf("pull request from a fork on source %q: no base commit (pull_request.base.sha) to read the workflows at", sourceName)
		}
		workflowsAt = ev.BaseSHA
	}
	if ev.Repo == "" {
		ev.Repo = sourceName
	}
	if ev.SHA == "" {
		ref := ev.Ref
		if ref == "" {
			ref = "HEAD"
		}
		ev.SHA, err = src.Resolve(ctx, ref)
		if err != nil {
			return Result{Event: ev}, fmt.Errorf("resolve %q on source %q: %w", ref, sourceName, err)
		}
	}
	if workflowsAt == "" {
		workflowsAt = ev.SHA
	}
	plan, invalid, err := p.plan(ctx, row, src, workflowsAt)
	if err != nil {
		return Result{Event: ev}, err
	}
	if invalid != nil && len(plan.Workflows) == 0 {
		return Result{Event: ev}, invalid
	}
	if plan, err = selectWorkflows(plan, workflowsAt, only); err != nil {
		return Result{Event: ev}, err
	}
	if !ev.ChangedFilesKnown && ev.ChangedFilesWarning == "" && needsPaths(plan) {
		p.fillChangedFiles(ctx, sourceName, src, &ev)
	}
	res := Result{Event: ev, Decisions: trigger.MatchAll(plan, ev), Invalid: invalid}
	for i, d := range res.Decisions {
		if !d.Matched {
			continue
		}
		run, err := p.sched.CreateRun(ctx, scheduler.RunInput{Source: sourceName, Workflow: plan.Workflows[i], Event: ev, Inputs: d.Inputs, ForkPolicy: policy})
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

// plan reads the workflows at sha: the lock file if committed, else the
// YAML compiled here. A YAML file that does not compile does not stop the
// others: their plan comes back with the problems as invalid (nil when
// there are none). A lock file is all or nothing.
//
// The result for a commit of a source is kept (p.plans): the same commit
// again is neither read nor compiled. A failed read is not kept. The plan
// returned may be shared: it must not be modified.
func (p *Pipeline) plan(ctx context.Context, row store.Source, src source.Source, sha string) (*workflow.Plan, *WorkflowError, error) {
	key := planKey{source: row.Name, kind: string(row.Kind), location: row.Location, sha: sha}
	if res, ok := p.plans.get(key); ok {
		return res.plan, res.invalid, res.err
	}
	files, lock, err := src.Workflows(ctx, sha)
	if err != nil && !errors.Is(err, workflow.ErrTooManyFiles) {
		return nil, nil, fmt.Errorf("read workflows at %s: %w", short(sha), err)
	}
	var res planResult
	if err != nil {
		res.err = &WorkflowError{SHA: sha, Err: err}
	} else {
		res.plan, res.invalid, res.err = p.compilePlan(files, lock, sha)
	}
	p.plans.put(key, res)
	return res.plan, res.invalid, res.err
}

// compilePlan makes the plan of the workflow files and lock read at sha.
func (p *Pipeline) compilePlan(files []workflow.File, lock []byte, sha string) (_ *workflow.Plan, invalid *WorkflowError, _ error) {
	if lock != nil {
		plan, err := workflow.ParseLock(lock)
		if err != nil {
			return nil, nil, &WorkflowError{SHA: sha, Err: err}
		}
		// A lock file was compiled elsewhere, under whatever limit.
		var errs []error
		for i := range plan.Workflows {
			if err := workflow.CheckJobCount(&plan.Workflows[i], p.cfg.MaxJobsPerRun); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", workflow.LockPath, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, nil, &WorkflowError{SHA: sha, Err: err}
		}
		return plan, nil, nil
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: %w", short(sha), ErrNoWorkflows)
	}
	plan, problems, err := workflow.CompileValid(files, workflow.Options{MaxJobsPerRun: p.cfg.MaxJobsPerRun})
	if err != nil {
		return nil, nil, &WorkflowError{SHA: sha, Err: err}
	}
	if len(problems) > 0 {
		invalid = &WorkflowError{SHA: sha, Err: problems}
	}
	return plan, invalid, nil
}

func needsPaths(plan *workflow.Plan) bool {
	for _, wf := range plan.Workflows {
		for _, t := range wf.Triggers {
			if len(t.Paths) > 0 {
				return true
			}
		}
	}
	return false
}

// Approve starts a run that awaits approval (see scheduler.Approve);
// approver names who approved it, for the run's timeline.
func (p *Pipeline) Approve(ctx context.Context, runID, approver string) (store.Run, error) {
	return p.sched.Approve(ctx, runID, approver)
}

// Rerun starts a new run of a run's workflow, at the same commit and for
// the same event, as its child. A rerun of a fork's pull request keeps
// the fork policy it ran under: it awaits approval again, or runs without
// secrets again.
func (p *Pipeline) Rerun(ctx context.Context, run store.Run) (store.Run, error) {
	rec, err := scheduler.DecodeRecord(run.Event)
	if err != nil {
		return store.Run{}, err
	}
	return p.sched.CreateRun(ctx, scheduler.RunInput{Source: run.Source, Workflow: run.Plan, Event: rec.Event,
		Inputs: rec.ResolvedInputs, ParentRunID: run.ID, ForkPolicy: rec.ForkPolicy})
}
