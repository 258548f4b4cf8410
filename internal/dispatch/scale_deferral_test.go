package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

// deferredScaler answers every request as a deferred scaler does.
type deferredScaler struct{ reason string }

func (s deferredScaler) RequestScale(context.Context, scaler.ScaleRequest) scaler.ScaleResult {
	return scaler.ScaleResult{Action: scaler.ActionSkipped, Scaler: "broken", Reason: s.reason}
}

func (deferredScaler) OnAgentRegistered(string, string) (scaler.Registration, error) {
	return scaler.Registration{}, nil
}
func (deferredScaler) OnAgentDisconnected(string) {}
func (deferredScaler) OnAgentBusy(string)         {}

// TestDeferralIsNotAProvisioningError offers a queued job to a deferred
// scaler: the queue shows the deferral, but the job's provisioning error
// stays empty, since nothing was ever spawned for it.
func TestDeferralIsNotAProvisioningError(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		job := workflow.Job{Name: "build", Base: "build", RunsOn: []string{"gpu"}, Steps: []workflow.Step{{Name: "s", Run: "true"}}}
		run, err := db.CreateRun(ctx, store.NewRun{Source: "repo", Workflow: "ci", WorkflowFile: ".kici/workflows/ci.yml",
			Event: []byte(`{"kind":"push"}`), EventKind: "push", Ref: "refs/heads/main", SHA: strings.Repeat("a", 40),
			Plan: workflow.Workflow{Name: "ci", Jobs: []workflow.Job{job}},
			Jobs: []store.NewJob{{Spec: job, Status: store.JobQueued, Enqueue: true}}})
		if err != nil {
			t.Fatal(err)
		}
		jobID := run.Jobs[0].ID
		d := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, nil, nil, nil, Config{})
		const reason = `scaler broken deferred until 2026-11-30T08:55:34Z after "spawn refused"`
		d.SetScaler(deferredScaler{reason: reason})
		d.scaleQueued(ctx)
		d.scaleQueued(ctx) // a second sweep changes nothing

		st, ok := d.ScaleStatusOf(jobID)
		if !ok || st.Why() != reason {
			t.Errorf("scale status: got %q (%t), want %q", st.Why(), ok, reason)
		}
		e, err := db.GetQueueEntry(ctx, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if e.LastProvisioningError != "" {
			t.Errorf("got provisioning error %q, want none: no spawn was attempted for the job", e.LastProvisioningError)
		}
	})
}
