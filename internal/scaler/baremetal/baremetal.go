package baremetal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// Type is the backend type, as scaler configs name it.
const Type = "bare-metal"

// Defaults of the Config fields whose zero value means "default".
const (
	DefaultKillGrace    = 5 * time.Second
	DefaultPollInterval = time.Second
	DefaultKeepLogs     = 100
)

// killWait bounds the wait for a process to go after SIGKILL. Only a
// process stuck in the kernel (an uninterruptible sleep) outlasts it.
const killWait = 10 * time.Second

// Errors of Spawn.
var (
	// errClosed refuses a Spawn after Close.
	errClosed = errors.New("bare-metal backend closed")
	// errUnsupported refuses a Spawn on a system without process groups.
	errUnsupported = errors.New("the bare-metal backend needs a Unix host")
)

// Config configures a Backend.
type Config struct {
	// Name is the scaler's name, for logs.
	Name string
	// WorkDir is the root of the backend's files, e.g.
	// <data dir>/scaler/<name>: agents/<agent id>/ (each agent's work dir)
	// and logs/<agent id>.log (each agent's output). Required; a relative
	// path is made absolute by New.
	WorkDir string
	// KillGrace is the time between SIGTERM and SIGKILL when an agent is
	// destroyed; 0 means DefaultKillGrace (5 s).
	KillGrace time.Duration
	// PollInterval is how often the liveness of an agent re-attached by
	// Recover is checked; 0 means DefaultPollInterval (1 s).
	PollInterval time.Duration
	// KeepLogs is how many log files of destroyed agents are kept under
	// WorkDir/logs, newest first; 0 means DefaultKeepLogs (100).
	KeepLogs int
	// Now returns the current time, for events and handles; nil means
	// time.Now.
	Now func() time.Time
}

// Validate names the first bad field. Zero values that mean "default" are
// fine.
func (c Config) Validate() error {
	switch {
	case c.WorkDir == "":
		return errors.New("bare-metal config: WorkDir is required")
	case c.KillGrace < 0:
		return fmt.Errorf("bare-metal config: KillGrace is %s, want >= 0", c.KillGrace)
	case c.PollInterval < 0:
		return fmt.Errorf("bare-metal config: PollInterval is %s, want >= 0", c.PollInterval)
	case c.KeepLogs < 0:
		return fmt.Errorf("bare-metal config: KeepLogs is %d, want >= 0", c.KeepLogs)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.KeepLogs == 0 {
		c.KeepLogs = DefaultKeepLogs
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.WorkDir != "" {
		if abs, err := filepath.Abs(c.WorkDir); err == nil {
			c.WorkDir = abs
		}
	}
	return c
}

// Backend spawns kici-agent processes on this host. See the package doc.
type Backend struct {
	cfg Config
	log *slog.Logger
	// cfgErr is Config.Validate's verdict; Spawn refuses while it is set.
	cfgErr error

	mu       sync.Mutex
	agents   map[string]*agentProc // tracked agents, by id
	starting map[string]bool       // ids whose Spawn is under way
	closed   bool

	// afterStart, if set (by tests), runs in Spawn right after the process
	// started.
	afterStart func()

	// wg counts the watcher and poller goroutines; quit stops the pollers.
	wg       sync.WaitGroup
	quit     chan struct{}
	quitOnce sync.Once
}

var (
	_ scaler.Backend   = (*Backend)(nil)
	_ scaler.Registrar = (*Backend)(nil)
)

// New builds a Backend. It starts nothing and touches no file; a Config
// that does not validate makes every Spawn fail with a
// DeterministicSpawnError naming the bad field.
func New(logger *slog.Logger, cfg Config) *Backend {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		cfg:      cfg.withDefaults(),
		cfgErr:   cfg.Validate(),
		log:      logger.With("backend", Type, "scaler", cfg.Name),
		agents:   map[string]*agentProc{},
		starting: map[string]bool{},
		quit:     make(chan struct{}),
	}
}

// Type returns "bare-metal".
func (b *Backend) Type() string { return Type }

// Capabilities says the backend can re-attach its agents after a restart
// (on Linux, which has /proc) and list them.
func (b *Backend) Capabilities() scaler.Capabilities {
	return scaler.Capabilities{Recoverable: canRecover, ListsCompute: true}
}

// MarkRegistered records that the agent registered: its exit is from then
// on a disconnect, not a failed spawn.
func (b *Backend) MarkRegistered(agentID string) {
	if p := b.lookup(agentID); p != nil {
		p.mu.Lock()
		p.registered = true
		p.mu.Unlock()
	}
}

// List returns the agents this backend tracks whose process still runs.
func (b *Backend) List(ctx context.Context) ([]scaler.Compute, error) {
	b.mu.Lock()
	procs := make([]*agentProc, 0, len(b.agents))
	for _, p := range b.agents {
		procs = append(procs, p)
	}
	b.mu.Unlock()
	var out []scaler.Compute
	for _, p := range procs {
		if !p.isGone() {
			out = append(out, scaler.Compute{AgentID: p.id, Ref: p.handle.Ref, Started: p.handle.SpawnedAt})
		}
	}
	slices.SortFunc(out, func(a, b scaler.Compute) int { return cmp.Compare(a.AgentID, b.AgentID) })
	return out, nil
}

// Close destroys every agent, refuses further spawns, and waits for the
// backend's goroutines. It may be called more than once.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	ids := make([]string, 0, len(b.agents))
	for id := range b.agents {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = b.Destroy(ctx, id) })
	}
	wg.Wait()
	b.quitOnce.Do(func() { close(b.quit) })
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("close bare-metal backend: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func (b *Backend) lookup(agentID string) *agentProc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.agents[agentID]
}

func (b *Backend) agentDir(agentID string) string {
	return filepath.Join(b.cfg.WorkDir, "agents", agentID)
}

func (b *Backend) logsDir() string { return filepath.Join(b.cfg.WorkDir, "logs") }
