package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Defaults of the Config fields whose zero value means "default".
const (
	DefaultCancelGrace     = 10 * time.Second
	DefaultMaxStepLogBytes = 10 << 20
	DefaultMaxArchiveBytes = 2 << 30
	DefaultOutputDrain     = 2 * time.Second
	// DefaultServiceReadyTimeout bounds the wait for a job's services to
	// report healthy.
	DefaultServiceReadyTimeout = 60 * time.Second
)

// JobLevelStep is the step index of output that belongs to no step: the
// checkout and the runner's own notes.
const JobLevelStep = -1

// Config configures a [Runner].
type Config struct {
	// WorkDir is the directory under which every job gets a fresh
	// directory of its own (removed by [Execution.Cleanup], which Run calls
	// itself); required. It is created if missing.
	WorkDir string
	// CancelGrace is how long a step's process group has between SIGTERM
	// and SIGKILL when the job is cancelled or times out; 0 means
	// DefaultCancelGrace (10 s).
	CancelGrace time.Duration
	// MaxStepLogBytes caps the output text of one step (and of the
	// job-level output) in bytes; past it a marker line is reported and the
	// rest dropped. 0 means DefaultMaxStepLogBytes (10 MiB); negative means
	// no cap.
	MaxStepLogBytes int64
	// MaxArchiveBytes caps the bytes a source archive may extract to; 0
	// means DefaultMaxArchiveBytes (2 GiB).
	MaxArchiveBytes int64
	// OutputDrain is how long the runner keeps reading a step's output
	// after its process exited and its process group was killed (a process
	// that left the group may still hold the pipe); 0 means
	// DefaultOutputDrain (2 s).
	OutputDrain time.Duration
	// HTTPClient fetches source archives; nil means a client with
	// http.DefaultTransport and no overall timeout (the job's context
	// bounds it).
	HTTPClient *http.Client
	// Git is the git program used for git sources; "" means "git" on PATH.
	Git string
	// KeepJobDirs leaves each job's directory in place after the job, for
	// debugging; false removes it.
	KeepJobDirs bool
	// Guard, when not nil, is told about every process group the runner
	// starts, and its Env is added to every such process's environment, so
	// that something outliving the runner's process can kill them (the
	// agent's reaper, internal/agent/reaper). Nil means none.
	Guard ProcessGuard
	// DockerHost is the Docker engine that runs the containers of jobs
	// with `image:` or `services:`, e.g. "unix:///var/run/docker.sock";
	// "" means DOCKER_HOST, or the engine's default socket. The runner
	// connects when the first such job starts, not before.
	DockerHost string
	// ContainerOwner is written into the kici-job-owner label of every
	// container and network the runner makes, so that
	// [Runner.RemoveLeftoverContainers] finds what an earlier run of the
	// same owner left (the agent passes its id). "" leaves the label
	// empty and makes RemoveLeftoverContainers do nothing.
	ContainerOwner string
	// ServiceReadyTimeout bounds the wait for a job's services whose
	// image declares a HEALTHCHECK to report healthy; past it the job
	// fails, naming the service. 0 means DefaultServiceReadyTimeout (60 s).
	ServiceReadyTimeout time.Duration
}

// ProcessGuard is what the runner tells about the process groups it starts.
// Its methods are called from the goroutines of concurrent jobs, so they
// must be safe for concurrent use, and they must not block for long.
type ProcessGuard interface {
	// Env returns variables ("NAME=value") added last to the environment of
	// every process the runner starts.
	Env() []string
	// Started is called right after the leader of a new process group
	// started (its pid is the group id), before its output is read.
	Started(pgid int)
	// Ended is called once every process of the group has been sent
	// SIGKILL, after the leader exited.
	Ended(pgid int)
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.WorkDir == "":
		return errors.New("runner config: WorkDir is required")
	case c.CancelGrace < 0:
		return fmt.Errorf("runner config: CancelGrace is %s, want >= 0", c.CancelGrace)
	case c.MaxArchiveBytes < 0:
		return fmt.Errorf("runner config: MaxArchiveBytes is %d, want >= 0", c.MaxArchiveBytes)
	case c.OutputDrain < 0:
		return fmt.Errorf("runner config: OutputDrain is %s, want >= 0", c.OutputDrain)
	case c.ServiceReadyTimeout < 0:
		return fmt.Errorf("runner config: ServiceReadyTimeout is %s, want >= 0", c.ServiceReadyTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.CancelGrace == 0 {
		c.CancelGrace = DefaultCancelGrace
	}
	if c.MaxStepLogBytes == 0 {
		c.MaxStepLogBytes = DefaultMaxStepLogBytes
	}
	if c.MaxArchiveBytes == 0 {
		c.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if c.OutputDrain == 0 {
		c.OutputDrain = DefaultOutputDrain
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	if c.Git == "" {
		c.Git = "git"
	}
	if c.ServiceReadyTimeout == 0 {
		c.ServiceReadyTimeout = DefaultServiceReadyTimeout
	}
	return c
}

// Runner runs jobs. It is safe for concurrent use; see the package doc.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	spares spares // emptied job directories for the next jobs (see recycle)
	docker docker // the Docker engine's client, made for the first job that needs it
	// transfers bounds the artifact and cache transfers of all its jobs
	// (transfer.go).
	transfers transferSlots
}

// New returns a Runner after validating cfg and creating its WorkDir.
func New(logger *slog.Logger, cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("work dir %q: %w", cfg.WorkDir, err)
	}
	cfg.WorkDir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create work dir %q: %w", dir, err)
	}
	return &Runner{cfg: cfg.withDefaults(), log: logger}, nil
}

// Source kinds of [Source].
const (
	// SourceArchive downloads ArchiveURL (a tar.gz) and extracts it.
	SourceArchive = "archive"
	// SourceGit fetches SHA from CloneURL with git.
	SourceGit = "git"
	// SourceDir runs the steps in Dir itself, as it is (`kici run`).
	SourceDir = "dir"
)

// Source says where a job's code comes from.
type Source struct {
	// Kind is SourceArchive, SourceGit or SourceDir.
	Kind string
	// ArchiveURL is the absolute URL of the tar.gz (SourceArchive). The
	// request carries JobSpec.Token as a bearer token.
	ArchiveURL string
	// ArchiveInline, if not empty, is the tar.gz itself (SourceArchive),
	// sent with the dispatch: it is extracted instead of fetching
	// ArchiveURL, once its SHA-256 matches ArchiveSHA256 (lowercase hex).
	ArchiveInline []byte
	ArchiveSHA256 string
	// CloneURL is what git fetches from (SourceGit).
	CloneURL string
	// SHA is the commit to check out (SourceGit); informational otherwise.
	SHA string
	// Ref is the branch or tag of SHA, if known; git fetches it when the
	// server refuses to serve SHA directly.
	Ref string
	// Dir is the directory to run in (SourceDir).
	Dir string
}

// JobSpec is one job to run.
type JobSpec struct {
	// ID names the job in logs and in its directory's name; required.
	ID string
	// Job is the compiled job; its Steps run in order.
	Job workflow.Job
	// Source is where the code comes from.
	Source Source
	// Env, EventEnv, Job.Env, each step's Env and Secrets are layered over
	// the allow-listed host variables, each overriding the one before.
	Env      map[string]string
	EventEnv map[string]string
	// Secrets are set as environment variables, last, and their values
	// are masked in all output.
	Secrets map[string]string
	// Masks are further strings masked in all output.
	Masks []string
	// Token is the job's bearer token: sent when fetching the archive and
	// masked in all output.
	Token string
	// Timeout bounds the whole job, checkout included; 0 means none.
	Timeout time.Duration
	// Event and Inputs are what `event.*` and `inputs.*` mean in step `if`
	// expressions.
	Event  workflow.EventVars
	Inputs map[string]string
	// Storage is the orchestrator that keeps the job's artifacts and
	// caches; its zero value keeps none (transfer.go).
	Storage Storage
}

// Status is a job's or a step's status, as the contract names them.
type Status string

// Statuses. A job ends StatusSuccess, StatusFailure or StatusCancelled; a
// step is StatusRunning, then one of the other four.
const (
	StatusRunning   Status = "running"
	StatusSuccess   Status = "success"
	StatusFailure   Status = "failure"
	StatusSkipped   Status = "skipped"
	StatusCancelled Status = "cancelled"
)

// StepReport is one status change of a step.
type StepReport struct {
	// Step is the step's index in Job.Steps.
	Step int
	// Name is the step's name.
	Name string
	// Status is StatusRunning when its process started, then the final one.
	Status Status
	// ExitCode is the process's exit code in a final status (128+signal
	// when a signal ended it; 127 when it could not start).
	ExitCode int
	// Err says why the step failed or was cancelled; nil otherwise.
	Err error
	// StartedAt is when the process started; zero for a skipped step.
	StartedAt time.Time
	// FinishedAt is when the step ended, in a final status.
	FinishedAt time.Time
}

// Line is one line of output, masked and at most [MaxLineBytes] long.
type Line struct {
	// TS is when the runner read the line.
	TS time.Time
	// Text is the line without its line ending.
	Text string
}

// Reporter receives what a job does. The runner never calls it
// concurrently for one job, and calls it in order: a step's Log lines come
// after its StatusRunning report and before its final one. Methods must not
// block for long: the step's output waits for them.
type Reporter interface {
	// JobRunning is called once the code is checked out, before the first
	// step. It is not called when the checkout fails.
	JobRunning()
	// StepStatus reports a step starting or ending. Every step gets
	// exactly one final report, skipped steps included.
	StepStatus(StepReport)
	// Log reports one output line of a step, or of JobLevelStep.
	Log(step int, line Line)
	// LogTruncated is called once a step's output reached its cap, after
	// the marker line; no further Log call for that step follows.
	LogTruncated(step int)
}

// Result is how a job ended.
type Result struct {
	// Status is StatusSuccess, StatusFailure or StatusCancelled.
	Status Status
	// Err says why the job failed or was cancelled; nil on success.
	Err error
	// ExitCode is the exit code of the step that failed the job, if any.
	ExitCode int
}

// Execution is a job started with [Runner.Start].
type Execution struct {
	r        *Runner
	done     chan struct{}
	kill     chan struct{}
	killOnce sync.Once
	result   Result
	dir      string // the job's directory; "" if none was made. Set before done.

	cleanOnce sync.Once
}

// Start runs the job in the background and returns at once. Cancel ctx (with
// a cause) to stop the job; call Kill to skip the grace period; Wait for the
// Result.
//
// The job's directory outlives the job, so that removing it (a large
// checkout takes a while) does not delay reporting the Result: call Cleanup
// once the Result is reported. Every process the job started has been killed
// by the time Wait returns; only the directory is left.
func (r *Runner) Start(ctx context.Context, spec JobSpec, rep Reporter) *Execution {
	e := &Execution{r: r, done: make(chan struct{}), kill: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.result, e.dir = r.run(ctx, spec, &serialReporter{rep: rep}, e.kill)
	}()
	return e
}

// Run runs the job, removes its directory and returns its Result; Start
// followed by Wait and Cleanup.
func (r *Runner) Run(ctx context.Context, spec JobSpec, rep Reporter) Result {
	e := r.Start(ctx, spec, rep)
	res := e.Wait()
	e.Cleanup()
	return res
}

// Cleanup waits for the job to end, then empties its directory, unless
// Config.KeepJobDirs is set: what the job left is gone when it returns, and
// the emptied directory is kept (renamed "spare-…") for a later job, or
// removed (see recycle). Later calls return at once. The directory's name
// is unique to this Execution, so this never touches another job's, a new
// dispatch of the same job id included.
func (e *Execution) Cleanup() {
	<-e.done
	e.cleanOnce.Do(func() {
		if e.dir != "" && !e.r.cfg.KeepJobDirs {
			e.r.recycle(e.r.log, e.dir)
		}
	})
}

// Kill makes a job that is already being cancelled stop without waiting out
// the rest of its grace period: the running step's process group gets
// SIGKILL now. To cancel without any grace period in the first place, cancel
// with a cause wrapped by [Forced]. Kill does not by itself end the job:
// cancel the job's context too, so that the Result says why. Kill may be
// called more than once, and after the job ended.
func (e *Execution) Kill() { e.killOnce.Do(func() { close(e.kill) }) }

// Done is closed when the job has ended and Wait would not block.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Wait blocks until the job ends and returns its Result.
func (e *Execution) Wait() Result {
	<-e.done
	return e.result
}

// serialReporter makes sure a Reporter is never called concurrently, even if
// a bug in the runner tried to.
type serialReporter struct {
	mu  sync.Mutex
	rep Reporter
}

func (s *serialReporter) JobRunning() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.JobRunning()
}

func (s *serialReporter) StepStatus(r StepReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.StepStatus(r)
}

func (s *serialReporter) Log(step int, l Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.Log(step, l)
}

func (s *serialReporter) LogTruncated(step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.LogTruncated(step)
}
