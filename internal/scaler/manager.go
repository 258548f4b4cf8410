package scaler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Scale results.
const (
	// ActionSpawning: an agent is being spawned for the job.
	ActionSpawning = "spawning"
	// ActionAtCapacity: a scaler matches but a cap refused the spawn.
	ActionAtCapacity = "at-capacity"
	// ActionNoMatch: no scaler's label sets cover the job's labels.
	ActionNoMatch = "no-match"
	// ActionFailed: the spawn could not even be started.
	ActionFailed = "failed"
	// ActionSkipped: the scaler is deferred after refused launches, or the
	// manager is shutting down; retry after RetryAfter.
	ActionSkipped = "skipped"
)

// Defaults of a scaler's timing.
const (
	DefaultMaxConcurrentSpawns = 8
	DefaultSpawnTimeout        = 300 * time.Second
	DefaultDeferBase           = 30 * time.Second
	DefaultDeferMax            = 15 * time.Minute
	DefaultGlobalMaxAgents     = 50
	DefaultSweepInterval       = 15 * time.Minute
)

// ScalerConfig is one scaler as the manager runs it.
type ScalerConfig struct {
	Name      string
	Type      string
	MaxAgents int
	// MaxConcurrentSpawns bounds spawns in flight; 0 means 8.
	MaxConcurrentSpawns int
	// OrchestratorURL is the ws:// URL its agents dial.
	OrchestratorURL string
	LabelSets       []LabelSet
	// MandatoryLabels must all be in a job's runs-on for the job to be
	// routed here (a taint).
	MandatoryLabels []string
	// WarmPool keeps idle agents ready; zero Size means none.
	WarmPool WarmPool
	// ResourceCap caps the sum of the requests of the scaler's agents;
	// a zero field means no cap on that dimension.
	ResourceCap Spec
	// FailJobsAfter is how many deferring failures in a row (refused
	// launches, agents that died before registering) make the jobs waiting
	// for this scaler fail with the cause instead of waiting out the queue
	// timeout; 0 means never.
	FailJobsAfter int
}

// WarmPool is a target of idle agents kept per label set of a scaler.
type WarmPool struct {
	// Size is the number of idle agents to keep per label set.
	Size int
	// IdleTimeout is how long an idle agent above Size may live.
	IdleTimeout time.Duration
}

// Config is the manager's configuration.
type Config struct {
	// GlobalMaxAgents caps scaler agents across every scaler; 0 means 50.
	GlobalMaxAgents int
	Scalers         []ScalerConfig
	// SpawnTimeout bounds one Spawn call; 0 means 300 s.
	SpawnTimeout time.Duration
	// DeferBase and DeferMax bound the deferral after a refused launch;
	// 0 means 30 s and 15 min.
	DeferBase, DeferMax time.Duration
	// WarmTick is how often warm pools are topped up and trimmed; 0
	// means 30 s.
	WarmTick time.Duration
	// SweepInterval is how often Run sweeps the backends' leftovers; 0
	// means 15 min.
	SweepInterval time.Duration
	// TokenKey signs the single-use tokens of spawned agents; keep it
	// across restarts so adopted agents can reconnect. Nil means a random
	// key (no adoption).
	TokenKey []byte
	// State keeps spawn records across restarts; nil keeps none.
	State StateStore
	// Trackers reports what tracks compute beyond the manager's own
	// spawns: the agent ids registered with the orchestrator (connected)
	// and those a job is bound to (a dispatch queue row dispatched to
	// them or waiting for them to come back). Orphans and StopOrphans
	// call it; an error makes every compute count as tracked. Nil means
	// nothing beyond the manager tracks compute.
	Trackers func(ctx context.Context) (registered, boundJob map[string]bool, err error)
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Sink receives what a spawn means for its job: its events, for the
// job's timeline and provisioning log, and its failure, recorded as the
// job's provisioning error.
type Sink interface {
	ScalerEvent(runID, jobID string, ev Event)
	ProvisioningFailed(jobID, detail string)
	// CapacityFreed is called when a spawn ended or an agent left, so
	// that jobs waiting for capacity are offered again.
	CapacityFreed()
	// SpawnFailed counts a failed spawn of a backend type; bound says
	// whether the spawn was for a job.
	SpawnFailed(backend string, bound bool)
	// SpawnRefused counts a spawn a cap ("global" or "scaler") refused.
	SpawnRefused(scaler, cap string)
	// AgentProvisioned observes how long an agent took from the spawn
	// request to its registration.
	AgentProvisioned(backend string, took time.Duration)
	// RetireAgent stops an idle agent from taking jobs, so that it can be
	// destroyed; false means it already holds a job and must be kept.
	RetireAgent(agentID string) bool
}

// ScaleRequest is a job that no connected agent can take.
type ScaleRequest struct {
	JobID, RunID string
	Labels       []string
	Exclude      []string
}

// ScaleResult says what RequestScale did.
type ScaleResult struct {
	Action  string
	Scaler  string
	Backend string
	AgentID string
	// Reason explains at-capacity, no-match, failed and skipped results.
	Reason string
	// RetryAfter is when a skipped request may be retried.
	RetryAfter time.Duration
	// FailJob says the job should fail now with Reason (ActionFailed):
	// its scaler failed FailJobsAfter times in a row.
	FailJob bool
}

// Manager runs the scalers.
type Manager struct {
	log  *slog.Logger
	sink Sink

	mu sync.Mutex
	// persistMu orders the writes of spawn records: two writers (the spawn
	// returning, the agent registering) each read the spawn's state and
	// write it, and the one that read first must not write last.
	persistMu sync.Mutex
	cfg       Config
	scalers   map[string]*scalerState
	order     []string
	agents    map[string]*spawn // by agent id: spawning and registered
	byJob     map[string]string // bound job id → agent id, while spawning
	closing   bool
	spawnWG   sync.WaitGroup
	tokenKey  []byte
	state     StateStore
	failures  failures
}

type scalerState struct {
	cfg      ScalerConfig
	backend  Backend
	sem      chan struct{}
	active   int  // spawns in flight or agents alive
	usage    Spec // the sum of their label sets' requests
	retiring bool
	// Deferral after refused launches.
	deferUntil time.Time
	deferFor   time.Duration
	lastError  string
	failures   int
}

type spawn struct {
	agentID    string
	scaler     string
	labelSet   LabelSet
	labels     []string // what the agent registers with
	jobID      string
	runID      string
	requested  time.Time
	registered bool
	// registeredAt is when the agent registered; a warm agent's idle
	// time counts from it.
	registeredAt time.Time
	// busy is set once the agent took a job; a warm agent is then no
	// longer idle.
	busy bool
	// failed is set once a scaler.failed event went to the job.
	failed bool
	cancel context.CancelFunc
	handle Handle
}

// New builds a manager over the given backends (by scaler name). Backends
// for scalers not in cfg are ignored.
func New(logger *slog.Logger, cfg Config, backends map[string]Backend, sink Sink) (*Manager, error) {
	key := cfg.TokenKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	m := &Manager{log: logger, sink: sink, agents: map[string]*spawn{}, byJob: map[string]string{}, tokenKey: key, state: cfg.State}
	if err := m.install(cfg, backends); err != nil {
		return nil, err
	}
	return m, nil
}

func (c *Config) defaults() {
	if c.GlobalMaxAgents <= 0 {
		c.GlobalMaxAgents = DefaultGlobalMaxAgents
	}
	if c.SpawnTimeout <= 0 {
		c.SpawnTimeout = DefaultSpawnTimeout
	}
	if c.DeferBase <= 0 {
		c.DeferBase = DefaultDeferBase
	}
	if c.DeferMax <= 0 {
		c.DeferMax = DefaultDeferMax
	}
	if c.WarmTick <= 0 {
		c.WarmTick = 30 * time.Second
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (m *Manager) install(cfg Config, backends map[string]Backend) error {
	cfg.defaults()
	scalers := map[string]*scalerState{}
	var order []string
	for _, sc := range cfg.Scalers {
		b := backends[sc.Name]
		if b == nil {
			return fmt.Errorf("scaler %q has no backend", sc.Name)
		}
		if sc.MaxConcurrentSpawns <= 0 {
			sc.MaxConcurrentSpawns = DefaultMaxConcurrentSpawns
		}
		scalers[sc.Name] = &scalerState{cfg: sc, backend: b, sem: make(chan struct{}, sc.MaxConcurrentSpawns)}
		order = append(order, sc.Name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg, m.scalers, m.order = cfg, scalers, order
	return nil
}

// AutoLabels are the labels every agent of a scaler carries besides the
// declared ones: kici:scaler:<name> and kici:agent:<type>.
func AutoLabels(sc ScalerConfig) []string {
	return []string{"kici:scaler:" + sc.Name, "kici:agent:" + sc.Type}
}

// enrichedLabels are the labels a label set's agents serve: the declared
// ones, the auto labels, and the platform the agents run on (Linux, on
// this host's architecture: bare-metal agents run here, containers on the
// local engine).
func enrichedLabels(sc ScalerConfig, ls LabelSet) []string {
	l := append(slices.Clone(ls.Labels), AutoLabels(sc)...)
	return NormalizeLabels(append(l, "kici:os:linux", "kici:arch:"+runtime.GOARCH))
}

// match finds the scaler label set that covers labels with the fewest
// labels, skipping retiring scalers, gated sets and excluded labels.
func (m *Manager) match(labels, exclude []string) (*scalerState, LabelSet, []string, bool) {
	want := NormalizeLabels(labels)
	excl := NormalizeLabels(exclude)
	var best *scalerState
	var bestSet LabelSet
	var bestLabels []string
	for _, name := range m.order {
		st := m.scalers[name]
		if st.retiring {
			continue
		}
		gate := NormalizeLabels(st.cfg.MandatoryLabels)
		if !subset(gate, want) {
			continue
		}
		for _, ls := range st.cfg.LabelSets {
			enriched := enrichedLabels(st.cfg, ls)
			if !subset(want, enriched) || intersects(excl, enriched) {
				continue
			}
			if best == nil || len(enriched) < len(bestLabels) {
				best, bestSet, bestLabels = st, ls, enriched
			}
		}
	}
	return best, bestSet, bestLabels, best != nil
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// HasScalerFor reports whether some scaler could serve labels.
func (m *Manager) HasScalerFor(labels []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, _, ok := m.match(labels, nil)
	return ok
}

// SpawningFor returns the agent being spawned for a job, if any.
func (m *Manager) SpawningFor(jobID string) (agentID string, since time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byJob[jobID]
	if !ok {
		return "", time.Time{}, false
	}
	return id, m.agents[id].requested, true
}

// RequestScale spawns an agent bound to a job that no connected agent can
// take. It returns at once; the spawn goes on in the background and
// reports through the Sink.
func (m *Manager) RequestScale(ctx context.Context, req ScaleRequest) ScaleResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return ScaleResult{Action: ActionSkipped, Reason: "the orchestrator is shutting down"}
	}
	if id, ok := m.byJob[req.JobID]; ok {
		sp := m.agents[id]
		return ScaleResult{Action: ActionSpawning, Scaler: sp.scaler, Backend: m.scalers[sp.scaler].backend.Type(), AgentID: id}
	}
	st, ls, labels, ok := m.match(req.Labels, req.Exclude)
	if !ok {
		return ScaleResult{Action: ActionNoMatch, Reason: fmt.Sprintf("no scaler has a label set covering %v", NormalizeLabels(req.Labels))}
	}
	now := m.cfg.Now()
	if n := st.cfg.FailJobsAfter; n > 0 && st.failures >= n && now.Before(st.deferUntil) {
		return ScaleResult{Action: ActionFailed, Scaler: st.cfg.Name, FailJob: true,
			Reason: fmt.Sprintf("scaler %s failed %d times in a row, most recently: %s (fix it, then `kici-admin scaler retry %s`)", st.cfg.Name, st.failures, st.lastError, st.cfg.Name)}
	}
	if now.Before(st.deferUntil) {
		return ScaleResult{Action: ActionSkipped, Scaler: st.cfg.Name, RetryAfter: st.deferUntil.Sub(now),
			Reason: fmt.Sprintf("scaler %s deferred until %s after %q", st.cfg.Name, st.deferUntil.UTC().Format(time.RFC3339), st.lastError)}
	}
	if total := m.totalActive(); total >= m.cfg.GlobalMaxAgents {
		m.sink.SpawnRefused(st.cfg.Name, "global")
		return ScaleResult{Action: ActionAtCapacity, Scaler: st.cfg.Name, Reason: fmt.Sprintf("globalMaxAgents reached (%d of %d agents)", total, m.cfg.GlobalMaxAgents)}
	}
	if reason := st.resourceRefusal(ls.Requests); reason != "" {
		m.sink.SpawnRefused(st.cfg.Name, "resource")
		return ScaleResult{Action: ActionAtCapacity, Scaler: st.cfg.Name, Reason: reason}
	}
	if st.active >= st.cfg.MaxAgents {
		m.sink.SpawnRefused(st.cfg.Name, "scaler")
		return ScaleResult{Action: ActionAtCapacity, Scaler: st.cfg.Name, Reason: fmt.Sprintf("scaler %s at maxAgents (%d of %d agents)", st.cfg.Name, st.active, st.cfg.MaxAgents)}
	}
	sp := m.startSpawnLocked(st, ls, labels, req)
	return ScaleResult{Action: ActionSpawning, Scaler: st.cfg.Name, Backend: st.backend.Type(), AgentID: sp.agentID}
}

// startSpawnLocked reserves a slot and starts a spawn in the background,
// bound to req's job (or warm, without one).
func (m *Manager) startSpawnLocked(st *scalerState, ls LabelSet, labels []string, req ScaleRequest) *spawn {
	st.active++
	st.usage.CPUs += ls.Requests.CPUs
	st.usage.MemoryBytes += ls.Requests.MemoryBytes
	sp := &spawn{
		agentID: "scaler-" + st.backend.Type() + "-" + randomHex(4), scaler: st.cfg.Name, labelSet: ls,
		labels: labels, jobID: req.JobID, runID: req.RunID, requested: m.cfg.Now(),
	}
	// The deadline starts now (time spent waiting for a spawn slot counts)
	// and Close can cancel the spawn from this moment on.
	timeout := m.cfg.SpawnTimeout
	spawnCtx, cancel := context.WithTimeoutCause(context.Background(), timeout, fmt.Errorf("spawn deadline of %s passed", timeout))
	sp.cancel = cancel
	m.agents[sp.agentID] = sp
	if req.JobID != "" {
		m.byJob[req.JobID] = sp.agentID
	}
	m.spawnWG.Add(1)
	go m.run(spawnCtx, st, sp)
	return sp
}

func (m *Manager) totalActive() int {
	n := 0
	for _, st := range m.scalers {
		n += st.active
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run performs one spawn: throttle, then Spawn under the deadline.
func (m *Manager) run(ctx context.Context, st *scalerState, sp *spawn) {
	defer m.spawnWG.Done()
	defer sp.cancel()
	select {
	case st.sem <- struct{}{}:
	case <-ctx.Done():
		m.spawnFailed(st, sp, fmt.Errorf("waiting for a spawn slot: %w", context.Cause(ctx)))
		return
	}
	defer func() { <-st.sem }()
	m.mu.Lock()
	url := st.cfg.OrchestratorURL
	m.mu.Unlock()
	onEvent := func(ev Event) { m.event(sp, ev) }
	req := SpawnRequest{
		AgentID: sp.agentID, Scaler: sp.scaler, LabelSet: sp.labelSet, Limits: sp.labelSet.Limits,
		BoundJobID: sp.jobID, RunID: sp.runID, OnEvent: onEvent,
		Env: map[string]string{
			"KICI_ORCHESTRATOR_URL": url,
			"KICI_AGENT_ID":         sp.agentID,
			"KICI_AGENT_TOKEN":      m.agentToken(sp.agentID),
			"KICI_LABELS":           strings.Join(sp.labelSet.Labels, ","),
			"KICI_AGENT_ONE_SHOT":   "1",
			"KICI_AGENT_SCALER":     "1",
		},
	}
	start := m.cfg.Now()
	h, err := st.backend.Spawn(ctx, req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		m.spawnFailed(st, sp, err)
		return
	}
	m.mu.Lock()
	sp.handle = h
	failedEarly := sp.failed && !sp.registered
	m.mu.Unlock()
	if failedEarly {
		// The agent died before Spawn even returned: its failure event
		// could not release the spawn then, so do it now.
		m.releaseFailed(st, sp, "agent failed before the spawn finished")
		return
	}
	m.persist(sp)
	m.log.Info("agent spawned", "scaler", sp.scaler, "agent_id", sp.agentID, "job_id", sp.jobID, "run_id", sp.runID, "took", m.cfg.Now().Sub(start))
}

// spawnFailed ends a spawn that failed: the job learns why, the capacity
// is released, and a refused launch defers the scaler.
func (m *Manager) spawnFailed(st *scalerState, sp *spawn, err error) {
	detail := err.Error()
	m.mu.Lock()
	reported := sp.failed
	m.mu.Unlock()
	if !reported {
		m.event(sp, Event{AgentID: sp.agentID, Type: EventFailed, Detail: detail, Time: m.cfg.Now()})
	}
	_ = st.backend.Destroy(context.Background(), sp.agentID)
	m.mu.Lock()
	if IsDeterministic(err) {
		m.deferLocked(st, detail)
	}
	m.forgetLocked(sp)
	m.mu.Unlock()
	m.log.Warn("spawn failed", "scaler", sp.scaler, "agent_id", sp.agentID, "job_id", sp.jobID, "run_id", sp.runID, "error", err)
	m.sweepRetired()
	m.sink.CapacityFreed()
}

// deferLocked defers a scaler after a refused launch: 30 s, doubling per
// consecutive refusal up to 15 min.
func (m *Manager) deferLocked(st *scalerState, detail string) {
	if st.deferFor == 0 {
		st.deferFor = m.cfg.DeferBase
	} else {
		st.deferFor = min(st.deferFor*2, m.cfg.DeferMax)
	}
	st.failures++
	st.lastError = detail
	st.deferUntil = m.cfg.Now().Add(st.deferFor)
	m.log.Warn("scaler deferred", "scaler", st.cfg.Name, "until", st.deferUntil, "failures", st.failures, "error", detail)
	if st.failures >= consistentFailures {
		m.log.Warn("scaler failing consistently; see `kici-admin diagnose`", "scaler", st.cfg.Name, "failures_in_a_row", st.failures, "error", detail)
	}
}

// forgetLocked drops a spawn and frees its capacity.
func (m *Manager) forgetLocked(sp *spawn) {
	if _, ok := m.agents[sp.agentID]; !ok {
		return
	}
	delete(m.agents, sp.agentID)
	m.unpersist(sp.agentID)
	if m.byJob[sp.jobID] == sp.agentID {
		delete(m.byJob, sp.jobID)
	}
	if st := m.scalers[sp.scaler]; st != nil && st.active > 0 {
		st.active--
		st.usage.CPUs = max(0, st.usage.CPUs-sp.labelSet.Requests.CPUs)
		st.usage.MemoryBytes = max(0, st.usage.MemoryBytes-sp.labelSet.Requests.MemoryBytes)
	}
}

// event routes a spawn event to its job.
func (m *Manager) event(sp *spawn, ev Event) {
	if ev.Time.IsZero() {
		ev.Time = m.cfg.Now()
	}
	ev.AgentID = sp.agentID
	m.mu.Lock()
	registered, already := sp.registered, sp.failed
	if ev.Type == EventFailed {
		sp.failed = true
	}
	m.mu.Unlock()
	if ev.Type == EventFailed && already {
		return // one failure per spawn
	}
	if ev.Type == EventFailed && registered {
		// A failure after registration is counted like any other, but it
		// releases nothing: the agent's disconnect does.
		m.countFailure(sp, ev.Detail)
		return
	}
	if sp.jobID != "" {
		m.sink.ScalerEvent(sp.runID, sp.jobID, ev)
		if ev.Type == EventFailed {
			m.sink.ProvisioningFailed(sp.jobID, ev.Detail)
		}
	}
	if ev.Type == EventFailed {
		m.countFailure(sp, ev.Detail)
	}
	if ev.Type == EventFailed {
		// An agent that died before registering after Spawn returned is a
		// refused launch. (Before Spawn returns, run handles it.)
		m.mu.Lock()
		st, spawned := m.scalers[sp.scaler], sp.handle.AgentID != ""
		m.mu.Unlock()
		if spawned && st != nil {
			m.releaseFailed(st, sp, ev.Detail)
		}
	}
}

// countFailure counts a scaler.failed: the metric, the ring diagnose
// reads, a warning.
func (m *Manager) countFailure(sp *spawn, detail string) {
	m.mu.Lock()
	typ := "unknown"
	if st := m.scalers[sp.scaler]; st != nil {
		typ = st.backend.Type()
	}
	m.failures.add(failure{scaler: sp.scaler, backend: typ, bound: sp.jobID != "", detail: detail, at: m.cfg.Now()})
	m.mu.Unlock()
	m.sink.SpawnFailed(typ, sp.jobID != "")
	m.log.Warn("scaler.failed", "scaler", sp.scaler, "backend", typ, "agent_id", sp.agentID, "job_id", sp.jobID, "detail", firstLine(detail))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// releaseFailed ends a spawn whose agent died before registering: the
// scaler is deferred, the compute destroyed and the capacity freed.
func (m *Manager) releaseFailed(st *scalerState, sp *spawn, detail string) {
	m.mu.Lock()
	_, alive := m.agents[sp.agentID]
	if alive {
		m.deferLocked(st, detail)
		m.forgetLocked(sp)
	}
	m.mu.Unlock()
	if !alive {
		return
	}
	_ = st.backend.Destroy(context.Background(), sp.agentID)
	m.sweepRetired()
	m.sink.CapacityFreed()
}

// resourceRefusal says why a spawn requesting req would exceed the
// scaler's resource cap, or "" when it fits (landing exactly on the cap
// fits).
func (st *scalerState) resourceRefusal(req Spec) string {
	c := st.cfg.ResourceCap
	if c.CPUs > 0 && st.usage.CPUs+req.CPUs > c.CPUs {
		return fmt.Sprintf("scaler %s at its resourceCap.maxCpu (%g of %g CPUs requested, this agent needs %g)", st.cfg.Name, st.usage.CPUs, c.CPUs, req.CPUs)
	}
	if c.MemoryBytes > 0 && st.usage.MemoryBytes+req.MemoryBytes > c.MemoryBytes {
		return fmt.Sprintf("scaler %s at its resourceCap.maxMemory (%d of %d bytes requested, this agent needs %d)", st.cfg.Name, st.usage.MemoryBytes, c.MemoryBytes, req.MemoryBytes)
	}
	return ""
}

// ErrUnknownScalerAgent refuses a "scaler-" agent the manager did not
// spawn (or no longer tracks).
var ErrUnknownScalerAgent = errors.New("unknown scaler agent")

// IsScalerAgentID reports whether an id is of the form scaler agents use.
func IsScalerAgentID(id string) bool { return strings.HasPrefix(id, "scaler-") }

// Registration is what the manager knows of a registering agent.
type Registration struct {
	// Managed is true for an agent this manager spawned.
	Managed bool
	// Labels are the labels the agent serves (declared and auto labels);
	// they replace what it registered with.
	Labels []string
	// BoundJobID is the job it was spawned for; empty for a warm agent.
	BoundJobID string
	Scaler     string
	Backend    string
	// Remote is set for an agent a cluster worker's scaler spawned: its
	// compute lives on the worker and outlives a dropped connection to a
	// coordinator, so its jobs get the recovery window as any agent's.
	Remote bool `json:"remote,omitempty"`
}

// OnAgentRegistered is called when an agent registers. For an agent this
// manager spawned it returns its labels and bound job; it clears the
// scaler's deferral (the backend works). An unknown "scaler-" agent gives
// ErrUnknownScalerAgent; any other agent is static.
func (m *Manager) OnAgentRegistered(agentID, token string) (Registration, error) {
	m.mu.Lock()
	sp, ok := m.agents[agentID]
	if !ok || !m.checkToken(agentID, token) {
		m.mu.Unlock()
		if IsScalerAgentID(agentID) {
			return Registration{}, fmt.Errorf("%w: %s", ErrUnknownScalerAgent, agentID)
		}
		return Registration{}, nil
	}
	sp.registered = true
	sp.registeredAt = m.cfg.Now()
	st := m.scalers[sp.scaler]
	st.deferUntil, st.deferFor, st.failures = time.Time{}, 0, 0
	// The job stays mapped to this agent until the agent takes a job
	// (OnAgentBusy): until the dispatcher has the agent in its registry,
	// the job looks uncovered, and dropping the mapping here spawned a
	// second agent for it.
	reg := Registration{Managed: true, Labels: slices.Clone(sp.labels), BoundJobID: sp.jobID, Scaler: sp.scaler, Backend: st.backend.Type()}
	backend := st.backend
	took := m.cfg.Now().Sub(sp.requested)
	m.mu.Unlock()
	m.sink.AgentProvisioned(backend.Type(), took)
	if r, ok := backend.(Registrar); ok {
		r.MarkRegistered(agentID)
	}
	m.persist(sp)
	return reg, nil
}

// OnAgentDisconnected destroys a managed agent's compute when it goes:
// scaler agents are single-use.
func (m *Manager) OnAgentDisconnected(agentID string) {
	m.mu.Lock()
	sp, ok := m.agents[agentID]
	if !ok || !sp.registered {
		m.mu.Unlock()
		return
	}
	st := m.scalers[sp.scaler]
	m.mu.Unlock()
	// The capacity is freed only once the compute is gone: an agent that
	// disconnected may still be exiting, and counting it out early would
	// let one more agent live than maxAgents allows.
	if err := st.backend.Destroy(context.Background(), agentID); err != nil {
		m.log.Warn("destroy agent failed", "scaler", sp.scaler, "agent_id", agentID, "error", err)
	}
	m.mu.Lock()
	m.forgetLocked(sp)
	m.mu.Unlock()
	m.sweepRetired()
	m.sink.CapacityFreed()
}

// ScalerStatus is one scaler as GET /api/v1/scalers shows it.
type ScalerStatus struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	MaxAgents  int        `json:"max_agents"`
	Active     int        `json:"active"`
	Spawning   int        `json:"spawning"`
	LabelSets  [][]string `json:"label_sets"`
	DeferredTo *time.Time `json:"deferred_until,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	Retiring   bool       `json:"retiring,omitempty"`
	// Checks are the backend's host prerequisites (HostChecker only).
	Checks []HostCheck `json:"checks,omitempty"`
}

// Status describes every scaler.
func (m *Manager) Status() []ScalerStatus {
	out, checkers := m.status()
	// Checks touch the host (files, devices): outside the lock.
	for i := range out {
		if c := checkers[out[i].Name]; c.checker != nil {
			out[i].Checks = c.checker.HostChecks(c.sets)
		}
	}
	return out
}

type checkerOf struct {
	checker HostChecker
	sets    []LabelSet
}

func (m *Manager) status() ([]ScalerStatus, map[string]checkerOf) {
	m.mu.Lock()
	defer m.mu.Unlock()
	checkers := map[string]checkerOf{}
	now := m.cfg.Now()
	var out []ScalerStatus
	for _, name := range m.order {
		st := m.scalers[name]
		s := ScalerStatus{Name: name, Type: st.backend.Type(), MaxAgents: st.cfg.MaxAgents, Active: st.active, LastError: st.lastError, Retiring: st.retiring}
		if c, ok := st.backend.(HostChecker); ok {
			checkers[name] = checkerOf{c, slices.Clone(st.cfg.LabelSets)}
		}
		for _, ls := range st.cfg.LabelSets {
			s.LabelSets = append(s.LabelSets, ls.Labels)
		}
		for _, sp := range m.agents {
			if sp.scaler == name && !sp.registered {
				s.Spawning++
			}
		}
		if now.Before(st.deferUntil) {
			t := st.deferUntil
			s.DeferredTo = &t
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, checkers
}

// Close stops taking requests, waits for spawns in flight (cancelling
// them), destroys every agent and closes the backends.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closing = true
	var ids []string
	for id, sp := range m.agents {
		ids = append(ids, id)
		if sp.cancel != nil {
			sp.cancel()
		}
	}
	m.mu.Unlock()
	m.spawnWG.Wait()
	var errs []error
	m.mu.Lock()
	scalers := m.scalers
	m.mu.Unlock()
	for _, id := range ids {
		for _, st := range scalers {
			if err := st.backend.Destroy(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, st := range scalers {
		if err := st.backend.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopAll destroys the compute of every agent the manager spawned, busy or
// not, spawns in flight included, and forgets them; the scalers keep
// running. A cluster worker cut from every coordinator for too long calls
// it: the coordinators have failed those agents' jobs by then, and a job
// must not go on where nobody can see it. It returns the agents stopped.
func (m *Manager) StopAll(ctx context.Context, reason string) []string {
	m.mu.Lock()
	all := make([]*spawn, 0, len(m.agents))
	for _, sp := range m.agents {
		all = append(all, sp)
		if sp.cancel != nil {
			sp.cancel()
		}
	}
	m.mu.Unlock()
	var ids []string
	for _, sp := range all {
		m.mu.Lock()
		st := m.scalers[sp.scaler]
		m.mu.Unlock()
		if st == nil {
			continue
		}
		if err := st.backend.Destroy(ctx, sp.agentID); err != nil {
			m.log.Warn("stop agent failed", "scaler", sp.scaler, "agent_id", sp.agentID, "error", err)
			continue
		}
		m.mu.Lock()
		m.forgetLocked(sp)
		m.mu.Unlock()
		ids = append(ids, sp.agentID)
		m.log.Warn("agent stopped", "scaler", sp.scaler, "agent_id", sp.agentID, "job_id", sp.jobID, "reason", reason)
	}
	sort.Strings(ids)
	m.sweepRetired()
	return ids
}
