package scaler

import (
	"context"
	"slices"
	"testing"
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
