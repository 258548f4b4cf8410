package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTouchWorker: coordinators record a worker's heartbeats in the
// instance table (its row lives for the TTL from the last one); an id of
// an orchestrator cannot be taken by a worker; a standalone orchestrator
// does not start beside a live worker.
func TestTouchWorker(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			if _, err := db.RegisterInstance(ctx, Instance{ID: "coord", Role: InstanceCoordinator}, time.Minute, ""); err != nil {
				t.Fatal(err)
			}
			if err := db.TouchWorker(ctx, "worker-1", "10.0.0.5:4711", "edge-1", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			clock.advance(8 * time.Second)
			if err := db.TouchWorker(ctx, "worker-1", "10.0.0.5:4712", "edge-1", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			list, err := db.ListInstances(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var w Instance
			for _, i := range list {
				if i.ID == "worker-1" {
					w = i
				}
			}
			if w.Role != InstanceWorker || w.Addr != "10.0.0.5:4712" || w.Hostname != "edge-1" ||
				!w.HeartbeatAt.Equal(clock.now()) || !w.ExpiresAt.Equal(clock.now().Add(10*time.Second)) || w.StartedAt.Sub(testNow) > time.Millisecond {
				t.Errorf("worker row %+v: want the last heartbeat's address and times, started at the first", w)
			}
			if err := db.TouchWorker(ctx, "coord", "x", "x", time.Second); !errors.Is(err, ErrConflict) {
				t.Errorf("worker posing as a coordinator: %v, want ErrConflict", err)
			}
			var conflict *InstanceConflictError
			if _, err := db.RegisterInstance(ctx, Instance{ID: "solo", Role: InstanceStandalone}, time.Minute, ""); !errors.As(err, &conflict) {
				t.Errorf("standalone beside a live cluster: %v, want a conflict", err)
			}
			// Silent past its TTL, it is gone in a while and then forgettable.
			clock.advance(time.Minute)
			if err := db.ForgetInstance(ctx, "worker-1", 30*time.Second); err != nil {
				t.Errorf("forget a worker silent for a minute: %v", err)
			}
		})
	}
}

// TestForgetWorkerWhoseAgentsHoldJobs: a worker silent long enough is
// still not forgotten while a scaler agent its heartbeat listed holds a
// job in the dispatch queue (it may come back through the worker); once
// the job leaves the queue, it is.
func TestForgetWorkerWhoseAgentsHoldJobs(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			runID, ids := seedJobs(t, db, []string{"edge"})
			enqueue(t, db, runID, ids[0], []string{"edge"}, nil)
			if _, ok, err := db.ClaimJob(ctx, testOwner, ids[0], "scaler-bare-metal-1", ackDeadline); err != nil || !ok {
				t.Fatalf("claim: (%t, %v)", ok, err)
			}
			if err := db.TouchWorker(ctx, "worker-9", "10.0.0.9:1", "edge-9", time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := db.RecordWorkerScalerAgents(ctx, "worker-9", []string{"scaler-bare-metal-1", "scaler-bare-metal-2", "not-a-scaler-id"}); err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Minute)
			err := db.ForgetInstance(ctx, "worker-9", 0)
			if !errors.Is(err, ErrPeerHoldsJobs) || !strings.Contains(err.Error(), "scaler-bare-metal-1") || strings.Contains(err.Error(), "scaler-bare-metal-2") {
				t.Fatalf("forget a worker whose agent holds a job: got %v, want ErrPeerHoldsJobs naming scaler-bare-metal-1 only", err)
			}
			if _, err := db.Dequeue(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			if err := db.ForgetInstance(ctx, "worker-9", 0); err != nil {
				t.Fatalf("forget once the job left the queue: %v", err)
			}
		})
	}
}

// TestRevokeNode: a revoked worker is known as revoked and leaves the
// instance table; revoking again changes nothing; an orchestrator's id
// cannot be revoked as a worker's.
func TestRevokeNode(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		if _, err := db.RegisterInstance(ctx, Instance{ID: "coord-r", Role: InstanceCoordinator}, time.Minute, ""); err != nil {
			t.Fatal(err)
		}
		if err := db.TouchWorker(ctx, "worker-r", "10.0.0.1:1", "edge", time.Minute); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.NodeRevoked(ctx, "worker-r"); err != nil || ok {
			t.Fatalf("before: revoked (%t, %v), want false", ok, err)
		}
		for range 2 {
			if err := db.RevokeNode(ctx, "worker-r", "token:ops"); err != nil {
				t.Fatalf("revoke: %v", err)
			}
		}
		if ok, err := db.NodeRevoked(ctx, "worker-r"); err != nil || !ok {
			t.Fatalf("after: revoked (%t, %v), want true", ok, err)
		}
		list, err := db.ListInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range list {
			if i.ID == "worker-r" {
				t.Errorf("revoked worker still listed: %+v", i)
			}
		}
		if err := db.RevokeNode(ctx, "coord-r", "token:ops"); !errors.Is(err, ErrConflict) {
			t.Errorf("revoke a coordinator: got %v, want ErrConflict", err)
		}
		if ok, _ := db.NodeRevoked(ctx, "coord-r"); ok {
			t.Error("the coordinator was recorded as revoked")
		}
	})
}
