package store

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testClock is a store clock the test moves by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(testNow.UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// twoHandles opens two handles on one fresh database of engine e, both on
// clock, as two orchestrator processes would.
func twoHandles(t *testing.T, e engine, clock *testClock) (*DB, *DB) {
	t.Helper()
	cfg := e.config(t)
	cfg.Now = clock.now
	a := openTestDB(t, cfg)
	if err := a.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return a, openTestDB(t, cfg)
}

func TestRegisterInstance(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	a := Instance{ID: "a", Role: InstanceStandalone, Hostname: "host-a", PID: 1234, Addr: ":4000"}
	b := Instance{ID: "b", Role: InstanceStandalone, Hostname: "host-b", PID: 99, Addr: ":4001"}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name string
				// between runs after a registers and before b does.
				between  func(t *testing.T, dbA *DB, clock *testClock)
				replaces string
				// wantLive is true when b must be refused because a is live.
				wantLive bool
			}{
				{name: "live instance refuses a second", between: func(*testing.T, *DB, *testClock) {}, wantLive: true},
				{name: "heartbeat keeps it live", wantLive: true, between: func(t *testing.T, dbA *DB, clock *testClock) {
					clock.advance(ttl - time.Second)
					if err := dbA.HeartbeatInstance(t.Context(), "a", ttl); err != nil {
						t.Fatal(err)
					}
					clock.advance(ttl - time.Second)
				}},
				{name: "expired instance lets a second start", between: func(_ *testing.T, _ *DB, clock *testClock) {
					clock.advance(ttl)
				}},
				{name: "deregistered instance lets a second start", between: func(t *testing.T, dbA *DB, _ *testClock) {
					if err := dbA.DeregisterInstance(t.Context(), "a"); err != nil {
						t.Fatal(err)
					}
				}},
				{name: "instance known dead is replaced at once", replaces: "a", between: func(*testing.T, *DB, *testClock) {}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					clock := newTestClock()
					dbA, dbB := twoHandles(t, e, clock)
					ctx := t.Context()
					gotA, err := dbA.RegisterInstance(ctx, a, ttl, "")
					if err != nil {
						t.Fatalf("register a: %v", err)
					}
					if !gotA.StartedAt.Equal(testNow) || !gotA.ExpiresAt.Equal(testNow.Add(ttl)) {
						t.Errorf("a: got started %v, expires %v; want %v and %v", gotA.StartedAt, gotA.ExpiresAt, testNow, testNow.Add(ttl))
					}
					tt.between(t, dbA, clock)
					_, err = dbB.RegisterInstance(ctx, b, ttl, tt.replaces)
					var conflict *InstanceConflictError
					if got := errors.As(err, &conflict); got != tt.wantLive {
						t.Fatalf("register b: got %v, want conflict %v", err, tt.wantLive)
					}
					list, lerr := dbB.ListInstances(ctx)
					if lerr != nil {
						t.Fatal(lerr)
					}
					var ids []string
					for _, i := range list {
						ids = append(ids, i.ID)
					}
					if tt.wantLive {
						if conflict.Live.ID != "a" || conflict.Live.PID != 1234 || conflict.Live.Hostname != "host-a" {
							t.Errorf("conflict names %+v, want instance a", conflict.Live)
						}
						for _, part := range []string{"pid 1234", "host host-a", "listening on :4000", "since 2026-05-01T12:00:00Z"} {
							if !strings.Contains(err.Error(), part) {
								t.Errorf("error %q does not say %q", err, part)
							}
						}
						if diff := cmp.Diff([]string{"a"}, ids); diff != "" {
							t.Errorf("instances after the refusal (-want +got):\n%s", diff)
						}
						return
					}
					if diff := cmp.Diff([]string{"b"}, ids); diff != "" {
						t.Errorf("instances after b registered (-want +got):\n%s", diff)
					}
					if err := dbA.HeartbeatInstance(ctx, "a", ttl); !errors.Is(err, ErrNotFound) {
						t.Errorf("heartbeat of the removed a: got %v, want ErrNotFound", err)
					}
				})
			}
		})
	}
}

// Two instances registering at the same moment: exactly one wins.
func TestRegisterInstanceRace(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			dbA, dbB := twoHandles(t, e, clock)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, db := range []*DB{dbA, dbB} {
				wg.Go(func() {
					_, errs[i] = db.RegisterInstance(t.Context(), Instance{ID: string(rune('a' + i)), Role: InstanceStandalone}, time.Minute, "")
				})
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				var conflict *InstanceConflictError
				switch {
				case err == nil:
					won++
				case !errors.As(err, &conflict):
					t.Errorf("register: got %v, want nil or a conflict", err)
				}
			}
			if won != 1 {
				t.Errorf("got %d instances registered, want 1 (errors %v)", won, errs)
			}
		})
	}
}

// Coordinators share a database with each other, never with a standalone
// instance, whichever starts first.
func TestRegisterCoordinators(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dbA, dbB := twoHandles(t, e, newTestClock())
			ctx := t.Context()
			for _, id := range []string{"c1", "c2"} {
				if _, err := dbA.RegisterInstance(ctx, Instance{ID: id, Role: InstanceCoordinator}, time.Minute, ""); err != nil {
					t.Fatalf("coordinator %s beside coordinators: %v", id, err)
				}
			}
			var conflict *InstanceConflictError
			if _, err := dbB.RegisterInstance(ctx, Instance{ID: "s", Role: InstanceStandalone, PID: 7}, time.Minute, ""); !errors.As(err, &conflict) {
				t.Fatalf("standalone beside coordinators: got %v, want an InstanceConflictError", err)
			}
			for _, id := range []string{"c1", "c2"} {
				if err := dbA.DeregisterInstance(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := dbB.RegisterInstance(ctx, Instance{ID: "s", Role: InstanceStandalone, PublicURL: "https://ci.example.com"}, time.Minute, ""); err != nil {
				t.Fatalf("standalone alone: %v", err)
			}
			if _, err := dbA.RegisterInstance(ctx, Instance{ID: "c3", Role: InstanceCoordinator}, time.Minute, ""); !errors.As(err, &conflict) || conflict.Live.ID != "s" {
				t.Fatalf("coordinator beside a standalone: got %v, want an InstanceConflictError naming s", err)
			}
			live, err := dbA.ListInstances(ctx)
			if err != nil || len(live) != 1 || live[0].PublicURL != "https://ci.example.com" {
				t.Fatalf("live instances: got (%+v, %v), want the standalone one only, with its public URL", live, err)
			}
		})
	}
}

// TestForgetInstance: a live instance, or one seen within the quiet
// time, is refused; a departed one goes; an unknown one is not found.
func TestForgetInstance(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			ctx := t.Context()
			if _, err := db.RegisterInstance(ctx, Instance{ID: "gone", Role: InstanceCoordinator}, 10*time.Second, ""); err != nil {
				t.Fatal(err)
			}
			if err := db.ForgetInstance(ctx, "gone", 30*time.Second); !errors.Is(err, ErrPeerRecent) {
				t.Fatalf("forget a live instance: %v, want ErrPeerRecent", err)
			}
			clock.advance(20 * time.Second) // expired, but seen 20 s ago
			if err := db.ForgetInstance(ctx, "gone", 30*time.Second); !errors.Is(err, ErrPeerRecent) || !strings.Contains(err.Error(), "20s ago") {
				t.Fatalf("forget an instance seen 20 s ago: %v, want ErrPeerRecent saying when", err)
			}
			clock.advance(11 * time.Second)
			if err := db.ForgetInstance(ctx, "gone", 30*time.Second); err != nil {
				t.Fatalf("forget a departed instance: %v", err)
			}
			if list, _ := db.ListInstances(ctx); len(list) != 0 {
				t.Fatalf("instances after the forget: %+v", list)
			}
			if err := db.ForgetInstance(ctx, "gone", 30*time.Second); !errors.Is(err, ErrNotFound) {
				t.Fatalf("forget it again: %v, want ErrNotFound", err)
			}
		})
	}
}
