package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// featureBuilder records what AgentSupports said for each dispatch.
type featureBuilder struct {
	plainBuilder
	supports map[string]bool // job id → AgentSupports(archive_inline)
}

func (b *featureBuilder) BuildDispatch(ctx context.Context, run store.Run, job store.Job, attempt int) (*protocol.JobDispatch, error) {
	b.supports[job.ID] = AgentSupports(ctx, protocol.FeatureArchiveInline)
	return b.plainBuilder.BuildDispatch(ctx, run, job, attempt)
}

// TestAgentSupports: BuildDispatch learns from its ctx whether the agent
// it builds for announced a feature, so that an agent that did not (an
// older build) never gets what it would not understand.
func TestAgentSupports(t *testing.T) {
	t.Parallel()
	if AgentSupports(t.Context(), protocol.FeatureArchiveInline) {
		t.Errorf("AgentSupports outside a dispatch: got true, want false")
	}
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		b := &featureBuilder{supports: map[string]bool{}}
		f.disp.build = b
		for _, tc := range []struct {
			id       string
			features []string
			want     bool
		}{
			{"new-agent", []string{"from-the-future", protocol.FeatureArchiveInline}, true},
			{"old-agent", nil, false},
			{"other-features", []string{"from-the-future"}, false},
		} {
			jobID := f.push(t)
			a := NewAgent(&protocol.Register{AgentID: tc.id, Labels: []string{"linux"}, Concurrency: 1, Features: tc.features},
				&recordingConn{}, "static", time.Now())
			if _, err := f.disp.Register(t.Context(), a, nil, ""); err != nil {
				t.Fatalf("register %s: %v", tc.id, err)
			}
			if sent, err := f.disp.dispatchOne(t.Context(), a); err != nil || !sent {
				t.Fatalf("dispatch to %s: (%v, %v), want a job sent", tc.id, sent, err)
			}
			got, ok := b.supports[jobID]
			if !ok || got != tc.want {
				t.Errorf("agent %s with features %q: AgentSupports(%q) got %v (built %v), want %v",
					tc.id, tc.features, protocol.FeatureArchiveInline, got, ok, tc.want)
			}
		}
	})
}
