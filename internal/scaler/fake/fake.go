package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/scaler"
)

// Type is the backend type.
const Type = "fake"

// Label-set Env keys that steer a spawn; see the package doc.
const (
	EnvSpawnFail          = "FAKE_SPAWN_FAIL"
	EnvSpawnDelay         = "FAKE_SPAWN_DELAY"
	EnvExitBeforeRegister = "FAKE_EXIT_BEFORE_REGISTER"
)

// ExitOutput is the last output line of an agent steered by
// FAKE_EXIT_BEFORE_REGISTER.
const ExitOutput = "fake agent: exiting before it registers (FAKE_EXIT_BEFORE_REGISTER=1)"

// ErrSpawn is the plain error of FAKE_SPAWN_FAIL=error.
var ErrSpawn = errors.New("fake spawn failed (FAKE_SPAWN_FAIL=error)")

// Config configures a Backend.
type Config struct {
	// WorkDir holds the agents' work dirs, WorkDir/<agent id>, removed by
	// Destroy. Required.
	WorkDir string
	// Host runs the agents; nil means a Host of the Backend's own.
	Host *Host
	// Scaler is the name of the scaler the Backend serves: List and
	// StopOrphan see only the Host's compute spawned (or left) for it.
	// Empty means every scaler's.
	Scaler string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Backend is the fake backend.
type Backend struct {
	cfg  Config
	log  *slog.Logger
	host *Host

	mu     sync.Mutex
	agents map[string]*entry
	closed bool
	wg     sync.WaitGroup // watch goroutines
}

// entry is an agent the Backend tracks.
type entry struct {
	run     *run
	handle  scaler.Handle
	onEvent func(scaler.Event)
	// Guarded by Backend.mu.
	registered, destroying bool
}

var (
	_ scaler.Backend       = (*Backend)(nil)
	_ scaler.Registrar     = (*Backend)(nil)
	_ scaler.OrphanStopper = (*Backend)(nil)
)

// New builds a fake backend.
func New(logger *slog.Logger, cfg Config) *Backend {
	if cfg.Host == nil {
		cfg.Host = NewHost()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: logger.With("backend", Type), host: cfg.Host, agents: map[string]*entry{}}
}

// Type returns "fake".
func (b *Backend) Type() string { return Type }

// Capabilities: fake agents can be recovered (on the same Host) and listed.
func (b *Backend) Capabilities() scaler.Capabilities {
	return scaler.Capabilities{Recoverable: true, ListsCompute: true}
}

// record is a Handle's Blob.
type record struct {
	V       int    `json:"v"`
	AgentID string `json:"agent_id"`
}

// Spawn starts an in-process agent, as steered by the label set's Env.
func (b *Backend) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	if err := ctx.Err(); err != nil {
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, err)
	}
	emit := func(typ, detail string) {
		if req.OnEvent != nil {
			req.OnEvent(scaler.Event{AgentID: req.AgentID, Type: typ, Detail: detail, Time: b.cfg.Now()})
		}
	}
	refuse := func(err error) (scaler.Handle, error) {
		emit(scaler.EventFailed, err.Error())
		return scaler.Handle{}, err
	}
	dir := filepath.Join(b.cfg.WorkDir, req.AgentID)
	env := maps.Clone(req.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["KICI_AGENT_WORKDIR"] = dir
	maps.Copy(env, req.LabelSet.Env)

	emit(scaler.EventProvisioning, "starting an in-process agent")
	if d := env[EnvSpawnDelay]; d != "" {
		delay, err := time.ParseDuration(d)
		if err != nil {
			return refuse(scaler.Refused("%s=%q: %w", EnvSpawnDelay, d, err))
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, ctx.Err())
		}
	}
	switch v := env[EnvSpawnFail]; v {
	case "":
	case "refused":
		return refuse(scaler.Refused("fake spawn refused (%s=refused)", EnvSpawnFail))
	case "error":
		return scaler.Handle{}, ErrSpawn
	default:
		return refuse(scaler.Refused("%s=%q: want refused or error", EnvSpawnFail, v))
	}
	if req.AgentID == "" || filepath.Base(req.AgentID) != req.AgentID {
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: the agent id must be a plain file name", req.AgentID)
	}

	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: backend closed", req.AgentID)
	case b.agents[req.AgentID] != nil:
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: already spawned", req.AgentID)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: create work dir: %w", req.AgentID, err)
	}
	blob, _ := json.Marshal(record{V: 1, AgentID: req.AgentID})
	h := scaler.Handle{AgentID: req.AgentID, Scaler: req.Scaler, Ref: req.AgentID, Blob: blob, SpawnedAt: b.cfg.Now()}
	e := &entry{handle: h, onEvent: req.OnEvent}
	e.run = b.host.start(&run{id: req.AgentID, scaler: req.Scaler, workDir: dir, started: h.SpawnedAt}, agentMain(b.log, env))
	b.agents[req.AgentID] = e
	spawned := make(chan struct{})
	b.wg.Add(1)
	b.mu.Unlock()
	go b.watch(e, spawned)
	defer close(spawned)
	emit(scaler.EventReady, "in-process agent started")
	emit(scaler.EventConnecting, "waiting for the agent to register")
	return h, nil
}

// exitError is how a fake agent "exited": its code and last output line.
type exitError struct {
	code   int
	output string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit code %d: %s", e.code, e.output) }

// agentMain is what a fake agent runs: kici-agent's main, in-process.
func agentMain(log *slog.Logger, env map[string]string) func(context.Context) error {
	return func(ctx context.Context) error {
		if env[EnvExitBeforeRegister] == "1" {
			return &exitError{1, ExitOutput}
		}
		environ := make([]string, 0, len(env))
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		cfg, _, err := agent.FromEnv(func(k string) string { return env[k] }, environ)
		if err != nil {
			return &exitError{2, "kici-agent: " + err.Error()}
		}
		a, err := agent.New(log, cfg)
		if err != nil {
			return &exitError{1, "agent not started: " + err.Error()}
		}
		if err := a.Run(ctx); err != nil {
			return &exitError{1, "agent stopped: " + err.Error()}
		}
		return nil
	}
}

// watch reports an agent that ends before it registered, after Spawn's own
// events (spawned is closed once they are out).
func (b *Backend) watch(e *entry, spawned <-chan struct{}) {
	defer b.wg.Done()
	<-e.run.done
	<-spawned
	b.mu.Lock()
	report := !e.registered && !e.destroying && e.onEvent != nil
	b.mu.Unlock()
	if !report {
		return
	}
	code, out := 0, ""
	var xe *exitError
	if errors.As(e.run.err, &xe) {
		code, out = xe.code, xe.output
	}
	detail := fmt.Sprintf("agent exited with code %d before it registered", code)
	if out != "" {
		detail += "\n--- last output ---\n" + out
	}
	e.onEvent(scaler.Event{AgentID: e.handle.AgentID, Type: scaler.EventFailed, Detail: detail, Time: b.cfg.Now()})
}

// MarkRegistered records that the agent registered.
func (b *Backend) MarkRegistered(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.agents[agentID]; e != nil {
		e.registered = true
	}
}

// Destroy stops the agent (its context is cancelled; it drains and closes
// its connection), waits for it, and removes its work dir. An unknown id
// gives nil.
func (b *Backend) Destroy(ctx context.Context, agentID string) error {
	b.mu.Lock()
	e := b.agents[agentID]
	if e != nil {
		e.destroying = true
	}
	b.mu.Unlock()
	if e == nil {
		return nil
	}
	e.run.cancel()
	select {
	case <-e.run.done:
	case <-ctx.Done():
		return fmt.Errorf("destroy agent %q: %w", agentID, ctx.Err())
	}
	b.mu.Lock()
	if b.agents[agentID] == e {
		delete(b.agents, agentID)
	}
	b.mu.Unlock()
	b.host.remove(e.run)
	if err := os.RemoveAll(e.run.workDir); err != nil {
		return fmt.Errorf("destroy agent %q: remove work dir: %w", agentID, err)
	}
	return nil
}

// Recover re-attaches the agents of handles that still run on the Host.
func (b *Backend) Recover(ctx context.Context, handles []scaler.Handle) ([]scaler.Handle, error) {
	var out []scaler.Handle
	for _, h := range handles {
		var rec record
		if err := json.Unmarshal(h.Blob, &rec); err != nil || rec.V != 1 {
			b.log.Warn("agent handle unreadable; the agent counts as gone", "agent_id", h.AgentID)
			continue
		}
		r := b.host.get(rec.AgentID)
		if r == nil || r.ended() {
			continue
		}
		b.mu.Lock()
		if b.agents[rec.AgentID] == nil && !b.closed {
			b.agents[rec.AgentID] = &entry{run: r, handle: h, registered: true}
		}
		b.mu.Unlock()
		out = append(out, h)
	}
	return out, nil
}

// List returns the compute of the Backend's scaler that runs on the
// Host, tracked by this Backend or not (a Leftover, the agents of a
// Backend that "crashed"), by agent id.
func (b *Backend) List(ctx context.Context) ([]scaler.Compute, error) {
	var out []scaler.Compute
	for _, r := range b.host.list(b.cfg.Scaler) {
		if !r.ended() {
			out = append(out, scaler.Compute{AgentID: r.id, Ref: r.id, Started: r.started, Unverified: r.unverified})
		}
	}
	return out, nil
}

// StopOrphan stops the untracked compute of id on the Host: not found
// unless it is the Backend's scaler's, tracked when this Backend tracks
// it, not live when it ended, unverified when it is a Leftover so marked;
// isTracked is asked last, right before the stop. The stop cancels it,
// waits for it and removes its work dir.
func (b *Backend) StopOrphan(ctx context.Context, id string, isTracked func(string) bool) (string, error) {
	r := b.host.get(id)
	if r == nil || (b.cfg.Scaler != "" && r.scaler != b.cfg.Scaler) {
		return scaler.OutcomeNotFound, nil
	}
	b.mu.Lock()
	_, tracked := b.agents[id]
	b.mu.Unlock()
	switch {
	case tracked:
		return scaler.OutcomeTracked, fmt.Errorf("the fake backend tracks agent %q", id)
	case r.ended():
		return scaler.OutcomeNotLive, nil
	case r.unverified:
		return scaler.OutcomeUnverified, fmt.Errorf("agent %q: its identity is not confirmed", id)
	case isTracked(id):
		return scaler.OutcomeTracked, nil
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return scaler.OutcomeError, fmt.Errorf("stop agent %q: %w", id, ctx.Err())
	}
	b.host.remove(r)
	if r.workDir != "" {
		if err := os.RemoveAll(r.workDir); err != nil {
			return scaler.OutcomeError, fmt.Errorf("stop agent %q: remove work dir: %w", id, err)
		}
	}
	return scaler.OutcomeStopped, nil
}

// Close destroys every agent and refuses further spawns.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	ids := slices.Collect(maps.Keys(b.agents))
	b.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, b.Destroy(ctx, id))
	}
	b.wg.Wait()
	return errors.Join(errs...)
}
