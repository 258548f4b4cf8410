package scaler

import (
	"slices"
	"testing"
	"time"
)

// TestOffersDescribeWhatRequestScaleMatches: an offer covers exactly the
// jobs RequestScale would spawn for (auto labels, gates, exclusions), and
// its free capacity falls as agents are spawned.
func TestOffersDescribeWhatRequestScaleMatches(t *testing.T) {
	t.Parallel()
	m, _, _ := newManager(t, []ScalerConfig{
		{Name: "bm", Type: "bare-metal", MaxAgents: 2, LabelSets: []LabelSet{{Labels: []string{"linux", "edge"}}}},
		{Name: "gated", Type: "container", MaxAgents: 3, MandatoryLabels: []string{"secure"}, LabelSets: []LabelSet{{Labels: []string{"linux", "secure"}}}},
	}, map[string]Backend{"bm": &recordingBackend{typ: "bare-metal"}, "gated": &recordingBackend{typ: "container"}})
	offers := m.Offers()
	if len(offers) != 2 || offers[0].Scaler != "bm" || offers[0].Free != 2 || offers[1].Free != 3 {
		t.Fatalf("offers: got %+v, want bm (2 free) then gated (3 free)", offers)
	}
	for _, tt := range []struct {
		labels, exclude []string
		bm, gated       bool
	}{
		{labels: []string{"linux"}, bm: true},
		{labels: []string{"edge", "kici:scaler:bm"}, bm: true},
		{labels: []string{"linux"}, exclude: []string{"edge"}},
		{labels: []string{"linux", "secure"}, gated: true},
		{labels: []string{"arm"}},
	} {
		if got := offers[0].Covers(tt.labels, tt.exclude); got != tt.bm {
			t.Errorf("bm covers %v minus %v: got %t, want %t", tt.labels, tt.exclude, got, tt.bm)
		}
		if got := offers[1].Covers(tt.labels, tt.exclude); got != tt.gated {
			t.Errorf("gated covers %v minus %v: got %t, want %t", tt.labels, tt.exclude, got, tt.gated)
		}
		res := m.RequestScale(t.Context(), ScaleRequest{JobID: "probe", Labels: tt.labels, Exclude: tt.exclude})
		if matched := res.Action != ActionNoMatch; matched != (tt.bm || tt.gated) {
			t.Errorf("RequestScale %v minus %v: %s, but the offers say covered=%t", tt.labels, tt.exclude, res.Action, tt.bm || tt.gated)
		}
		m.StopAll(t.Context(), "between probes")
	}
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j1", Labels: []string{"edge"}})
	if res.Action != ActionSpawning {
		t.Fatalf("spawn: %+v", res)
	}
	if got := m.Offers()[0].Free; got != 1 {
		t.Errorf("free after one spawn: got %d, want 1", got)
	}
	if ids := m.AgentIDs(); !slices.Equal(ids, []string{res.AgentID}) {
		t.Errorf("agent ids: got %v, want [%s]", ids, res.AgentID)
	}
}

// TestStopAllDestroysEveryAgentAndFreesTheCapacity: registered and
// spawning agents alike are destroyed and forgotten; the scalers go on.
func TestStopAllDestroysEveryAgentAndFreesTheCapacity(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{typ: "bare-metal"}
	m, _, _ := newManager(t, []ScalerConfig{{Name: "bm", Type: "bare-metal", MaxAgents: 2, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"bm": b})
	a1 := m.RequestScale(t.Context(), ScaleRequest{JobID: "j1", Labels: []string{"linux"}}).AgentID
	a2 := m.RequestScale(t.Context(), ScaleRequest{JobID: "j2", Labels: []string{"linux"}}).AgentID
	if _, err := m.OnAgentRegistered(a1, m.agentToken(a1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.spawns() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // both spawns must have reached the backend
	}
	stopped := m.StopAll(t.Context(), "test")
	want := []string{a1, a2}
	slices.Sort(want)
	if !slices.Equal(stopped, want) {
		t.Fatalf("stopped %v, want %v", stopped, want)
	}
	if ids := m.AgentIDs(); len(ids) != 0 {
		t.Errorf("agents left after StopAll: %v", ids)
	}
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j3", Labels: []string{"linux"}}); res.Action != ActionSpawning {
		t.Errorf("after StopAll: got %s (%s), want a new spawn", res.Action, res.Reason)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range want {
		if !slices.Contains(b.destroys, id) {
			t.Errorf("agent %s not destroyed (destroys %v)", id, b.destroys)
		}
	}
}
