package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBoundAgents(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		labels := []string{"linux"}
		runID, ids := seedJobs(t, db, labels, labels, labels, labels, labels)
		for _, id := range ids {
			enqueue(t, db, runID, id, labels, nil)
		}
		claim := func(jobID, agentID string) {
			t.Helper()
			if _, ok, err := db.ClaimJob(ctx, testOwner, jobID, agentID, ackDeadline); err != nil || !ok {
				t.Fatalf("claim %s for %s: got (%t, %v), want the row", jobID, agentID, ok, err)
			}
		}
		// ids[0] stays pending: no agent.
		claim(ids[1], "agent-dispatched")
		claim(ids[2], "agent-recovering")
		if ok, err := db.SetRecovery(ctx, testOwner, ids[2], "agent-recovering", testNow.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("set recovery: got (%t, %v), want true", ok, err)
		}
		claim(ids[3], "agent-requeued")
		if _, ok, err := db.Requeue(ctx, RequeueRequest{JobID: ids[3], AgentID: "agent-requeued", Reason: "test"}); err != nil || !ok {
			t.Fatalf("requeue: got (%t, %v), want true", ok, err)
		}
		claim(ids[4], "agent-done")
		if _, err := db.Dequeue(ctx, ids[4]); err != nil {
			t.Fatalf("dequeue: %v", err)
		}

		got, err := db.BoundAgents(ctx)
		if err != nil {
			t.Fatalf("BoundAgents: got error %v, want nil", err)
		}
		want := map[string]bool{"agent-dispatched": true, "agent-recovering": true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("BoundAgents (-want +got):\n%s", diff)
		}
	})
}
