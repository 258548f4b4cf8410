package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLeaseTakeRenewExpire: the first holder gets term 1; another is
// refused while it lasts; a renewal keeps the term; once it expires (by
// the database's clock) another takes it under term 2, and the fence of
// the first then fails; a release hands it over at once.
func TestLeaseTakeRenewExpire(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		a, err := db.TryLease(ctx, "leader", "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Held("a") || a.Term != 1 {
			t.Fatalf("first try: %+v, want a holding term 1", a)
		}
		if d := a.Expires.Sub(a.Now); d != ttl {
			t.Errorf("expires in %s, want %s", d, ttl)
		}
		b, err := db.TryLease(ctx, "leader", "b", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if b.Held("b") || b.Holder != "a" || b.Term != 1 {
			t.Fatalf("b's try while a holds it: %+v", b)
		}
		again, err := db.TryLease(ctx, "leader", "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Held("a") || again.Term != 1 || again.Expires.Before(a.Expires) {
			t.Fatalf("renewal: %+v, want a still under term 1 with a later expiry than %s", again, a.Expires)
		}
		fence := func(holder string, term int64) error {
			return db.Tx(ctx, func(tx *Tx) error { return tx.CheckLease(ctx, "leader", holder, term) })
		}
		if err := fence("a", 1); err != nil {
			t.Fatalf("fence of the holder: %v", err)
		}

		time.Sleep(ttl + 50*time.Millisecond)
		if err := fence("a", 1); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fence of an expired lease: %v, want ErrLeaseLost", err)
		}
		b, err = db.TryLease(ctx, "leader", "b", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Held("b") || b.Term != 2 {
			t.Fatalf("b after a's lease expired: %+v, want b holding term 2", b)
		}
		if err := fence("a", 1); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fence of the deposed holder: %v, want ErrLeaseLost", err)
		}
		if err := fence("b", 1); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fence of the holder under an old term: %v, want ErrLeaseLost", err)
		}

		if err := db.ReleaseLease(ctx, "leader", "a", 1); err != nil {
			t.Fatal(err)
		}
		if err := fence("b", 2); err != nil {
			t.Fatalf("a release by a non-holder ended b's lease: %v", err)
		}
		if err := db.ReleaseLease(ctx, "leader", "b", 2); err != nil {
			t.Fatal(err)
		}
		c, err := db.TryLease(ctx, "leader", "c", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Held("c") || c.Term != 3 {
			t.Fatalf("c right after b released: %+v, want c holding term 3", c)
		}
		if got, err := db.GetLease(ctx, "leader"); err != nil || got.Holder != "c" || got.Term != 3 {
			t.Fatalf("GetLease: %+v, %v", got, err)
		}
		if _, err := db.GetLease(ctx, "nobody-tried"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetLease of an unknown lease: %v, want ErrNotFound", err)
		}
	})
}

// TestLeaseContendersGetOneHolderPerTerm: contenders trying at once, round
// after round, never both hold the lease, and each term has one holder.
func TestLeaseContendersGetOneHolderPerTerm(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		holders := map[int64]string{}
		for round := range 6 {
			var wg sync.WaitGroup
			got := make([]Lease, 4)
			errs := make([]error, 4)
			for i := range got {
				wg.Go(func() { got[i], errs[i] = db.TryLease(ctx, "leader", string(rune('a'+i)), 200*time.Millisecond) })
			}
			wg.Wait()
			winners := 0
			for i, l := range got {
				if errs[i] != nil {
					t.Fatalf("round %d: %v", round, errs[i])
				}
				if l.Held(string(rune('a' + i))) {
					winners++
					if h, ok := holders[l.Term]; ok && h != l.Holder {
						t.Fatalf("term %d held by %s and by %s", l.Term, h, l.Holder)
					}
					holders[l.Term] = l.Holder
				}
			}
			if winners != 1 {
				t.Fatalf("round %d: %d contenders hold the lease: %+v", round, winners, got)
			}
			if err := db.ReleaseLease(ctx, "leader", got[0].Holder, got[0].Term); err != nil {
				t.Fatal(err)
			}
		}
		if len(holders) != 6 {
			t.Errorf("6 rounds with a release each gave %d terms: %v", len(holders), holders)
		}
	})
}

// TestLeaseFenceHoldsOffATakeover (PostgreSQL): while the holder's fenced
// transaction is open, a contender that finds the lease expired waits
// for it to commit before it takes the lease, so the old term's writes
// all come before the new term's.
func TestLeaseFenceHoldsOffATakeover(t *testing.T) {
	t.Parallel()
	// PostgreSQL only: on SQLite, with one writer, a contender cannot even
	// begin while the fenced transaction runs.
	pg := engines[1]
	db := openTestDB(t, pg.config(t))
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	{
		ctx := t.Context()
		const ttl = 200 * time.Millisecond
		if _, err := db.TryLease(ctx, "leader", "a", ttl); err != nil {
			t.Fatal(err)
		}
		checked, release := make(chan struct{}), make(chan struct{})
		var committed time.Time
		done := make(chan error, 1)
		go func() {
			done <- db.Tx(ctx, func(tx *Tx) error {
				if err := tx.CheckLease(ctx, "leader", "a", 1); err != nil {
					return err
				}
				close(checked)
				<-release
				committed = time.Now()
				return nil
			})
		}()
		<-checked
		time.Sleep(ttl + 50*time.Millisecond) // a's lease has expired by the database's clock
		var took time.Time
		taken := make(chan Lease, 1)
		go func() {
			l, err := db.TryLease(ctx, "leader", "b", ttl)
			if err != nil {
				t.Error(err)
			}
			took = time.Now()
			taken <- l
		}()
		select {
		case l := <-taken:
			t.Fatalf("b took the lease (%+v) while a's fenced transaction was open", l)
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		l := <-taken
		if !l.Held("b") || l.Term != 2 || took.Before(committed) {
			t.Fatalf("takeover %+v at %s, a committed at %s: want b under term 2 after a's commit", l, took, committed)
		}
	}
}

// TestFencedTransactionsWriteNothingWhenTheFenceFails: a context with a
// fence runs it first in every transaction; a failing fence rolls the
// transaction back (a retention delete deletes nothing) and its error is
// returned.
func TestFencedTransactionsWriteNothingWhenTheFenceFails(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		if _, err := db.InsertAudit(ctx, AuditEntry{ActorType: "system", Action: "test.fence", Target: "x", Outcome: "allowed"}); err != nil {
			t.Fatal(err)
		}
		before := countRows(t, db, "audit_log")
		deposed := errors.New("test: deposed")
		fenced := WithFence(ctx, func(ctx context.Context, tx *Tx) error { return tx.CheckLease(ctx, "leader", "a", 1) })
		if _, err := db.DeleteAuditBefore(fenced, testNow.Add(time.Hour)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("fenced delete without the lease: %v, want ErrLeaseLost", err)
		}
		if _, err := db.DeleteAuditBefore(WithFence(ctx, func(context.Context, *Tx) error { return deposed }), testNow.Add(time.Hour)); !errors.Is(err, deposed) {
			t.Fatalf("fenced delete: %v, want the fence's error", err)
		}
		if n := countRows(t, db, "audit_log"); n != before {
			t.Fatalf("%d audit rows after the refused deletes, want %d", n, before)
		}
		l, err := db.TryLease(ctx, "leader", "a", time.Minute)
		if err != nil || !l.Held("a") {
			t.Fatal(l, err)
		}
		if n, err := db.DeleteAuditBefore(WithFence(ctx, func(ctx context.Context, tx *Tx) error {
			return tx.CheckLease(ctx, "leader", "a", l.Term)
		}), testNow.Add(time.Hour)); err != nil || n != int64(before) {
			t.Fatalf("fenced delete by the holder: %d, %v; want %d deleted", n, err, before)
		}
	})
}
