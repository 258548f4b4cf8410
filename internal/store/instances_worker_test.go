package store

import (
	"errors"
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
