package container

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/kici-dev/kici/internal/scaler"
)

// agentLabels are the labels a backend of scalerName on instance gives
// the container of agentID.
func agentLabels(instance, scalerName, agentID string) map[string]string {
	return map[string]string{LabelManaged: "true", LabelInstance: instance, LabelScaler: scalerName, LabelAgentID: agentID}
}

// createLabelled makes a container of the test image that sleeps for a
// minute, with the given labels, started when run; it is removed when the
// test ends.
func createLabelled(t *testing.T, agentID string, labels map[string]string, run bool) string {
	t.Helper()
	cli := testEngine(t)
	resp, err := cli.ContainerCreate(t.Context(), &container.Config{
		Image:      testImage(t),
		Entrypoint: []string{"/bin/busybox", "sleep", "60"},
		Labels:     labels,
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("create container for %s: %v", agentID, err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
	})
	if run {
		if err := cli.ContainerStart(t.Context(), resp.ID, container.StartOptions{}); err != nil {
			t.Fatalf("start container for %s: %v", agentID, err)
		}
	}
	return resp.ID
}

// assertRunning fails unless the container exists and runs.
func assertRunning(t *testing.T, what, ref string) {
	t.Helper()
	info, err := testEngine(t).ContainerInspect(context.WithoutCancel(t.Context()), ref)
	switch {
	case err != nil:
		t.Errorf("%s container %s: %v, want it untouched and running", what, shortID(ref), err)
	case !info.State.Running:
		t.Errorf("%s container %s is %s, want it still running", what, shortID(ref), info.State.Status)
	}
}

func TestStopOrphanStopsOnlyTheNamedContainer(t *testing.T) {
	t.Parallel()
	instance := newInstance()
	b := newTestBackend(t, instance)
	never := func(string) bool { return false }

	// Two untracked containers of this scaler and instance; the same agent
	// id on another instance and on another scaler.
	named := newAgentID()
	namedRef := createLabelled(t, named, agentLabels(instance, "ct-test", named), true)
	second := newAgentID()
	secondRef := createLabelled(t, second, agentLabels(instance, "ct-test", second), true)
	foreign := newAgentID()
	otherInstance := createLabelled(t, foreign, agentLabels(newInstance(), "ct-test", foreign), true)
	otherScaler := createLabelled(t, foreign, agentLabels(instance, "another-scaler", foreign), true)

	outcome, err := b.StopOrphan(t.Context(), named, never)
	if outcome != scaler.OutcomeStopped || err != nil {
		t.Fatalf("StopOrphan(%s): got %s, %v; want %s, nil", named, outcome, err, scaler.OutcomeStopped)
	}
	assertGone(t, namedRef)
	assertRunning(t, "the second untracked", secondRef)

	outcome, err = b.StopOrphan(t.Context(), foreign, never)
	if outcome != scaler.OutcomeNotFound {
		t.Errorf("StopOrphan of another instance's and scaler's agent: got %s, %v; want %s", outcome, err, scaler.OutcomeNotFound)
	}
	assertRunning(t, "the other instance's", otherInstance)
	assertRunning(t, "the other scaler's", otherScaler)

	// Stopped already: nothing left to find.
	if outcome, err := b.StopOrphan(t.Context(), named, never); outcome != scaler.OutcomeNotFound {
		t.Errorf("StopOrphan of a removed container: got %s, %v; want %s", outcome, err, scaler.OutcomeNotFound)
	}
	list, err := b.List(t.Context())
	if err != nil || len(list) != 1 || list[0].AgentID != second {
		t.Errorf("List = %+v, %v; want the second container only", list, err)
	}
}

func TestStopOrphanRefuses(t *testing.T) {
	t.Parallel()
	instance := newInstance()
	b := newTestBackend(t, instance)
	orch := newFakeOrchestrator(t)

	stoppedID := newAgentID()
	stoppedRef := createLabelled(t, stoppedID, agentLabels(instance, "ct-test", stoppedID), false)
	heldID := newAgentID()
	heldRef := createLabelled(t, heldID, agentLabels(instance, "ct-test", heldID), true)
	trackedID := newAgentID()
	h, err := b.Spawn(t.Context(), spawnRequest(t, trackedID, orch.url, newEventLog()))
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}

	tests := []struct {
		name      string
		id        string
		isTracked func(string) bool
		want      string
		wantErr   string // a piece of the error; "" for none
		ref       string // the container, which must be left as it was
		running   bool
	}{
		{name: "not running", id: stoppedID, isTracked: func(string) bool { return false },
			want: scaler.OutcomeNotLive, wantErr: "the start-up reaper removes it", ref: stoppedRef},
		{name: "tracked by the caller at the last check", id: heldID, isTracked: func(id string) bool { return id == heldID },
			want: scaler.OutcomeTracked, ref: heldRef, running: true},
		{name: "tracked by the backend", id: trackedID, isTracked: func(string) bool { return false },
			want: scaler.OutcomeTracked, wantErr: "tracks agent", ref: h.Ref, running: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.StopOrphan(t.Context(), tt.id, tt.isTracked)
			if got != tt.want {
				t.Errorf("StopOrphan: got %s (%v), want %s", got, err, tt.want)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("StopOrphan error: got %v, want one holding %q", err, tt.wantErr)
			}
			if tt.running {
				assertRunning(t, tt.name, tt.ref)
			} else if _, err := testEngine(t).ContainerInspect(t.Context(), tt.ref); err != nil {
				t.Errorf("container %s: %v, want it left in place", shortID(tt.ref), err)
			}
		})
	}
}
