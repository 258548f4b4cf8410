package scalertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scaler"
)

// DefaultFailEnv makes kici-agent exit at start-up, before it dials: it
// refuses an orchestrator URL that is not ws:// or wss://.
var DefaultFailEnv = map[string]string{"KICI_ORCHESTRATOR_URL": "http://127.0.0.1:1/ws"}

// DefaultFailOutput is part of the line kici-agent prints for
// DefaultFailEnv, which the EventFailed detail must hold.
const DefaultFailOutput = `KICI_ORCHESTRATOR_URL) "http://127.0.0.1:1/ws": want a ws:// or wss:// URL`

// DefaultTimeout bounds each wait of the harness.
const DefaultTimeout = 30 * time.Second

// scalerName is the Scaler of every request the harness makes.
const scalerName = "conformance"

// Harness describes the backend under test.
type Harness struct {
	// New builds the backend. stateDir is a directory of the scenario, for
	// the backend's files (e.g. its work dir). Within one scenario the
	// harness calls New a second time with the same stateDir to play a
	// restart; the backend it returns must be configured like the first,
	// so that it can Recover the first one's handles. The harness closes
	// every backend New returns when the scenario ends. Required.
	New func(t *testing.T, stateDir string) scaler.Backend
	// LabelSet returns the label set to spawn; its labels must not start
	// with "kici:" (kici-agent refuses those). Required.
	LabelSet func(t *testing.T) scaler.LabelSet
	// LocalProcess says that the backend's compute is a process on this
	// host whose PID is Handle.Ref: the harness checks that it is gone
	// after Destroy.
	LocalProcess bool
	// FailEnv is added to the label set's Env to make the agent exit
	// before it registers; FailOutput is part of a line it prints then,
	// which the EventFailed detail must hold. Nil and "" mean
	// DefaultFailEnv and DefaultFailOutput.
	FailEnv    map[string]string
	FailOutput string
	// Leftovers, if set, lists what is left on the host of agentID after
	// Destroy or a failed spawn (files, processes, containers); the harness
	// fails the test for each item.
	Leftovers func(t *testing.T, stateDir, agentID string) []string
	// Timeout bounds each wait (registration, close, failure event); 0
	// means DefaultTimeout.
	Timeout time.Duration
	// ListenHost is the address the harness's orchestrator listens on;
	// "" means 127.0.0.1. A backend whose agents live in another network
	// namespace (a microVM) sets one they can reach.
	ListenHost string
	// Listening, if set, is told the port of each orchestrator the
	// harness starts, before any spawn (to open it to the agents).
	Listening func(t *testing.T, port uint16)
}

// Run drives the backend through every scenario of the package doc, each as
// a parallel subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.LabelSet == nil {
		t.Fatal("scalertest: Harness.New and Harness.LabelSet are required")
	}
	if h.FailEnv == nil {
		h.FailEnv = DefaultFailEnv
	}
	if h.FailOutput == "" {
		h.FailOutput = DefaultFailOutput
	}
	if h.Timeout == 0 {
		h.Timeout = DefaultTimeout
	}
	scenarios := []struct {
		name string
		run  func(*testing.T, *scenario)
	}{
		{"spawn register destroy", testLifecycle},
		{"destroy unknown agent", testDestroyUnknown},
		{"spawn with cancelled ctx", testCancelledSpawn},
		{"exit before register", testExitBeforeRegister},
		{"recover after restart", testRecover},
		{"close destroys agents", testClose},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			orch := newOrchestrator(t, h.Timeout, h.ListenHost)
			if h.Listening != nil {
				h.Listening(t, orch.port())
			}
			sc.run(t, &scenario{h: h, dir: t.TempDir(), orch: orch})
		})
	}
}

// scenario is one subtest's world: its state dir and orchestrator.
type scenario struct {
	h    Harness
	dir  string
	orch *orchestrator
}

// backend builds a backend and closes it when the test ends.
func (s *scenario) backend(t *testing.T) scaler.Backend {
	t.Helper()
	b := s.h.New(t, s.dir)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: got %v, want nil", err)
		}
	})
	return b
}

// request builds a SpawnRequest as the manager does, and lets its agent
// register.
func (s *scenario) request(b scaler.Backend, ls scaler.LabelSet, rec *recorder) scaler.SpawnRequest {
	id := "scaler-" + b.Type() + "-" + randomHex(4)
	token := scaler.TokenPrefix + randomHex(16)
	s.orch.allow(id, token)
	return scaler.SpawnRequest{
		AgentID:  id,
		Scaler:   scalerName,
		LabelSet: ls,
		Env: map[string]string{
			"KICI_ORCHESTRATOR_URL": s.orch.url(),
			"KICI_AGENT_ID":         id,
			"KICI_AGENT_TOKEN":      token,
			"KICI_LABELS":           strings.Join(ls.Labels, ","),
			"KICI_AGENT_ONE_SHOT":   "1",
			"KICI_AGENT_SCALER":     "1",
		},
		Limits:     ls.Limits,
		BoundJobID: "job-" + id,
		RunID:      "run-conformance",
		OnEvent:    rec.add,
	}
}

// spawn spawns an agent of ls and checks Spawn's events and handle.
func (s *scenario) spawn(t *testing.T, b scaler.Backend, ls scaler.LabelSet) (scaler.SpawnRequest, scaler.Handle, *recorder) {
	t.Helper()
	rec := newRecorder()
	req := s.request(b, ls, rec)
	h, err := b.Spawn(t.Context(), req)
	if err != nil {
		t.Fatalf("Spawn: got %v, want nil", err)
	}
	checkSpawnEvents(t, rec.types())
	checkHandle(t, b, req, h)
	return req, h, rec
}

// spawnRegistered spawns an agent, waits for it to register, checks the
// registration and marks it registered.
func (s *scenario) spawnRegistered(t *testing.T, b scaler.Backend) (scaler.SpawnRequest, scaler.Handle, *recorder) {
	t.Helper()
	req, h, rec := s.spawn(t, b, s.h.LabelSet(t))
	checkRegistration(t, req, s.orch.waitRegistered(t, req.AgentID))
	if r, ok := b.(scaler.Registrar); ok {
		r.MarkRegistered(req.AgentID)
	}
	return req, h, rec
}

// destroy destroys a registered agent and checks that it stopped politely,
// that nothing of it is left, and that a second Destroy is a no-op.
func (s *scenario) destroy(t *testing.T, b scaler.Backend, h scaler.Handle) {
	t.Helper()
	if err := b.Destroy(t.Context(), h.AgentID); err != nil {
		t.Fatalf("Destroy: got %v, want nil", err)
	}
	if code := s.orch.waitClosed(t, h.AgentID); code != int(websocket.StatusGoingAway) {
		t.Errorf("the agent closed its connection with code %d, want %d (going away): Destroy must let the agent stop by itself within a grace period", code, websocket.StatusGoingAway)
	}
	s.checkGone(t, b, h)
	if err := b.Destroy(t.Context(), h.AgentID); err != nil {
		t.Errorf("second Destroy: got %v, want nil", err)
	}
}

// checkGone checks that nothing is left of an agent: no process (when h
// has a Ref), no listing, no leftovers.
func (s *scenario) checkGone(t *testing.T, b scaler.Backend, h scaler.Handle) {
	t.Helper()
	if s.h.LocalProcess && h.Ref != "" {
		pid, err := strconv.Atoi(h.Ref)
		if err != nil {
			t.Errorf("Handle.Ref: got %q, want a PID", h.Ref)
		} else if running, known := processRunning(pid); !known {
			t.Logf("cannot tell on this system whether process %d is gone", pid)
		} else if running {
			t.Errorf("process %d of agent %s still runs after Destroy", pid, h.AgentID)
		}
	}
	if b.Capabilities().ListsCompute {
		if listed(t, b, h.AgentID) {
			t.Errorf("List: got agent %s, want it gone", h.AgentID)
		}
	}
	if s.h.Leftovers != nil {
		for _, l := range s.h.Leftovers(t, s.dir, h.AgentID) {
			t.Errorf("left behind by agent %s: %s", h.AgentID, l)
		}
	}
}

func listed(t *testing.T, b scaler.Backend, agentID string) bool {
	t.Helper()
	cs, err := b.List(t.Context())
	if err != nil {
		t.Fatalf("List: got %v, want nil", err)
	}
	return slices.ContainsFunc(cs, func(c scaler.Compute) bool { return c.AgentID == agentID })
}

func testLifecycle(t *testing.T, s *scenario) {
	b := s.backend(t)
	req, h, rec := s.spawnRegistered(t, b)
	if b.Capabilities().ListsCompute && !listed(t, b, req.AgentID) {
		t.Errorf("List: agent %s missing, want it listed while it runs", req.AgentID)
	}
	s.destroy(t, b, h)
	rec.checkNoFailure(t, "a registered agent that was destroyed did not fail to spawn")
}

func testDestroyUnknown(t *testing.T, s *scenario) {
	b := s.backend(t)
	if err := b.Destroy(t.Context(), "scaler-"+b.Type()+"-"+randomHex(4)); err != nil {
		t.Errorf("Destroy of an unknown agent: got %v, want nil", err)
	}
}

func testCancelledSpawn(t *testing.T, s *scenario) {
	b := s.backend(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := s.request(b, s.h.LabelSet(t), newRecorder())
	h, err := b.Spawn(ctx, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Spawn with a cancelled ctx: got handle %+v, error %v; want context.Canceled", h, err)
	}
	s.checkGone(t, b, scaler.Handle{AgentID: req.AgentID})
	if err := b.Destroy(t.Context(), req.AgentID); err != nil {
		t.Errorf("Destroy after a cancelled spawn: got %v, want nil", err)
	}
	if s.orch.registered(req.AgentID) {
		t.Errorf("agent %s registered after a cancelled spawn, want nothing started", req.AgentID)
	}
}

func testExitBeforeRegister(t *testing.T, s *scenario) {
	b := s.backend(t)
	ls := s.h.LabelSet(t)
	ls.Env = maps.Clone(ls.Env)
	if ls.Env == nil {
		ls.Env = map[string]string{}
	}
	maps.Copy(ls.Env, s.h.FailEnv)
	_, h, rec := s.spawn(t, b, ls)
	ev := rec.waitFailed(t, s.h.Timeout)
	if !strings.Contains(ev.Detail, s.h.FailOutput) {
		t.Errorf("%s detail: got %q, want it to hold the agent's last output %q", scaler.EventFailed, ev.Detail, s.h.FailOutput)
	}
	types := rec.types()
	if i := slices.Index(types, scaler.EventFailed); i < 1 || types[i-1] != scaler.EventConnecting {
		t.Errorf("events: got %v, want %s right after %s", types, scaler.EventFailed, scaler.EventConnecting)
	}
	if err := b.Destroy(t.Context(), h.AgentID); err != nil {
		t.Errorf("Destroy after the agent failed: got %v, want nil", err)
	}
	s.checkGone(t, b, h)
	if n := len(rec.failures()); n != 1 {
		t.Errorf("got %d %s events, want 1", n, scaler.EventFailed)
	}
	if s.orch.registered(h.AgentID) {
		t.Errorf("agent %s registered, want it to fail before", h.AgentID)
	}
}

func testRecover(t *testing.T, s *scenario) {
	first := s.backend(t)
	if !first.Capabilities().Recoverable {
		t.Skipf("backend %s is not Recoverable", first.Type())
	}
	reqA, hA, recA := s.spawnRegistered(t, first)
	_, hB, _ := s.spawnRegistered(t, first)
	if err := first.Destroy(t.Context(), hB.AgentID); err != nil {
		t.Fatalf("Destroy: got %v, want nil", err)
	}
	s.orch.waitClosed(t, hB.AgentID)

	// The restart: a second backend over the same state, given the handles
	// the manager saved. The first one is left as it is, as a crashed
	// orchestrator would leave it.
	second := s.backend(t)
	got, err := second.Recover(t.Context(), []scaler.Handle{hA, hB})
	if err != nil {
		t.Fatalf("Recover: got %v, want nil", err)
	}
	var ids []string
	for _, h := range got {
		ids = append(ids, h.AgentID)
	}
	if diff := cmp.Diff([]string{reqA.AgentID}, ids); diff != "" {
		t.Fatalf("Recover: re-attached agents (-want +got):\n%s", diff)
	}
	if second.Capabilities().ListsCompute && !listed(t, second, reqA.AgentID) {
		t.Errorf("List after Recover: agent %s missing, want it listed", reqA.AgentID)
	}
	s.destroy(t, second, got[0])
	recA.checkNoFailure(t, "a registered agent destroyed after a restart did not fail to spawn")
}

func testClose(t *testing.T, s *scenario) {
	b := s.backend(t)
	_, h, rec := s.spawnRegistered(t, b)
	if err := b.Close(t.Context()); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	if code := s.orch.waitClosed(t, h.AgentID); code != int(websocket.StatusGoingAway) {
		t.Errorf("the agent closed its connection with code %d, want %d (going away)", code, websocket.StatusGoingAway)
	}
	s.checkGone(t, b, h)
	rec.checkNoFailure(t, "Close destroyed a registered agent")
	// The scenario's cleanup closes it a second time.
}

// checkSpawnEvents checks the events a successful Spawn emitted before it
// returned: provisioning first, ready, connecting last, no failure.
//
// An agent that exits at once (testExitBeforeRegister) may already have
// had its scaler.failed emitted by the backend's watcher when the events
// are read, right after Spawn returned: a failure after the last
// connecting event belongs to the agent's life, not to Spawn, and is
// checked by the caller.
func checkSpawnEvents(t *testing.T, types []string) {
	t.Helper()
	if i := slices.Index(types, scaler.EventConnecting); i >= 0 && i < len(types)-1 {
		rest := types[i+1:]
		if len(rest) == 1 && rest[0] == scaler.EventFailed {
			types = types[:i+1]
		}
	}
	known := []string{scaler.EventProvisioning, scaler.EventNetwork, scaler.EventReady, scaler.EventConnecting}
	ok := len(types) >= 2 && types[0] == scaler.EventProvisioning && types[len(types)-1] == scaler.EventConnecting &&
		slices.Contains(types, scaler.EventReady)
	for _, typ := range types {
		ok = ok && slices.Contains(known, typ)
	}
	if !ok {
		t.Errorf("events of a successful spawn: got %v, want %s first, %s, and %s last, and nothing else but %s",
			types, scaler.EventProvisioning, scaler.EventReady, scaler.EventConnecting, scaler.EventNetwork)
	}
}

func checkHandle(t *testing.T, b scaler.Backend, req scaler.SpawnRequest, h scaler.Handle) {
	t.Helper()
	if h.AgentID != req.AgentID || h.Scaler != req.Scaler {
		t.Errorf("Handle: got agent %q of scaler %q, want %q of %q", h.AgentID, h.Scaler, req.AgentID, req.Scaler)
	}
	if h.Ref == "" || h.SpawnedAt.IsZero() {
		t.Errorf("Handle: got Ref %q, SpawnedAt %v; want both set", h.Ref, h.SpawnedAt)
	}
	if b.Capabilities().Recoverable && len(h.Blob) == 0 {
		t.Errorf("Handle.Blob: got none, want a record to recover from")
	}
}

// checkRegistration checks that the agent registered as the request said:
// its id, every label of its label set (kici-agent adds kici:os and
// kici:arch), one-shot, and as a scaler agent.
func checkRegistration(t *testing.T, req scaler.SpawnRequest, reg *protocol.Register) {
	t.Helper()
	if reg.AgentID != req.AgentID {
		t.Errorf("register: got agent id %q, want %q", reg.AgentID, req.AgentID)
	}
	var missing []string
	for _, l := range req.LabelSet.Labels {
		if !slices.Contains(reg.Labels, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		t.Errorf("register: got labels %v, want them to include %v", reg.Labels, req.LabelSet.Labels)
	}
	if !reg.OneShot || !reg.ScalerAgent {
		t.Errorf("register: got one_shot %t, scaler_agent %t; want both true", reg.OneShot, reg.ScalerAgent)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
