package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/agent/runner"
)

// errFlushTimeout is the cause of a shutdown whose buffered messages were
// not all acknowledged in time.
var errFlushTimeout = errors.New("shutdown timeout passed")

// Agent is the kici agent runtime: it holds a WebSocket to the orchestrator,
// runs the jobs dispatched to it with a [runner.Runner], and reports them.
//
// Its states (one Run):
//
//	         ┌──────────── close "reconnect", error, heartbeat timeout ───────────┐
//	         ▼                                                                     │
//	──► connecting ──dial, register──► registered: replay, heartbeats, jobs ───────┤
//	      ▲  │                                   │                                 │
//	      │  └─ dial failed ─► backoff ──────────┼─────────────────────────────────┘
//	      └──────────────────────┘               │ close "stop" (4001, 4003, 4008, 4009, 4010, 4040)
//	                                             ▼
//	Run's ctx ends, or one-shot job ended ──► draining ──jobs ended, outbox acknowledged
//	(new dispatches: reject shutting_down)       │      (or ShutdownTimeout)──► stopped
//	                                             └─ close "stop" ─► jobs cancelled ─► stopped (StopError)
//
// Jobs run independently of the connection: a job whose connection drops
// keeps running, and its messages wait in the outbox for the next one.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	id       string
	labels   []string
	hostname string
	runner   *runner.Runner
	// urls are the orchestrator URLs to try in turn, bases the same as
	// http(s) for relative archive URLs, cur the index of the one in use.
	urls   []string
	bases  []*url.URL
	cur    atomic.Int32
	box    *outbox
	jitter func() float64

	// lastRecv is when the current connection last received a message
	// (UnixNano).
	lastRecv atomic.Int64
	// closeCode is the close code of the connection when the agent stops.
	closeCode atomic.Int64

	mu             sync.Mutex
	jobs           map[string]*runningJob
	draining       bool
	accepted       int       // jobs accepted, for one-shot
	disconnectedAt time.Time // when the last connection ended; zero while connected
	jobsWG         sync.WaitGroup

	oneShotDone chan struct{}
	oneShotOnce sync.Once

	// cleanupWG counts the ended jobs whose directory is not removed yet;
	// closing cleanupNow makes them remove it at once (the agent stops).
	cleanupWG   sync.WaitGroup
	cleanupNow  chan struct{}
	cleanupOnce sync.Once
}

// New builds an Agent: it validates cfg, creates the work dir, and loads (or
// generates and saves) the agent id. It starts nothing; see Run.
func New(logger *slog.Logger, cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("work dir %q: %w", cfg.WorkDir, err)
	}
	cfg.WorkDir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	host := cfg.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	id := cfg.AgentID
	if id == "" {
		if id, err = loadOrCreateID(dir, host); err != nil {
			return nil, err
		}
	}
	urls := cfg.orchestratorURLs()
	bases := make([]*url.URL, len(urls))
	for i, raw := range urls {
		base, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		base.Scheme = strings.Replace(base.Scheme, "ws", "http", 1) // ws → http, wss → https
		bases[i] = base
	}
	log := logger.With("agent_id", id)
	rcfg := runner.Config{
		WorkDir:         filepath.Join(dir, "jobs"),
		CancelGrace:     cfg.CancelGrace,
		MaxStepLogBytes: cfg.MaxStepLogBytes,
		HTTPClient:      cfg.HTTPClient,
		KeepJobDirs:     cfg.KeepJobDirs,
		ContainerOwner:  id, // what a crashed run of this agent left is found by it
	}
	if cfg.Reaper != nil {
		rcfg.Guard = cfg.Reaper
	}
	r, err := runner.New(log, rcfg)
	if err != nil {
		return nil, err
	}
	return &Agent{
		cfg:         cfg,
		log:         log,
		id:          id,
		labels:      effectiveLabels(cfg.Labels),
		hostname:    host,
		runner:      r,
		urls:        urls,
		bases:       bases,
		box:         newOutbox(log, cfg.MaxBufferBytes),
		jitter:      func() float64 { return rand.Float64() / 2 },
		jobs:        map[string]*runningJob{},
		oneShotDone: make(chan struct{}),
		cleanupNow:  make(chan struct{}),
	}, nil
}

// ID returns the agent's id.
func (a *Agent) ID() string { return a.id }

// Labels returns the labels the agent registers with, kici's own included.
func (a *Agent) Labels() []string { return append([]string(nil), a.labels...) }

// Run connects to the orchestrator and runs the jobs it dispatches until ctx
// ends, or, for a one-shot agent, until its job has ended. It then drains:
// it refuses new jobs, cancels the running ones (Config.Shutdown =
// ShutdownCancel) or waits for them, waits up to Config.ShutdownTimeout
// for the orchestrator to acknowledge every buffered message, and closes
// the connection. It returns nil after a clean stop, a *StopError when the
// orchestrator refused the agent for good, or an error saying which
// messages were never acknowledged.
func (a *Agent) Run(ctx context.Context) error {
	unlock, err := lockWorkDir(a.cfg.WorkDir)
	if err != nil {
		return err
	}
	defer unlock()
	// The lock proves the work dir's previous agent is gone; what its steps
	// left running goes before this agent takes a job.
	if n, err := a.cfg.Reaper.Adopt(a.cfg.WorkDir); err != nil {
		return err
	} else if n > 0 {
		a.log.Warn("killed processes the previous agent's steps left", "processes", n)
	}
	a.removeStaleJobDirs()
	if n, err := a.runner.RemoveLeftoverContainers(ctx); err != nil {
		a.log.Warn("remove the containers the previous agent's jobs left", "error", err)
	} else if n > 0 {
		a.log.Warn("removed the containers the previous agent's jobs left", "containers", n)
	}
	// Ended jobs' directories go before the work dir's lock is released
	// (deferred calls run last first).
	defer a.finishCleanups()
	a.log.Info("agent starting", "url", strings.Join(a.urls, ","), "labels", a.labels,
		"concurrency", a.cfg.Concurrency, "one_shot", a.cfg.OneShot)
	a.closeCode.Store(int64(websocket.StatusGoingAway))

	// The connection outlives ctx: draining still needs it.
	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConn()
	connEnded := make(chan struct{})
	var connErr error
	go func() {
		defer close(connEnded)
		connErr = a.connectLoop(connCtx)
	}()
	// refused ends the jobs when the orchestrator refused the agent: no one
	// would receive what they report.
	refused := func() error {
		a.setDraining()
		a.stopJobs(runner.Forced(runner.ErrShutdown))
		a.jobsWG.Wait()
		return connErr
	}

	select {
	case <-connEnded:
		return refused()
	case <-ctx.Done():
		a.log.Info("agent stopping", "shutdown", a.cfg.Shutdown)
		a.setDraining()
		if a.cfg.Shutdown == ShutdownCancel {
			a.stopJobs(runner.ErrShutdown)
		}
	case <-a.oneShotDone:
		a.log.Info("one-shot job ended; stopping")
		a.setDraining()
		a.closeCode.Store(int64(websocket.StatusNormalClosure))
	}

	jobsDone := make(chan struct{})
	go func() {
		a.jobsWG.Wait()
		close(jobsDone)
	}()
	select {
	case <-jobsDone:
	case <-connEnded:
		return refused()
	}

	flushCtx, cancelFlush := context.WithTimeoutCause(context.Background(), a.cfg.ShutdownTimeout, errFlushTimeout)
	defer cancelFlush()
	go func() {
		select {
		case <-connEnded:
			cancelFlush()
		case <-flushCtx.Done():
		}
	}()
	flushErr := a.box.waitEmpty(flushCtx)
	stopConn()
	<-connEnded
	if connErr != nil {
		return connErr
	}
	if flushErr != nil {
		return fmt.Errorf("shutdown: %w", flushErr)
	}
	a.log.Info("agent stopped")
	return nil
}

// setDraining makes the agent refuse new jobs.
func (a *Agent) setDraining() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
}

// removeStaleJobDirs removes the job directories an earlier run of this
// agent left behind (it was killed). Run holds the work dir's lock, so no
// other agent uses them.
func (a *Agent) removeStaleJobDirs() {
	dir := filepath.Join(a.cfg.WorkDir, "jobs")
	entries, err := os.ReadDir(dir)
	if err != nil || a.cfg.KeepJobDirs {
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			a.log.Warn("remove stale job directory", "dir", e.Name(), "error", err)
		}
	}
}
