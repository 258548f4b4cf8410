package scaler_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/fake"
)

// The leftovers every orphan world starts with: compute on the Host that
// no backend tracks.
const (
	orphanA    = "scaler-fake-orphan0a" // nothing tracks it
	orphanB    = "scaler-fake-orphan0b" // nothing tracks it
	connected  = "scaler-fake-connect1" // the orchestrator has it connected
	bound      = "scaler-fake-bound001" // a job is bound to it
	unverified = "scaler-fake-unverif1" // its backend cannot confirm it
	otherOwned = "scaler-fake-other001" // of the scaler whose backend cannot stop orphans
	nowhere    = "scaler-fake-nowhere1" // no compute at all
)

// recordingFake is the fake backend, recording the spawn requests (for
// their tokens) and the StopOrphan calls.
type recordingFake struct {
	*fake.Backend
	spawned chan string // agent ids, once Spawn returned

	mu    sync.Mutex
	reqs  map[string]scaler.SpawnRequest
	stops []string
}

func (b *recordingFake) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	b.mu.Lock()
	b.reqs[req.AgentID] = req
	b.mu.Unlock()
	h, err := b.Backend.Spawn(ctx, req)
	b.spawned <- req.AgentID
	return h, err
}

func (b *recordingFake) StopOrphan(ctx context.Context, id string, isTracked func(string) bool) (string, error) {
	b.mu.Lock()
	b.stops = append(b.stops, id)
	b.mu.Unlock()
	return b.Backend.StopOrphan(ctx, id, isTracked)
}

func (b *recordingFake) stopCalls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.stops)
}

// listOnly is a backend that lists compute but cannot stop untracked
// compute: the embedded interface hides the fake's StopOrphan.
type listOnly struct{ scaler.Backend }

// trackerHook stands for the orchestrator's trackers (Config.Trackers).
// After flipAfter calls, flip also counts as registered: compute that
// becomes tracked between the listing and the kill.
type trackerHook struct {
	mu         sync.Mutex
	registered map[string]bool
	boundJob   map[string]bool
	err        error
	calls      int
	flipAfter  int
	flip       string
}

func (h *trackerHook) read(ctx context.Context) (map[string]bool, map[string]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.err != nil {
		return nil, nil, h.err
	}
	reg := map[string]bool{}
	for id := range h.registered {
		reg[id] = true
	}
	if h.flip != "" && h.calls > h.flipAfter {
		reg[h.flip] = true
	}
	return reg, h.boundJob, nil
}

func (h *trackerHook) set(f func(h *trackerHook)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

type nopSink struct{}

func (nopSink) ScalerEvent(runID, jobID string, ev scaler.Event)    {}
func (nopSink) ProvisioningFailed(jobID, detail string)             {}
func (nopSink) CapacityFreed()                                      {}
func (nopSink) SpawnFailed(backend string, bound bool)              {}
func (nopSink) SpawnRefused(scaler, cap string)                     {}
func (nopSink) AgentProvisioned(backend string, took time.Duration) {}
func (nopSink) RetireAgent(agentID string) bool                     { return true }

// orphanWorld is a manager over two fake scalers sharing one Host: "s1"
// (a fake backend that can stop orphans) and "s2" (one that cannot), an
// agent spawning and one registered on s1, and the leftovers above.
type orphanWorld struct {
	m          *scaler.Manager
	host       *fake.Host
	s1         *recordingFake
	hook       *trackerHook
	spawning   string
	registered string
}

func newOrphanWorld(t *testing.T) *orphanWorld {
	t.Helper()
	host := fake.NewHost()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	s1 := &recordingFake{
		Backend: fake.New(logger, fake.Config{WorkDir: t.TempDir(), Host: host, Scaler: "s1"}),
		spawned: make(chan string, 4), reqs: map[string]scaler.SpawnRequest{},
	}
	s2 := listOnly{fake.New(logger, fake.Config{WorkDir: t.TempDir(), Host: host, Scaler: "s2"})}
	hook := &trackerHook{registered: map[string]bool{connected: true}, boundJob: map[string]bool{bound: true}}
	sets := []scaler.LabelSet{{Labels: []string{"linux"}}}
	m, err := scaler.New(logger, scaler.Config{
		Scalers: []scaler.ScalerConfig{
			// The agents dial nothing that listens: they keep retrying,
			// alive and unregistered, until they are destroyed.
			{Name: "s1", Type: fake.Type, MaxAgents: 5, OrchestratorURL: "ws://127.0.0.1:1/ws", LabelSets: sets},
			{Name: "s2", Type: fake.Type, MaxAgents: 5, OrchestratorURL: "ws://127.0.0.1:1/ws", LabelSets: []scaler.LabelSet{{Labels: []string{"other"}}}},
		},
		Trackers: hook.read,
	}, map[string]scaler.Backend{"s1": s1, "s2": s2}, nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	w := &orphanWorld{m: m, host: host, s1: s1, hook: hook}
	spawn := func(job string) string {
		t.Helper()
		res := m.RequestScale(t.Context(), scaler.ScaleRequest{JobID: job, RunID: "run-1", Labels: []string{"linux"}})
		if res.Action != scaler.ActionSpawning {
			t.Fatalf("request scale for %s: got %s (%s), want %s", job, res.Action, res.Reason, scaler.ActionSpawning)
		}
		select {
		case id := <-s1.spawned:
			if id != res.AgentID {
				t.Fatalf("spawned %s, want %s", id, res.AgentID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("agent %s was never spawned", res.AgentID)
		}
		return res.AgentID
	}
	w.spawning = spawn("job-spawning")
	w.registered = spawn("job-registered")
	s1.mu.Lock()
	token := s1.reqs[w.registered].Env["KICI_AGENT_TOKEN"]
	s1.mu.Unlock()
	if _, err := m.OnAgentRegistered(w.registered, token); err != nil {
		t.Fatalf("register %s: %v", w.registered, err)
	}
	for _, l := range []fake.Leftover{
		{AgentID: orphanA, Scaler: "s1"}, {AgentID: orphanB, Scaler: "s1"},
		{AgentID: connected, Scaler: "s1"}, {AgentID: bound, Scaler: "s1"},
		{AgentID: unverified, Scaler: "s1", Unverified: true},
		{AgentID: otherOwned, Scaler: "s2"},
	} {
		host.Leave(l)
	}
	return w
}

// running fails the test unless exactly want of ids still run.
func (w *orphanWorld) checkRunning(t *testing.T, want []string) {
	t.Helper()
	all := []string{orphanA, orphanB, connected, bound, unverified, otherOwned, w.spawning, w.registered}
	var got []string
	for _, id := range all {
		if w.host.Running(id) {
			got = append(got, id)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("compute still running (-want +got):\n%s", diff)
	}
}

func (w *orphanWorld) allBut(ids ...string) []string {
	var out []string
	for _, id := range []string{orphanA, orphanB, connected, bound, unverified, otherOwned, w.spawning, w.registered} {
		if !slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestOrphansListsEveryComputeWithItsTrackers(t *testing.T) {
	t.Parallel()
	w := newOrphanWorld(t)
	got, err := w.m.Orphans(t.Context())
	if err != nil {
		t.Fatalf("Orphans: got error %v, want nil", err)
	}
	row := func(id, sc, status string, by ...string) scaler.Orphan {
		return scaler.Orphan{ID: id, Scaler: sc, Backend: fake.Type, Ref: id, Status: status, TrackedBy: append([]string{}, by...)}
	}
	want := []scaler.Orphan{
		row(w.spawning, "s1", scaler.ComputeTracked, scaler.TrackedBySpawning),
		row(w.registered, "s1", scaler.ComputeTracked, scaler.TrackedByRegistered),
		row(orphanA, "s1", scaler.ComputeOrphaned),
		row(orphanB, "s1", scaler.ComputeOrphaned),
		row(connected, "s1", scaler.ComputeTracked, scaler.TrackedByRegistered),
		row(bound, "s1", scaler.ComputeTracked, scaler.TrackedByBoundJob),
		row(unverified, "s1", scaler.ComputeUnverified),
		row(otherOwned, "s2", scaler.ComputeOrphaned),
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(scaler.Orphan{}, "Started"),
		cmpopts.SortSlices(func(a, b scaler.Orphan) bool { return a.ID < b.ID }),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Orphans (-want +got):\n%s", diff)
	}
	// Scalers come in their configured order.
	if i := slices.IndexFunc(got, func(o scaler.Orphan) bool { return o.Scaler == "s2" }); i != len(got)-1 {
		t.Errorf("s2's compute at %d of %d, want it last (scaler order)", i, len(got))
	}
	for _, o := range got {
		if o.Started.IsZero() {
			t.Errorf("%s: Started is zero, want the spawn time", o.ID)
		}
	}
}

func TestOrphansFailClosedWhenTrackersFail(t *testing.T) {
	t.Parallel()
	w := newOrphanWorld(t)
	w.hook.set(func(h *trackerHook) { h.err = errors.New("database is down") })
	got, err := w.m.Orphans(t.Context())
	if err == nil || !strings.Contains(err.Error(), "database is down") || !strings.Contains(err.Error(), "every compute counts as tracked") {
		t.Errorf("Orphans error: got %v, want the trackers' failure and that every compute counts as tracked", err)
	}
	if len(got) != 8 {
		t.Fatalf("Orphans: got %d compute, want 8 (the list still comes back)", len(got))
	}
	for _, o := range got {
		if o.Status != scaler.ComputeTracked {
			t.Errorf("%s: status %s, want %s while the trackers cannot be read", o.ID, o.Status, scaler.ComputeTracked)
		}
	}
}

func TestStopOrphans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(h *trackerHook)
		ids   func(w *orphanWorld) []string
		// want is each id's outcome and a piece of its error ("" for none).
		want      func(w *orphanWorld) []scaler.StopOutcome
		wantStops []string // the backend's StopOrphan calls
		stopped   []string // what no longer runs afterwards
	}{
		{
			name: "stops the named orphan and leaves the other running",
			ids:  func(*orphanWorld) []string { return []string{orphanA} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{{ID: orphanA, Outcome: scaler.OutcomeStopped}}
			},
			wantStops: []string{orphanA},
			stopped:   []string{orphanA},
		},
		{
			name: "tracked compute is refused without asking the backend",
			ids: func(w *orphanWorld) []string {
				return []string{w.spawning, w.registered, connected, bound}
			},
			want: func(w *orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{
					{ID: w.spawning, Outcome: scaler.OutcomeTracked, Error: "tracked by spawning"},
					{ID: w.registered, Outcome: scaler.OutcomeTracked, Error: "tracked by registered"},
					{ID: connected, Outcome: scaler.OutcomeTracked, Error: "tracked by registered"},
					{ID: bound, Outcome: scaler.OutcomeTracked, Error: "tracked by bound-job"},
				}
			},
		},
		{
			name: "compute nobody lists is not found",
			ids:  func(*orphanWorld) []string { return []string{nowhere} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{{ID: nowhere, Outcome: scaler.OutcomeNotFound, Error: "no scaler lists"}}
			},
		},
		{
			name: "unverified compute is never stopped",
			ids:  func(*orphanWorld) []string { return []string{unverified} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{{ID: unverified, Outcome: scaler.OutcomeUnverified, Error: "cannot confirm"}}
			},
		},
		{
			name: "a backend that cannot stop orphans gives an error",
			ids:  func(*orphanWorld) []string { return []string{otherOwned} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{{ID: otherOwned, Outcome: scaler.OutcomeError, Error: `scaler "s2": the fake backend cannot stop untracked compute`}}
			},
		},
		{
			name: "one outcome per id in the order given, a repeated id stopped once",
			ids:  func(w *orphanWorld) []string { return []string{orphanB, nowhere, w.spawning, orphanA, orphanB} },
			want: func(w *orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{
					{ID: orphanB, Outcome: scaler.OutcomeStopped},
					{ID: nowhere, Outcome: scaler.OutcomeNotFound, Error: "no scaler lists"},
					{ID: w.spawning, Outcome: scaler.OutcomeTracked, Error: "tracked by spawning"},
					{ID: orphanA, Outcome: scaler.OutcomeStopped},
					{ID: orphanB, Outcome: scaler.OutcomeStopped},
				}
			},
			wantStops: []string{orphanA, orphanB},
			stopped:   []string{orphanA, orphanB},
		},
		{
			name: "compute that becomes tracked before the kill is spared",
			// The first reading (the listing) sees orphanA untracked; the
			// backend's re-check right before the kill sees it registered.
			setup: func(h *trackerHook) { h.flip, h.flipAfter = orphanA, 1 },
			ids:   func(*orphanWorld) []string { return []string{orphanA} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{{ID: orphanA, Outcome: scaler.OutcomeTracked, Error: "it became tracked"}}
			},
			wantStops: []string{orphanA},
		},
		{
			name:  "unreadable trackers make everything tracked",
			setup: func(h *trackerHook) { h.err = errors.New("database is down") },
			ids:   func(*orphanWorld) []string { return []string{orphanA, nowhere} },
			want: func(*orphanWorld) []scaler.StopOutcome {
				return []scaler.StopOutcome{
					{ID: orphanA, Outcome: scaler.OutcomeTracked, Error: "database is down"},
					{ID: nowhere, Outcome: scaler.OutcomeTracked, Error: "database is down"},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newOrphanWorld(t)
			if tt.setup != nil {
				w.hook.set(tt.setup)
			}
			got, err := w.m.StopOrphans(t.Context(), tt.ids(w))
			if err != nil {
				t.Fatalf("StopOrphans: got error %v, want nil", err)
			}
			want := tt.want(w)
			if len(got) != len(want) {
				t.Fatalf("StopOrphans: got %d outcomes %+v, want %d", len(got), got, len(want))
			}
			for i := range want {
				if got[i].ID != want[i].ID || got[i].Outcome != want[i].Outcome {
					t.Errorf("outcome %d: got %s %s (%q), want %s %s", i, got[i].ID, got[i].Outcome, got[i].Error, want[i].ID, want[i].Outcome)
				}
				switch {
				case want[i].Error == "" && got[i].Error != "":
					t.Errorf("outcome %d (%s): got error %q, want none", i, got[i].ID, got[i].Error)
				case !strings.Contains(got[i].Error, want[i].Error):
					t.Errorf("outcome %d (%s): got error %q, want it to hold %q", i, got[i].ID, got[i].Error, want[i].Error)
				}
			}
			stops := w.s1.stopCalls()
			slices.Sort(stops)
			if diff := cmp.Diff(tt.wantStops, stops, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("StopOrphan calls (-want +got):\n%s", diff)
			}
			w.checkRunning(t, w.allBut(tt.stopped...))
		})
	}
}

func TestStopOrphansRefusesBadIDs(t *testing.T) {
	t.Parallel()
	many := make([]string, scaler.MaxOrphanStops+1)
	for i := range many {
		many[i] = orphanA
	}
	tests := []struct {
		name    string
		ids     []string
		wantMsg string
	}{
		{name: "none", ids: nil, wantMsg: "want 1 to 100 ids, got 0"},
		{name: "too many", ids: many, wantMsg: "want 1 to 100 ids, got 101"},
		{name: "empty", ids: []string{orphanA, ""}, wantMsg: "ids[1] is empty"},
		{name: "slash", ids: []string{orphanA, "../" + orphanB}, wantMsg: `ids[1] "../scaler-fake-orphan0b" holds a "/"`},
		{name: "dot", ids: []string{"."}, wantMsg: `ids[0] "." is not an id`},
		{name: "dot dot", ids: []string{".."}, wantMsg: `ids[0] ".." is not an id`},
	}
	w := newOrphanWorld(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.m.StopOrphans(t.Context(), tt.ids)
			if !errors.Is(err, scaler.ErrBadOrphanIDs) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("StopOrphans: got error %v, want ErrBadOrphanIDs saying %q", err, tt.wantMsg)
			}
			if got != nil {
				t.Errorf("StopOrphans: got outcomes %+v, want none", got)
			}
		})
	}
	// Nothing was stopped, not even the good ids of a refused call.
	if stops := w.s1.stopCalls(); len(stops) != 0 {
		t.Errorf("StopOrphan calls: got %v, want none", stops)
	}
	w.checkRunning(t, w.allBut())
	if err := scaler.ValidateOrphanIDs([]string{orphanA, "scaler-fake-a.b"}); err != nil {
		t.Errorf("ValidateOrphanIDs of good ids: got %v, want nil", err)
	}
}
