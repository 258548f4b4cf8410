package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
)

// TestQueueWhy words the waits of pending rows: drained agents are named
// whether or not the scaler was asked, and a reason is never said twice.
func TestQueueWhy(t *testing.T) {
	t.Parallel()
	const refusal = `spawn refused by the host: agent binary "/opt/kici-agent": no such file or directory`
	deferral := fmt.Sprintf("scaler broken deferred until 2026-11-30T08:55:34Z after %q", refusal)
	drained := []agentSnapshot{
		{id: "host-1", labels: []string{"linux", "maint"}, draining: true},
		{id: "host-2", labels: []string{"linux"}},
	}
	tests := []struct {
		name   string
		agents []agentSnapshot
		scale  *scaler.ScaleResult
		entry  store.QueueEntry
		want   string
	}{
		{name: "drained, no scaler", agents: drained, entry: store.QueueEntry{Labels: []string{"maint"}},
			want: "waiting for a free agent: every agent with labels [maint] is drained (host-1; kici-admin agents undrain ID)"},
		{name: "drained, no scaler matches", agents: drained,
			scale: &scaler.ScaleResult{Action: scaler.ActionNoMatch, Reason: "no label set of a scaler covers [maint]"},
			entry: store.QueueEntry{Labels: []string{"maint"}},
			want:  "no scaler matches its labels (no label set of a scaler covers [maint]); drained: host-1 (kici-admin agents undrain ID)"},
		{name: "drained, scaler at capacity", agents: drained,
			scale: &scaler.ScaleResult{Action: scaler.ActionAtCapacity, Reason: "scaler pool is at maxAgents 4"},
			entry: store.QueueEntry{Labels: []string{"linux", "maint"}},
			want:  "waiting for capacity: scaler pool is at maxAgents 4; drained: host-1 (kici-admin agents undrain ID)"},
		{name: "deferred scaler, never spawned for", scale: &scaler.ScaleResult{Action: scaler.ActionSkipped, Scaler: "broken", Reason: deferral},
			entry: store.QueueEntry{Labels: []string{"gpu"}},
			want:  deferral},
		{name: "deferred scaler after this job's own failure", scale: &scaler.ScaleResult{Action: scaler.ActionSkipped, Scaler: "broken", Reason: deferral},
			entry: store.QueueEntry{Labels: []string{"gpu"}, LastProvisioningError: refusal},
			want:  deferral},
		{name: "failed spawn, scaler no longer deferred", scale: &scaler.ScaleResult{Action: scaler.ActionAtCapacity, Reason: "scaler pool is at maxAgents 1"},
			entry: store.QueueEntry{Labels: []string{"gpu"}, LastProvisioningError: refusal},
			want:  "waiting for capacity: scaler pool is at maxAgents 1; last provisioning error: " + refusal},
		{name: "no agent, requeued", entry: store.QueueEntry{Labels: []string{"gpu"}, DispatchAttempts: 2, LastRequeueReason: "agent lost"},
			want: "no connected agent has all of the labels [gpu]; requeued 2 time(s), last because agent lost"},
		{name: "no agent, a retry", entry: store.QueueEntry{Labels: []string{"gpu"}, LastRequeueReason: "attempt 1 ended: agent lost (x); retrying as attempt 2 of 2"},
			want: "no connected agent has all of the labels [gpu]; attempt 1 ended: agent lost (x); retrying as attempt 2 of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.entry.JobID, tt.entry.Status = "j-1", store.QueuePending
			v := &queueView{agents: tt.agents, byLabels: map[string]agentsWhy{}, scale: func(id string) (dispatch.ScaleStatus, bool) {
				if tt.scale == nil || id != "j-1" {
					return dispatch.ScaleStatus{}, false
				}
				return dispatch.ScaleStatus{ScaleResult: *tt.scale, At: time.Unix(0, 0)}, true
			}}
			if got := v.why(tt.entry); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
