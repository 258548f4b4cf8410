package runstate

import (
	"slices"
	"testing"

	"github.com/kici-dev/kici/internal/store"
)

func TestJobTransitions(t *testing.T) {
	t.Parallel()
	all := []store.JobStatus{store.JobWaiting, store.JobQueued, store.JobDispatched, store.JobRunning,
		store.JobSuccess, store.JobFailure, store.JobCancelled, store.JobSkipped}
	tests := []struct {
		name     string
		from, to store.JobStatus
		legal    bool
	}{
		{name: "queue a ready job", from: store.JobWaiting, to: store.JobQueued, legal: true},
		{name: "dispatch", from: store.JobQueued, to: store.JobDispatched, legal: true},
		{name: "requeue after ack timeout", from: store.JobDispatched, to: store.JobQueued, legal: true},
		{name: "start", from: store.JobDispatched, to: store.JobRunning, legal: true},
		{name: "finish", from: store.JobRunning, to: store.JobSuccess, legal: true},
		{name: "queue timeout", from: store.JobQueued, to: store.JobFailure, legal: true},
		{name: "success never runs again", from: store.JobSuccess, to: store.JobRunning},
		{name: "running never goes back to queue", from: store.JobRunning, to: store.JobQueued},
		{name: "waiting cannot start", from: store.JobWaiting, to: store.JobRunning},
		{name: "running cannot be skipped", from: store.JobRunning, to: store.JobSkipped},
		{name: "queued cannot succeed without an agent", from: store.JobQueued, to: store.JobSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := slices.Contains(JobFrom(tt.to), tt.from); got != tt.legal {
				t.Errorf("%s → %s legal: got %v, want %v", tt.from, tt.to, got, tt.legal)
			}
		})
	}
	// No terminal status may ever be left.
	for _, to := range all {
		for _, from := range JobFrom(to) {
			if JobTerminal(from) {
				t.Errorf("terminal %s may move to %s", from, to)
			}
		}
	}
}

func TestRunAndStepTerminalsAreFinal(t *testing.T) {
	t.Parallel()
	for _, to := range []store.RunStatus{store.RunAwaitingApproval, store.RunPending, store.RunRunning, store.RunSuccess, store.RunFailure, store.RunCancelled} {
		for _, from := range RunFrom(to) {
			if RunTerminal(from) {
				t.Errorf("terminal run status %s may move to %s", from, to)
			}
		}
	}
	for _, to := range []store.StepStatus{store.StepPending, store.StepRunning, store.StepSuccess, store.StepFailure, store.StepSkipped, store.StepCancelled} {
		for _, from := range StepFrom(to) {
			if StepTerminal(from) {
				t.Errorf("terminal step status %s may move to %s", from, to)
			}
		}
	}
	if slices.Contains(RunFrom(store.RunRunning), store.RunSuccess) {
		t.Errorf("success → running allowed")
	}
}

func TestRunTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to store.RunStatus
		legal    bool
	}{
		{name: "approve", from: store.RunAwaitingApproval, to: store.RunPending, legal: true},
		{name: "approve while a job starts", from: store.RunAwaitingApproval, to: store.RunRunning, legal: true},
		{name: "cancel an awaiting run", from: store.RunAwaitingApproval, to: store.RunCancelled, legal: true},
		{name: "an awaiting run cannot succeed", from: store.RunAwaitingApproval, to: store.RunSuccess},
		{name: "an awaiting run cannot fail", from: store.RunAwaitingApproval, to: store.RunFailure},
		{name: "a started run never awaits approval again", from: store.RunPending, to: store.RunAwaitingApproval},
		{name: "a running run never awaits approval again", from: store.RunRunning, to: store.RunAwaitingApproval},
		{name: "start", from: store.RunPending, to: store.RunRunning, legal: true},
		{name: "a cancelled run is not approved", from: store.RunCancelled, to: store.RunPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := slices.Contains(RunFrom(tt.to), tt.from); got != tt.legal {
				t.Errorf("%s → %s legal: got %v, want %v", tt.from, tt.to, got, tt.legal)
			}
		})
	}
	if RunTerminal(store.RunAwaitingApproval) {
		t.Errorf("awaiting_approval is terminal, want not")
	}
}
