package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/docker/docker/client"

	"github.com/kici-dev/kici/internal/scaler"
)

// ErrClosed is returned by Spawn after Close.
var ErrClosed = errors.New("container backend closed")

// Type is the backend type, as Backend.Type returns it.
const Type = "container"

// Container labels. Every container a backend creates carries all of
// them; ReapLeftovers and List select on the first three.
const (
	LabelManaged    = "kici-managed"      // "true"
	LabelInstance   = "kici-instance"     // Config.Instance
	LabelScaler     = "kici-scaler-name"  // Config.Name
	LabelAgentID    = "kici-agent-id"     // the agent's id
	LabelLabels     = "kici-labels"       // the label set's key
	LabelBoundJobID = "kici-bound-job-id" // the job the agent was spawned for, if any
	LabelRunID      = "kici-run-id"       // that job's run, if any
)

var _ scaler.Backend = (*Backend)(nil)
var _ scaler.Registrar = (*Backend)(nil)

// Backend runs agents as containers. Build it with New.
type Backend struct {
	log     *slog.Logger
	cfg     Config
	cli     *client.Client
	runtime string

	mu     sync.Mutex
	agents map[string]*agent // tracked agents, by agent id
	closed bool
	// wg counts the goroutines following agents (output and exit);
	// spawns counts the Spawn calls in progress.
	wg     sync.WaitGroup
	spawns sync.WaitGroup
}

// agent is one tracked container. containerID, stop, logsDone,
// registered and destroyed are guarded by Backend.mu; the other fields are
// set before the agent is shared and not changed after (createTried
// excepted, which only the spawning goroutine touches).
type agent struct {
	id          string
	containerID string // "" until create returned
	onEvent     func(scaler.Event)
	tail        *outputTail
	// abort cancels a Spawn in progress (nil for a recovered agent).
	abort context.CancelCauseFunc
	// createTried is set (by the spawning goroutine only) once the
	// create request went out.
	createTried bool
	// stop ends the output follower and the exit watch; nil until they
	// started.
	stop context.CancelFunc
	// logsDone is closed when the output follower has returned; nil until
	// it started.
	logsDone chan struct{}

	// spawnDone is closed when Spawn returned (already closed for a
	// recovered agent).
	spawnDone  chan struct{}
	registered bool
	destroyed  bool
}

// New connects to the engine cfg names (or the first one found) and
// checks that it answers.
func New(ctx context.Context, logger *slog.Logger, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ep, err := resolveEndpoint(cfg, defaultSockets(os.Getenv("XDG_RUNTIME_DIR")), socketUsable)
	if err != nil {
		return nil, err
	}
	cli, err := client.NewClientWithOpts(client.WithHost(ep.host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("connect to %s at %q: %w", ep.runtime, ep.host, err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("ping %s at %q: %w", ep.runtime, ep.host, err)
	}
	return &Backend{
		log:     logger.With("backend", Type, "scaler", cfg.Name, "runtime", ep.runtime),
		cfg:     cfg,
		cli:     cli,
		runtime: ep.runtime,
		agents:  map[string]*agent{},
	}, nil
}

// Type returns "container".
func (b *Backend) Type() string { return Type }

// Runtime returns the engine's kind: "docker" or "podman".
func (b *Backend) Runtime() string { return b.runtime }

// Capabilities: containers are recoverable and listed by label.
func (b *Backend) Capabilities() scaler.Capabilities {
	return scaler.Capabilities{Recoverable: true, ListsCompute: true}
}

// MarkRegistered records that the agent registered: from now on its exit
// is a disconnect, not a failed spawn.
func (b *Backend) MarkRegistered(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.agents[agentID]; a != nil {
		a.registered = true
	}
}

// Close destroys every tracked agent, waits for the goroutines that
// follow them and closes the engine connection. Spawn fails with
// ErrClosed afterwards.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	ids := make([]string, 0, len(b.agents))
	for id := range b.agents {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	err := scaler.DestroyAll(ctx, b, ids)
	b.spawns.Wait() // each notices its agent was destroyed and unwinds
	b.wg.Wait()
	return errors.Join(err, b.cli.Close())
}

// emit sends an event to the spawn's OnEvent, if it has one.
func (b *Backend) emit(a *agent, typ, detail string) {
	if a.onEvent == nil {
		return
	}
	a.onEvent(scaler.Event{AgentID: a.id, Type: typ, Detail: detail, Time: b.cfg.Now()})
}

// shortID is the 12-character form engines print.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
