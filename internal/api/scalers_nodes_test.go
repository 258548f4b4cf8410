package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
)

// fakeNodeScalers is a coordinator's view of its workers: each worker of
// compute answers its list, each of failing answers its error, any other
// node is unknown. It records what it was asked.
type fakeNodeScalers struct {
	self    string
	compute map[string][]scaler.Orphan
	failing map[string]error
	// delay is how long each NodeOrphans call takes.
	delay time.Duration

	mu       sync.Mutex
	listed   []string
	stops    []fakeStop
	inFlight int
	maxIn    int
}

// fakeStop is one NodeStopOrphans call.
type fakeStop struct {
	Node string
	IDs  []string
}

func (f *fakeNodeScalers) Self() string { return f.self }

func (f *fakeNodeScalers) Nodes() []string {
	var out []string
	for n := range f.compute {
		out = append(out, n)
	}
	for n := range f.failing {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (f *fakeNodeScalers) known(node string) error {
	if err, ok := f.failing[node]; ok {
		return err
	}
	if _, ok := f.compute[node]; !ok {
		return fmt.Errorf("node %q: %w", node, api.ErrUnknownNode)
	}
	return nil
}

func (f *fakeNodeScalers) NodeOrphans(ctx context.Context, node string) ([]scaler.Orphan, error) {
	f.mu.Lock()
	f.listed = append(f.listed, node)
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := f.known(node); err != nil {
		return nil, err
	}
	return f.compute[node], nil
}

func (f *fakeNodeScalers) NodeStopOrphans(ctx context.Context, node string, ids []string) ([]scaler.StopOutcome, error) {
	f.mu.Lock()
	f.stops = append(f.stops, fakeStop{Node: node, IDs: ids})
	f.mu.Unlock()
	if err := f.known(node); err != nil {
		return nil, err
	}
	out := make([]scaler.StopOutcome, 0, len(ids))
	for _, id := range ids {
		out = append(out, scaler.StopOutcome{ID: id, Outcome: scaler.OutcomeStopped})
	}
	return out, nil
}

// asked is the nodes NodeOrphans was called for, sorted, and the
// NodeStopOrphans calls in order.
func (f *fakeNodeScalers) asked() ([]string, []fakeStop) {
	f.mu.Lock()
	defer f.mu.Unlock()
	listed := slices.Clone(f.listed)
	slices.Sort(listed)
	return listed, slices.Clone(f.stops)
}

// fakeLocalScalers is the coordinator's own auto-scaler: its Orphans
// answers local, its StopOrphans stops every id.
type fakeLocalScalers struct {
	local []scaler.Orphan

	mu    sync.Mutex
	stops [][]string
}

// stopped is the ids of each StopOrphans call.
func (f *fakeLocalScalers) stopped() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stops)
}

func (f *fakeLocalScalers) Status() []scaler.ScalerStatus { return nil }
func (f *fakeLocalScalers) Reload(ctx context.Context) (scaler.ReloadResult, error) {
	return scaler.ReloadResult{}, nil
}
func (f *fakeLocalScalers) Retry(name string) error { return nil }
func (f *fakeLocalScalers) Orphans(ctx context.Context) ([]scaler.Orphan, error) {
	return f.local, nil
}

func (f *fakeLocalScalers) StopOrphans(ctx context.Context, ids []string) ([]scaler.StopOutcome, error) {
	f.mu.Lock()
	f.stops = append(f.stops, ids)
	f.mu.Unlock()
	out := make([]scaler.StopOutcome, 0, len(ids))
	for _, id := range ids {
		out = append(out, scaler.StopOutcome{ID: id, Outcome: scaler.OutcomeStopped})
	}
	return out, nil
}

// nodeScalersServer serves the API with local as its auto-scaler and
// nodes as its reach into the workers (either nil for none), on a fresh
// SQLite store, as a harness with the bootstrap admin token.
func nodeScalersServer(t *testing.T, local api.ScalerAdmin, nodes api.NodeScalers) *harness {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), MaxConns: 2})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	tokens := auth.NewAdminTokens(db, auth.AdminTokensConfig{Bootstrap: adminToken})
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := api.Config{AdminTokens: tokens}
	if local != nil {
		cfg.Scalers = local
	}
	if nodes != nil {
		cfg.NodeScalers = nodes
	}
	srv := api.New(logger, db, nil, nil, nil, nil, nil, cfg)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &harness{base: hs.URL, client: &http.Client{Timeout: 30 * time.Second}}
}

// nodeAnswer is one node's answer of the orphans routes with a node.
type nodeAnswer struct {
	Node     string               `json:"node"`
	OK       bool                 `json:"ok"`
	Error    string               `json:"error,omitempty"`
	Compute  []scaler.Orphan      `json:"compute,omitempty"`
	Outcomes []scaler.StopOutcome `json:"outcomes,omitempty"`
}

var (
	started      = time.Date(2026, 3, 14, 11, 0, 0, 0, time.UTC)
	coordOrphan  = scaler.Orphan{Scaler: "local", Backend: "bare-metal", ID: "scaler-bare-metal-c00d", Ref: "4242", Started: started, Status: scaler.ComputeTracked, TrackedBy: []string{scaler.TrackedBySpawning}}
	workerOrphan = scaler.Orphan{Scaler: "docker", Backend: "container", ID: "scaler-container-9f8e7d6c", Ref: "77ab5e0c9d1f", Started: started, Status: scaler.ComputeOrphaned, TrackedBy: []string{}}
)

// clusterFakes are a coordinator "coord" with one compute of its own,
// a worker "worker-a" with one orphan, a worker "worker-b" without
// scalers, and a worker "worker-c" that cannot be reached.
func clusterFakes() (*fakeLocalScalers, *fakeNodeScalers) {
	return &fakeLocalScalers{local: []scaler.Orphan{coordOrphan}}, &fakeNodeScalers{
		self:    "coord",
		compute: map[string][]scaler.Orphan{"worker-a": {workerOrphan}, "worker-b": nil},
		failing: map[string]error{"worker-c": errors.New("worker-c: peer channel closed before the answer")},
	}
}

// TestScalerOrphansNode: GET /api/v1/scalers/orphans?node= answers the
// named node's compute, or every node's for node=all, each with its own
// ok; a node's failure is its answer's, an unknown node is a 404 and a
// malformed one a 400.
func TestScalerOrphansNode(t *testing.T) {
	t.Parallel()
	local, nodes := clusterFakes()
	h := nodeScalersServer(t, local, nodes)

	for _, tt := range []struct {
		name, node string
		want       nodeAnswer
	}{
		{name: "a worker", node: "worker-a", want: nodeAnswer{Node: "worker-a", OK: true, Compute: []scaler.Orphan{workerOrphan}}},
		{name: "a worker without scalers", node: "worker-b", want: nodeAnswer{Node: "worker-b", OK: true}},
		{name: "a failing worker", node: "worker-c", want: nodeAnswer{Node: "worker-c", Error: "worker-c: peer channel closed before the answer"}},
		{name: "the coordinator", node: "coord", want: nodeAnswer{Node: "coord", OK: true, Compute: []scaler.Orphan{coordOrphan}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.admin(t, http.MethodGet, "/api/v1/scalers/orphans?node="+tt.node, nil)
			if resp.status != http.StatusOK {
				t.Fatalf("got status %d (%s), want 200", resp.status, resp.body)
			}
			var got nodeAnswer
			resp.decode(t, &got)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("answer differs (-want +got):\n%s", diff)
			}
			// compute is an array even when empty, error absent when ok.
			if !strings.Contains(string(resp.body), `"compute": [`) {
				t.Errorf("body %s: want a compute array", resp.body)
			}
			if tt.want.OK == strings.Contains(string(resp.body), `"error"`) {
				t.Errorf("body %s: want an error exactly when not ok", resp.body)
			}
		})
	}

	t.Run("node=all", func(t *testing.T) {
		var got struct {
			Nodes []nodeAnswer `json:"nodes"`
		}
		h.mustAdmin(t, http.MethodGet, "/api/v1/scalers/orphans?node=all", nil, http.StatusOK, &got)
		want := []nodeAnswer{
			{Node: "coord", OK: true, Compute: []scaler.Orphan{coordOrphan}},
			{Node: "worker-a", OK: true, Compute: []scaler.Orphan{workerOrphan}},
			{Node: "worker-b", OK: true},
			{Node: "worker-c", Error: "worker-c: peer channel closed before the answer"},
		}
		if diff := cmp.Diff(want, got.Nodes, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("nodes differ (-want +got):\n%s", diff)
		}
	})

	t.Run("unknown node", func(t *testing.T) {
		resp := h.admin(t, http.MethodGet, "/api/v1/scalers/orphans?node=ghost", nil)
		if resp.status != http.StatusNotFound {
			t.Fatalf("got status %d (%s), want 404", resp.status, resp.body)
		}
		if msg := resp.apiError(t).Error; !strings.Contains(msg, `"ghost"`) || !strings.Contains(msg, "kici-admin peers list") {
			t.Errorf("got error %q, want it to name the node and kici-admin peers list", msg)
		}
	})

	for _, node := range []string{"bad%2Fid", "a%20b", "w%C3%A9", strings.Repeat("n", 129)} {
		t.Run("bad node "+node[:min(len(node), 12)], func(t *testing.T) {
			resp := h.admin(t, http.MethodGet, "/api/v1/scalers/orphans?node="+node, nil)
			if resp.status != http.StatusBadRequest {
				t.Fatalf("got status %d (%s), want 400", resp.status, resp.body)
			}
			if msg := resp.apiError(t).Error; !strings.HasPrefix(msg, "node ") {
				t.Errorf("got error %q, want it to be about the node", msg)
			}
		})
	}

	// Only the valid, known nodes were asked, never the coordinator
	// itself (its own scalers answer) nor a malformed id.
	listed, _ := nodes.asked()
	want := []string{"ghost", "worker-a", "worker-a", "worker-b", "worker-b", "worker-c", "worker-c"}
	if !slices.Equal(listed, want) {
		t.Errorf("NodeOrphans calls: got %q, want %q", listed, want)
	}
}

// TestScalerOrphansNodeLimits: a coordinator without an auto-scaler of
// its own answers an empty list for itself (no 409), node=all asks at
// most 8 nodes at once, and without the node parameter nothing changed.
func TestScalerOrphansNodeLimits(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodeScalers{self: "coord", compute: map[string][]scaler.Orphan{}, delay: 30 * time.Millisecond}
	for i := range 20 {
		nodes.compute[fmt.Sprintf("worker-%02d", i)] = nil
	}
	h := nodeScalersServer(t, nil, nodes)

	var self nodeAnswer
	h.mustAdmin(t, http.MethodGet, "/api/v1/scalers/orphans?node=coord", nil, http.StatusOK, &self)
	if diff := cmp.Diff(nodeAnswer{Node: "coord", OK: true}, self, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("coordinator without scalers: answer differs (-want +got):\n%s", diff)
	}

	var all struct {
		Nodes []nodeAnswer `json:"nodes"`
	}
	h.mustAdmin(t, http.MethodGet, "/api/v1/scalers/orphans?node=all", nil, http.StatusOK, &all)
	if len(all.Nodes) != 21 || all.Nodes[0].Node != "coord" || all.Nodes[20].Node != "worker-19" {
		t.Errorf("node=all: got %+v, want coord then the 20 workers in order", all.Nodes)
	}
	for _, n := range all.Nodes {
		if !n.OK {
			t.Errorf("node=all: %s not ok: %s", n.Node, n.Error)
		}
	}
	nodes.mu.Lock()
	maxIn := nodes.maxIn
	nodes.mu.Unlock()
	if maxIn > 8 || maxIn < 2 {
		t.Errorf("node=all asked %d workers at once at most, want 2 to 8", maxIn)
	}

	// Without node, the local route is as it was: 409 without scalers.
	resp := h.admin(t, http.MethodGet, "/api/v1/scalers/orphans", nil)
	if resp.status != http.StatusConflict {
		t.Errorf("without node: got status %d (%s), want 409", resp.status, resp.body)
	}
	resp = h.admin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["x"], "node": "coord"}`)
	if resp.status != http.StatusConflict {
		t.Errorf("stop on the coordinator without scalers: got status %d (%s), want 409", resp.status, resp.body)
	}
}

// TestScalerOrphansNodeStandalone: an orchestrator that is not a
// coordinator refuses the node parameter with 400.
func TestScalerOrphansNodeStandalone(t *testing.T) {
	t.Parallel()
	local := &fakeLocalScalers{local: []scaler.Orphan{coordOrphan}}
	h := nodeScalersServer(t, local, nil)
	const want = "this orchestrator is not a cluster coordinator; --node is for clusters"
	resp := h.admin(t, http.MethodGet, "/api/v1/scalers/orphans?node=worker-a", nil)
	if msg := resp.apiError(t).Error; resp.status != http.StatusBadRequest || msg != want {
		t.Errorf("GET with node: got %d %q, want 400 %q", resp.status, msg, want)
	}
	resp = h.admin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["scaler-container-9f8e7d6c"], "node": "worker-a"}`)
	if msg := resp.apiError(t).Error; resp.status != http.StatusBadRequest || msg != want {
		t.Errorf("POST stop with node: got %d %q, want 400 %q", resp.status, msg, want)
	}
	var list orphanList
	h.mustAdmin(t, http.MethodGet, "/api/v1/scalers/orphans", nil, http.StatusOK, &list)
	if len(list.Compute) != 1 || list.Compute[0].ID != coordOrphan.ID {
		t.Errorf("GET without node: got %+v, want the local compute", list)
	}
	if stops := local.stopped(); len(stops) != 0 {
		t.Errorf("local StopOrphans called with %q, want never", stops)
	}
}

// TestScalerStopOrphansNode: POST /api/v1/scalers/orphans/stop with a
// node stops on that node and answers its outcomes, ok false when the
// node failed; node "all", an unknown node and bad ids are refused
// before any worker is asked; only scaler.manage may stop.
func TestScalerStopOrphansNode(t *testing.T) {
	t.Parallel()
	local, nodes := clusterFakes()
	h := nodeScalersServer(t, local, nodes)

	var got nodeAnswer
	h.mustAdmin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["scaler-container-9f8e7d6c"], "node": "worker-a"}`, http.StatusOK, &got)
	want := nodeAnswer{Node: "worker-a", OK: true, Outcomes: []scaler.StopOutcome{{ID: "scaler-container-9f8e7d6c", Outcome: scaler.OutcomeStopped}}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stop on worker-a: answer differs (-want +got):\n%s", diff)
	}

	resp := h.admin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["scaler-container-1"], "node": "worker-c"}`)
	if resp.status != http.StatusOK {
		t.Fatalf("stop on worker-c: got status %d (%s), want 200", resp.status, resp.body)
	}
	got = nodeAnswer{}
	resp.decode(t, &got)
	if diff := cmp.Diff(nodeAnswer{Node: "worker-c", Error: "worker-c: peer channel closed before the answer"}, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stop on worker-c: answer differs (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(resp.body), `"outcomes": []`) {
		t.Errorf("stop on worker-c: body %s, want an empty outcomes array", resp.body)
	}

	// The coordinator's own node stops with its own scalers.
	got = nodeAnswer{}
	h.mustAdmin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["scaler-bare-metal-c00d"], "node": "coord"}`, http.StatusOK, &got)
	if stops := local.stopped(); !got.OK || got.Node != "coord" || len(got.Outcomes) != 1 || len(stops) != 1 {
		t.Errorf("stop on coord: got %+v (local stops %q), want the local scalers' outcome", got, stops)
	}

	for _, tt := range []struct {
		name, body string
		status     int
		wantMsg    string
	}{
		{name: "all", body: `{"ids": ["scaler-container-9f8e7d6c"], "node": "all"}`, status: http.StatusBadRequest, wantMsg: "name one node"},
		{name: "unknown node", body: `{"ids": ["scaler-container-9f8e7d6c"], "node": "ghost"}`, status: http.StatusNotFound, wantMsg: `node "ghost" is neither`},
		{name: "bad node", body: `{"ids": ["scaler-container-9f8e7d6c"], "node": "../etc"}`, status: http.StatusBadRequest, wantMsg: `node "../etc"`},
		{name: "bad ids", body: `{"ids": [".."], "node": "worker-a"}`, status: http.StatusBadRequest, wantMsg: `bad ids: ids[0] ".." is not an id`},
		{name: "no ids", body: `{"node": "worker-a"}`, status: http.StatusBadRequest, wantMsg: "bad ids: want 1 to 100 ids, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.admin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", tt.body)
			if msg := resp.apiError(t).Error; resp.status != tt.status || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("got %d %q, want %d saying %q", resp.status, msg, tt.status, tt.wantMsg)
			}
		})
	}

	auditor := h.newAdminToken(t, "node auditor", auth.Auditor)
	resp = h.call(t, auditor.Token, http.MethodPost, "/api/v1/scalers/orphans/stop", `{"ids": ["scaler-container-9f8e7d6c"], "node": "worker-a"}`)
	if resp.status != http.StatusForbidden {
		t.Errorf("stop as %s: got status %d (%s), want 403", auth.Auditor, resp.status, resp.body)
	}
	resp = h.call(t, auditor.Token, http.MethodGet, "/api/v1/scalers/orphans?node=worker-a", "")
	if resp.status != http.StatusOK {
		t.Errorf("list as %s: got status %d (%s), want 200", auth.Auditor, resp.status, resp.body)
	}

	// Only the well-formed requests for another node reached
	// NodeStopOrphans (ghost too: only the cluster knows its nodes);
	// the coordinator's own stop went to its own scalers.
	_, stops := nodes.asked()
	wantStops := []fakeStop{
		{Node: "worker-a", IDs: []string{"scaler-container-9f8e7d6c"}},
		{Node: "worker-c", IDs: []string{"scaler-container-1"}},
		{Node: "ghost", IDs: []string{"scaler-container-9f8e7d6c"}},
	}
	if diff := cmp.Diff(wantStops, stops); diff != "" {
		t.Errorf("NodeStopOrphans calls differ (-want +got):\n%s", diff)
	}
}
