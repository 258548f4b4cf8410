package scaler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingBackend is a test double of Backend: it spawns nothing and
// records calls. Spawn fails with spawnErr when set.
type recordingBackend struct {
	typ      string
	mu       sync.Mutex
	spawned  []SpawnRequest
	destroys []string
	closed   bool
	spawnErr error
	block    chan struct{} // when set, Spawn waits on it
}

func (b *recordingBackend) Type() string               { return b.typ }
func (b *recordingBackend) Capabilities() Capabilities { return Capabilities{} }
func (b *recordingBackend) Spawn(ctx context.Context, req SpawnRequest) (Handle, error) {
	b.mu.Lock()
	b.spawned = append(b.spawned, req)
	err, block := b.spawnErr, b.block
	b.mu.Unlock()
	req.OnEvent(Event{Type: EventProvisioning, Detail: "starting"})
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Handle{}, ctx.Err()
		}
	}
	if err != nil {
		return Handle{}, err
	}
	req.OnEvent(Event{Type: EventConnecting, Detail: "waiting"})
	return Handle{AgentID: req.AgentID, Scaler: req.Scaler}, nil
}
func (b *recordingBackend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.destroys = append(b.destroys, id)
	return nil
}
func (b *recordingBackend) Recover(ctx context.Context, h []Handle) ([]Handle, error) {
	return nil, nil
}
func (b *recordingBackend) List(ctx context.Context) ([]Compute, error) { return nil, nil }
func (b *recordingBackend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}
func (b *recordingBackend) spawns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.spawned)
}

// recordingSink records what reaches jobs.
type recordingSink struct {
	mu       sync.Mutex
	events   []Event
	failures map[string]string
	freed    chan struct{}
	failed   []string
}

func newSink() *recordingSink {
	return &recordingSink{failures: map[string]string{}, freed: make(chan struct{}, 100)}
}
func (s *recordingSink) ScalerEvent(runID, jobID string, ev Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}
func (s *recordingSink) ProvisioningFailed(jobID, detail string) {
	s.mu.Lock()
	s.failures[jobID] = detail
	s.mu.Unlock()
}
func (s *recordingSink) CapacityFreed()                                      { s.freed <- struct{}{} }
func (s *recordingSink) SpawnRefused(scaler, cap string)                     {}
func (s *recordingSink) RetireAgent(agentID string) bool                     { return true }
func (s *recordingSink) AgentProvisioned(backend string, took time.Duration) {}
func (s *recordingSink) SpawnFailed(backend string, bound bool) {
	s.mu.Lock()
	s.failed = append(s.failed, backend+"/"+map[bool]string{true: "bound", false: "unbound"}[bound])
	s.mu.Unlock()
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newManager(t *testing.T, scalers []ScalerConfig, backends map[string]Backend) (*Manager, *recordingSink, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	sink := newSink()
	m, err := New(slog.New(slog.NewTextHandler(t.Output(), nil)), Config{Scalers: scalers, GlobalMaxAgents: 10, Now: clock.Now}, backends, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, sink, clock
}

func waitFreed(t *testing.T, s *recordingSink) {
	t.Helper()
	select {
	case <-s.freed:
	case <-time.After(10 * time.Second):
		t.Fatal("capacity was never freed")
	}
}

func TestMatchPicksTheSmallestCoveringLabelSet(t *testing.T) {
	t.Parallel()
	big := &recordingBackend{typ: "bare-metal"}
	small := &recordingBackend{typ: "container"}
	m, _, _ := newManager(t, []ScalerConfig{
		{Name: "big", Type: "bare-metal", MaxAgents: 5, LabelSets: []LabelSet{{Labels: []string{"linux", "gpu", "bare-metal"}}}},
		{Name: "small", Type: "container", MaxAgents: 5, LabelSets: []LabelSet{{Labels: []string{"linux", "container"}}}},
		{Name: "gated", Type: "container", MaxAgents: 5, MandatoryLabels: []string{"secure"}, LabelSets: []LabelSet{{Labels: []string{"linux", "secure"}}}},
	}, map[string]Backend{"big": big, "small": small, "gated": &recordingBackend{typ: "container"}})
	tests := []struct {
		name    string
		labels  []string
		exclude []string
		want    string // scaler, or "" for no match
	}{
		{name: "both cover linux: the smaller wins", labels: []string{"linux"}, want: "small"},
		{name: "only big has gpu", labels: []string{"linux", "gpu"}, want: "big"},
		{name: "scaler auto label", labels: []string{"kici:scaler:big"}, want: "big"},
		{name: "excluded label", labels: []string{"linux"}, exclude: []string{"container"}, want: "big"},
		{name: "case-insensitive", labels: []string{"LINUX", "Container"}, want: "small"},
		{name: "gate needs its label", labels: []string{"linux", "secure"}, want: "gated"},
		{name: "nothing covers arm", labels: []string{"arm"}, want: ""},
	}
	for _, tt := range tests {
		m.mu.Lock()
		st, _, _, ok := m.match(tt.labels, tt.exclude)
		m.mu.Unlock()
		got := ""
		if ok {
			got = st.cfg.Name
		}
		if got != tt.want {
			t.Errorf("%s: matched %q, want %q", tt.name, got, tt.want)
		}
	}
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", Labels: []string{"arm"}}); res.Action != ActionNoMatch {
		t.Errorf("request for arm: got %s, want %s", res.Action, ActionNoMatch)
	}
}

func TestMaxAgentsCapsSpawnsAndDisconnectFreesThem(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal"}
	m, sink, _ := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 2, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": b})
	var agents []string
	for i, job := range []string{"j1", "j2", "j3"} {
		res := m.RequestScale(t.Context(), ScaleRequest{JobID: job, RunID: "r", Labels: []string{"linux"}})
		want := ActionSpawning
		if i == 2 {
			want = ActionAtCapacity
		}
		if res.Action != want {
			t.Fatalf("request %d: got %s (%s), want %s", i, res.Action, res.Reason, want)
		}
		if res.Action == ActionSpawning {
			agents = append(agents, res.AgentID)
			if !IsScalerAgentID(res.AgentID) || !strings.HasPrefix(res.AgentID, "scaler-bare-metal-") {
				t.Errorf("agent id %q, want scaler-bare-metal-<hex>", res.AgentID)
			}
		}
	}
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j1", Labels: []string{"linux"}}); res.AgentID != agents[0] {
		t.Errorf("a second request for j1 spawned %q, want the existing %q", res.AgentID, agents[0])
	}
	// The agent registers with its token, then leaves: its compute is
	// destroyed and the capacity is free again.
	token := m.agentToken(agents[0])
	reg, err := m.OnAgentRegistered(agents[0], token)
	if err != nil || !reg.Managed || reg.BoundJobID != "j1" || !strings.Contains(strings.Join(reg.Labels, ","), "kici:scaler:bm") {
		t.Fatalf("registration: got %+v, %v; want managed, bound to j1, with kici:scaler:bm", reg, err)
	}
	m.OnAgentDisconnected(agents[0])
	waitFreed(t, sink)
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j3", Labels: []string{"linux"}}); res.Action != ActionSpawning {
		t.Errorf("after a disconnect: got %s (%s), want spawning", res.Action, res.Reason)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.destroys) != 1 || b.destroys[0] != agents[0] {
		t.Errorf("destroyed %v, want [%s]", b.destroys, agents[0])
	}
}

func TestRefusedLaunchDefersTheScalerAndReachesTheJob(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal", spawnErr: Refused("exec %q: no such file or directory", "/nope/kici-agent")}
	m, sink, clock := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 4, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": b})
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j1", RunID: "r", Labels: []string{"linux"}}); res.Action != ActionSpawning {
		t.Fatalf("first request: got %s, want spawning", res.Action)
	}
	waitFreed(t, sink)
	sink.mu.Lock()
	detail := sink.failures["j1"]
	failed := append([]string(nil), sink.failed...)
	sink.mu.Unlock()
	if !strings.Contains(detail, "/nope/kici-agent") {
		t.Errorf("provisioning error of j1: got %q, want the spawn error", detail)
	}
	if len(failed) != 1 || failed[0] != "bare-metal/bound" {
		t.Errorf("spawn failures counted %v, want [bare-metal/bound]", failed)
	}
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j2", Labels: []string{"linux"}})
	if res.Action != ActionSkipped || res.RetryAfter != DefaultDeferBase || !strings.Contains(res.Reason, "deferred until") {
		t.Fatalf("request during the deferral: got %+v, want skipped for %s", res, DefaultDeferBase)
	}
	if got := b.spawns(); got != 1 {
		t.Errorf("spawn attempts during the deferral: got %d, want 1", got)
	}
	// After the deferral the next refusal doubles it.
	clock.add(DefaultDeferBase)
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j2", Labels: []string{"linux"}}); res.Action != ActionSpawning {
		t.Fatalf("after the deferral: got %s, want spawning", res.Action)
	}
	waitFreed(t, sink)
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j3", Labels: []string{"linux"}}); res.RetryAfter != 2*DefaultDeferBase {
		t.Errorf("second deferral: got retry after %s, want %s", res.RetryAfter, 2*DefaultDeferBase)
	}
}

func TestUnknownScalerAgentIsRefused(t *testing.T) {
	t.Parallel()
	m, _, _ := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 1, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": &recordingBackend{typ: "bare-metal", block: make(chan struct{})}})
	if _, err := m.OnAgentRegistered("scaler-bare-metal-deadbeef", "ksa_x"); !errors.Is(err, ErrUnknownScalerAgent) {
		t.Errorf("unknown scaler agent: got %v, want ErrUnknownScalerAgent", err)
	}
	reg, err := m.OnAgentRegistered("static-1", "")
	if err != nil || reg.Managed {
		t.Errorf("static agent: got %+v, %v; want unmanaged, no error", reg, err)
	}
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", Labels: []string{"linux"}})
	if _, err := m.OnAgentRegistered(res.AgentID, "ksa_forged"); !errors.Is(err, ErrUnknownScalerAgent) {
		t.Errorf("known agent with a forged token: got %v, want ErrUnknownScalerAgent", err)
	}
}

func TestReloadIsAllOrNothingAndRetiresRemovedScalers(t *testing.T) {
	t.Parallel()
	a := &recordingBackend{typ: "bare-metal"}
	m, _, _ := newManager(t, []ScalerConfig{
		{Name: "a", Type: "bare-metal", MaxAgents: 1, LabelSets: []LabelSet{{Labels: []string{"linux"}}}},
	}, map[string]Backend{"a": a})
	// A type change is refused and the running config is untouched.
	_, err := m.Reload(Config{Scalers: []ScalerConfig{{Name: "a", Type: "container", MaxAgents: 9, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "restart the orchestrator") {
		t.Fatalf("type change: got %v, want a restart error", err)
	}
	if st := m.Status(); st[0].MaxAgents != 1 || st[0].Type != "bare-metal" {
		t.Errorf("after a refused reload: got %+v, want the old config", st[0])
	}
	// Removing a with an agent alive retires it: no new work, closed when
	// the agent leaves.
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", Labels: []string{"linux"}})
	b := &recordingBackend{typ: "container"}
	got, err := m.Reload(Config{Scalers: []ScalerConfig{{Name: "b", Type: "container", MaxAgents: 1, LabelSets: []LabelSet{{Labels: []string{"other"}}}}}}, map[string]Backend{"b": b})
	if err != nil || len(got.Retired) != 1 || len(got.Added) != 1 {
		t.Fatalf("reload: got %+v, %v; want a retired and b added", got, err)
	}
	if r := m.RequestScale(t.Context(), ScaleRequest{JobID: "j2", Labels: []string{"linux"}}); r.Action != ActionNoMatch {
		t.Errorf("a retired scaler took work: %+v", r)
	}
	if _, err := m.OnAgentRegistered(res.AgentID, m.agentToken(res.AgentID)); err != nil {
		t.Fatal(err)
	}
	m.OnAgentDisconnected(res.AgentID)
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if !closed {
		t.Errorf("the retired scaler's backend was not closed after its last agent left")
	}
}

func TestWarmPoolKeepsIdleAgentsAndTrimsTheSurplus(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal"}
	m, _, clock := newManager(t, []ScalerConfig{{
		Name: "warm", Type: "bare-metal", MaxAgents: 5,
		LabelSets: []LabelSet{{Labels: []string{"linux"}}},
		WarmPool:  WarmPool{Size: 2, IdleTimeout: time.Minute},
	}}, map[string]Backend{"warm": b})
	m.tendWarmPools(t.Context())
	waitSpawns := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for b.spawns() != n {
			if time.Now().After(deadline) {
				t.Fatalf("spawns: got %d, want %d", b.spawns(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitSpawns(2)
	b.mu.Lock()
	warm := []string{b.spawned[0].AgentID, b.spawned[1].AgentID}
	bound := b.spawned[0].BoundJobID + b.spawned[1].BoundJobID
	b.mu.Unlock()
	if bound != "" {
		t.Errorf("warm spawns are bound to jobs %q, want none", bound)
	}
	for _, id := range warm {
		if reg, err := m.OnAgentRegistered(id, m.agentToken(id)); err != nil || reg.BoundJobID != "" {
			t.Fatalf("warm agent registration: %+v, %v", reg, err)
		}
	}
	m.tendWarmPools(t.Context())
	if got := b.spawns(); got != 2 {
		t.Errorf("a full pool spawned more: %d spawns, want 2", got)
	}
	// One warm agent takes a job: the pool refills.
	m.OnAgentBusy(warm[0])
	m.tendWarmPools(t.Context())
	waitSpawns(3)
	// The pool shrinks to 0: idle agents older than the idle timeout go.
	if _, err := m.Reload(Config{Scalers: []ScalerConfig{{Name: "warm", Type: "bare-metal", MaxAgents: 5,
		LabelSets: []LabelSet{{Labels: []string{"linux"}}}, WarmPool: WarmPool{Size: 0, IdleTimeout: time.Minute}}}}, nil); err != nil {
		t.Fatal(err)
	}
	m.tendWarmPools(t.Context())
	b.mu.Lock()
	early := len(b.destroys)
	b.mu.Unlock()
	if early != 0 {
		t.Errorf("idle agents destroyed before their idle timeout: %d", early)
	}
	clock.add(2 * time.Minute)
	m.tendWarmPools(t.Context())
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.destroys) != 1 || b.destroys[0] != warm[1] {
		t.Errorf("destroyed %v, want only the idle warm agent %s (the busy one keeps its job)", b.destroys, warm[1])
	}
}

func TestAgentThatNeverRegistersIsReleasedAfterTheDeadline(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal"}
	m, sink, clock := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 1, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": b})
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", RunID: "r", Labels: []string{"linux"}})
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		spawned := m.agents[res.AgentID].handle.AgentID != ""
		m.mu.Unlock()
		if spawned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("spawn did not return")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.tendWarmPools(t.Context())
	if r := m.RequestScale(t.Context(), ScaleRequest{JobID: "k", Labels: []string{"linux"}}); r.Action != ActionAtCapacity {
		t.Fatalf("before the deadline: got %s, want at-capacity", r.Action)
	}
	clock.add(DefaultSpawnTimeout + time.Second)
	m.tendWarmPools(t.Context())
	waitFreed(t, sink)
	sink.mu.Lock()
	detail := sink.failures["j"]
	sink.mu.Unlock()
	if !strings.Contains(detail, "did not register within the spawn deadline") {
		t.Errorf("job's provisioning error: got %q, want the registration deadline", detail)
	}
	b.mu.Lock()
	destroyed := slices.Contains(b.destroys, res.AgentID)
	b.mu.Unlock()
	if !destroyed {
		t.Errorf("the silent agent's compute was not destroyed")
	}
}

func TestResourceCapBoundsTheSumOfRequests(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "container"}
	m, _, _ := newManager(t, []ScalerConfig{{
		Name: "boxes", Type: "container", MaxAgents: 10, ResourceCap: Spec{CPUs: 4},
		LabelSets: []LabelSet{{Labels: []string{"linux"}, Requests: Spec{CPUs: 1.5}}},
	}}, map[string]Backend{"boxes": b})
	var got []string
	for _, job := range []string{"a", "b", "c"} {
		got = append(got, m.RequestScale(t.Context(), ScaleRequest{JobID: job, Labels: []string{"linux"}}).Action)
	}
	// 1.5 + 1.5 = 3 fits under 4; a third would make 4.5.
	if want := []string{ActionSpawning, ActionSpawning, ActionAtCapacity}; !slices.Equal(got, want) {
		t.Errorf("results: got %v, want %v", got, want)
	}
	if r := m.RequestScale(t.Context(), ScaleRequest{JobID: "c", Labels: []string{"linux"}}); !strings.Contains(r.Reason, "resourceCap.maxCpu") {
		t.Errorf("refusal reason %q, want it to name resourceCap.maxCpu", r.Reason)
	}
}

func TestRegisteredAgentKeepsItsJobUntilBusyAndIdleOnesGo(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal"}
	m, _, clock := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 5, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": b})
	first := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", Labels: []string{"linux"}})
	if _, err := m.OnAgentRegistered(first.AgentID, m.agentToken(first.AgentID)); err != nil {
		t.Fatal(err)
	}
	// Registered but not yet handed its job: asking again for the job
	// must not spawn a second agent.
	if again := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", Labels: []string{"linux"}}); again.AgentID != first.AgentID {
		t.Fatalf("a request right after registration spawned %q, want the registered %q", again.AgentID, first.AgentID)
	}
	// It never gets a job (another agent took it): after a minute idle it
	// is destroyed.
	clock.add(2 * time.Minute)
	m.tendWarmPools(t.Context())
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.destroys, first.AgentID) {
		t.Errorf("the idle bound agent was not destroyed (destroys %v)", b.destroys)
	}
	if b.spawned != nil && len(b.spawned) != 1 {
		t.Errorf("spawns: got %d, want 1", len(b.spawned))
	}
}
