package scaler

import (
	"context"
	"slices"
	"testing"
	"time"
)

// listingBackend lists fixed compute.
type listingBackend struct {
	recordingBackend
	compute []Compute
}

func (b *listingBackend) Capabilities() Capabilities { return Capabilities{ListsCompute: true} }
func (b *listingBackend) List(ctx context.Context) ([]Compute, error) {
	return b.compute, nil
}

func TestOrphansSayWhenTheBackendTracksCompute(t *testing.T) {
	t.Parallel()
	b := &listingBackend{recordingBackend: recordingBackend{typ: "firecracker"}, compute: []Compute{
		{AgentID: "scaler-firecracker-00000001", Tracked: true},
		{AgentID: "scaler-firecracker-00000002"},
	}}
	m, _, _ := newManager(t, []ScalerConfig{{Name: "fc", Type: "firecracker", MaxAgents: 2, LabelSets: []LabelSet{{Labels: []string{"fc"}}}}},
		map[string]Backend{"fc": b})
	got, err := m.Orphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Status != ComputeTracked || !slices.Equal(got[0].TrackedBy, []string{TrackedByBackend}) ||
		got[1].Status != ComputeOrphaned || len(got[1].TrackedBy) != 0 {
		t.Errorf("got %+v, want the first tracked by the backend and the second orphaned", got)
	}
}

// reapingBackend records the sweeps it is asked for.
type reapingBackend struct {
	recordingBackend
	keeps chan []string
}

func (b *reapingBackend) ReapLeftovers(ctx context.Context, keep []string) ([]string, error) {
	b.keeps <- slices.Clone(keep)
	return nil, nil
}

func TestRunSweepsLeftoversSparingTrackedAgents(t *testing.T) {
	t.Parallel()
	b := &reapingBackend{recordingBackend: recordingBackend{typ: "container"}, keeps: make(chan []string, 10)}
	m, sink, _ := newManager(t, []ScalerConfig{{Name: "c", Type: "container", MaxAgents: 2, LabelSets: []LabelSet{{Labels: []string{"linux"}}}}},
		map[string]Backend{"c": b})
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j", RunID: "r", Labels: []string{"linux"}})
	if res.Action != ActionSpawning {
		t.Fatalf("got %s, want spawning", res.Action)
	}
	_ = sink
	m.mu.Lock()
	m.cfg.SweepInterval = 10 * time.Millisecond
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = m.Run(ctx) }()
	select {
	case keep := <-b.keeps:
		if !slices.Equal(keep, []string{res.AgentID}) {
			t.Fatalf("sweep spared %v, want the spawning agent %s", keep, res.AgentID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run never swept")
	}
}
