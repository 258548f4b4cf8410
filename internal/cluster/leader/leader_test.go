package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

// Short times for the tests; a dead leader is replaced within TTL+Renew.
const (
	testTTL   = 1500 * time.Millisecond
	testRenew = 100 * time.Millisecond
)

// openDB opens a fresh, migrated PostgreSQL schema (coordinators need
// PostgreSQL; skipped without one, failed under
// KICI_TEST_REQUIRE_SERVICES=1).
func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DatabaseURL: testsvc.PostgresURL(t), MaxConns: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// cuttable is the store seen through a network that the test can cut.
type cuttable struct {
	*store.DB
	cut atomic.Bool
	// slow, when set, delays every lease attempt that much (a loaded
	// database).
	slow atomic.Int64
}

var errCut = errors.New("test: the database is unreachable")

func (c *cuttable) TryLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if c.cut.Load() {
		return store.Lease{}, errCut
	}
	if d := time.Duration(c.slow.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return store.Lease{}, ctx.Err()
		}
	}
	return c.DB.TryLease(ctx, name, holder, ttl)
}

func (c *cuttable) ReleaseLease(ctx context.Context, name, holder string, term int64) error {
	if c.cut.Load() {
		return errCut
	}
	return c.DB.ReleaseLease(ctx, name, holder, term)
}

// node is one coordinator's elector, running until stopped.
type node struct {
	e    *Elector
	link *cuttable
	stop context.CancelFunc
	done chan struct{}
}

func startNode(t *testing.T, db *store.DB, holder string) *node {
	t.Helper()
	link := &cuttable{DB: db}
	e, err := New(Config{Leases: link, Holder: holder, TTL: testTTL, Renew: testRenew,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)).With("node", holder)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{e: e, link: link, stop: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-n.done })
	return n
}

// waitLeader waits until exactly one of nodes acts as the leader and
// returns it.
func waitLeader(t *testing.T, within time.Duration, nodes ...*node) *node {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var acting []*node
		for _, n := range nodes {
			if _, ok := n.e.Acting(); ok {
				acting = append(acting, n)
			}
		}
		if len(acting) > 1 {
			t.Fatalf("%d nodes act as the leader at once", len(acting))
		}
		if len(acting) == 1 {
			return acting[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within %s", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOneLeaderAndFailover: of three coordinators one leads; when it dies
// without releasing the lease (cut off, then gone), another leads within
// TTL+Renew under the next term; a clean stop hands over within a
// renewal or two.
func TestOneLeaderAndFailover(t *testing.T) {
	db := openDB(t)
	nodes := []*node{startNode(t, db, "a"), startNode(t, db, "b"), startNode(t, db, "c")}
	first := waitLeader(t, 2*time.Second, nodes...)
	term1, _ := first.e.Acting()

	first.link.cut.Store(true) // it dies: no renewal, no release
	first.stop()
	<-first.done
	died := time.Now()
	var rest []*node
	for _, n := range nodes {
		if n != first {
			rest = append(rest, n)
		}
	}
	second := waitLeader(t, testTTL+testRenew+time.Second, rest...)
	took := time.Since(died)
	term2, _ := second.e.Acting()
	if term2 != term1+1 {
		t.Errorf("failover term %d, want %d", term2, term1+1)
	}
	t.Logf("failover after a dead leader took %s (TTL %s, renew %s)", took, testTTL, testRenew)
	if took > testTTL+2*testRenew+500*time.Millisecond {
		t.Errorf("failover took %s, want about TTL+Renew = %s at most", took, testTTL+testRenew)
	}

	second.stop() // a clean stop releases the lease
	<-second.done
	stopped := time.Now()
	var last *node
	for _, n := range rest {
		if n != second {
			last = n
		}
	}
	waitLeader(t, testTTL, last)
	if d := time.Since(stopped); d > testTTL/2 {
		t.Errorf("handover after a clean stop took %s, want a renewal or two (%s each)", d, testRenew)
	}
}

// TestCutOffLeaderStopsActingAndIsFenced: a leader that can no longer
// reach the database stops acting before another can take the lease, and
// once another holds it, a write fenced with the old term is refused.
func TestCutOffLeaderStopsActingAndIsFenced(t *testing.T) {
	db := openDB(t)
	a := startNode(t, db, "a")
	waitLeader(t, 2*time.Second, a)
	term, _ := a.e.Acting()
	lost := a.e.Changed()
	a.link.cut.Store(true)
	cutAt := time.Now()
	select {
	case <-lost:
	case <-time.After(testTTL + time.Second):
		t.Fatal("the cut-off leader still acts")
	}
	t.Logf("the cut-off leader stopped acting %s after the cut", time.Since(cutAt))
	if _, ok := a.e.Acting(); ok {
		t.Fatal("Changed closed but the node acts")
	}

	b := startNode(t, db, "b")
	waitLeader(t, testTTL+time.Second, b)
	if err := db.Tx(t.Context(), func(tx *store.Tx) error { return a.e.Fence(t.Context(), tx) }); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fence of the cut-off node: %v, want ErrNotLeader", err)
	}
	// Even a node that believed it still led (its term in hand) is refused
	// by the database.
	err := db.Tx(t.Context(), func(tx *store.Tx) error { return tx.CheckLease(t.Context(), LeaseName, "a", term) })
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("database fence of the old term: %v, want ErrLeaseLost", err)
	}
	if err := db.Tx(t.Context(), func(tx *store.Tx) error { return b.e.Fence(t.Context(), tx) }); err != nil {
		t.Fatalf("fence of the new leader: %v", err)
	}
}

// TestWhileLeaderRunsTheDutyOnlyWhileLeading: the duty runs on the leader
// alone, is stopped when leadership goes, and never runs on two nodes at
// once.
func TestWhileLeaderRunsTheDutyOnlyWhileLeading(t *testing.T) {
	db := openDB(t)
	a, b := startNode(t, db, "a"), startNode(t, db, "b")
	var running atomic.Int32
	var mu sync.Mutex
	runs := map[string]int{}
	duty := func(name string) func(context.Context) {
		return func(ctx context.Context) {
			if running.Add(1) > 1 {
				t.Errorf("the duty runs on two nodes at once")
			}
			mu.Lock()
			runs[name]++
			mu.Unlock()
			<-ctx.Done()
			running.Add(-1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.e.WhileLeader(ctx, duty("a")) })
	wg.Go(func() { b.e.WhileLeader(ctx, duty("b")) })
	first := waitLeader(t, 2*time.Second, a, b)
	other := b
	if first == b {
		other = a
	}
	first.link.cut.Store(true)
	waitLeader(t, testTTL+time.Second, other)
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := runs["a"] + runs["b"]
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("duty runs %v, want one on each node in turn", runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if running.Load() != 0 {
		t.Errorf("%d duties still run after the context ended", running.Load())
	}
}

// TestTrustWindowEndsBeforeTheLease: after each renewal the local trust
// window ends before the expiry the database set (same host, so the two
// clocks are one), by at least the margin less the millisecond the
// database's expiry is truncated to.
func TestTrustWindowEndsBeforeTheLease(t *testing.T) {
	db := openDB(t)
	e, err := New(Config{Leases: db, Holder: "a", TTL: testTTL, Renew: testRenew})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.try(t.Context())
		e.mu.Lock()
		until, exp := e.trustUntil, e.known.Expires
		e.mu.Unlock()
		if e.term == 0 {
			t.Fatal("the only node does not hold the lease")
		}
		if gap := exp.Sub(until.Round(0)); gap < e.cfg.Margin-time.Millisecond {
			t.Fatalf("trust window ends %s before the lease's expiry, want at least the margin %s", gap, e.cfg.Margin)
		}
		time.Sleep(testRenew)
	}
}

func TestConfigRefusesAShortTTL(t *testing.T) {
	_, err := New(Config{Leases: &cuttable{}, Holder: "a", TTL: time.Second, Renew: time.Second})
	if err == nil {
		t.Fatal("a TTL of one renewal was accepted")
	}
}

// TestSlowDatabaseKeepsTheLeader: lease attempts that each take three
// renewal intervals, but well under the trust window, keep the leader
// acting without a break: a busy database must not make it drop out and
// back in (it did while an attempt was bounded by the renewal interval).
func TestSlowDatabaseKeepsTheLeader(t *testing.T) {
	db := openDB(t)
	a := startNode(t, db, "slow")
	waitLeader(t, 2*time.Second, a)
	lost := a.e.Changed()
	a.link.slow.Store(int64(3 * testRenew))
	select {
	case <-lost:
		t.Fatal("the leader stopped acting while its database was slow but answering")
	case <-time.After(3 * testTTL):
	}
	if _, ok := a.e.Acting(); !ok {
		t.Fatal("the leader does not act")
	}
}
