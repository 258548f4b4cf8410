package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseLost is returned (wrapped) by CheckLease when the caller does not
// hold the lease under the term it names any more: it expired, or another
// instance took it. A caller that gets it must stop acting as the holder.
var ErrLeaseLost = errors.New("lease lost")

// Lease is one row of cluster_leases, as the database has it.
type Lease struct {
	Name   string
	Holder string
	// Term grows by one with each new holder; a renewal keeps it.
	Term int64
	// Expires and Now are by the database's clock, Now read in the same
	// statement, so Expires.Sub(Now) is the time left whatever the
	// caller's clock says.
	Expires time.Time
	Now     time.Time
}

// Held reports whether holder holds l now.
func (l Lease) Held(holder string) bool { return l.Holder == holder && l.Expires.After(l.Now) }

// TryLease takes lease name for holder for ttl if no one holds it (or its
// holder let it expire), renews it if holder holds it, and otherwise
// changes nothing. A new holder gets the next term; a renewal keeps the
// term; a holder whose lease expired before it renewed gets a new term,
// as any new holder would (it may have stopped acting meanwhile). It
// returns the lease as it stands after the call: compare Holder, or use
// Held. Expiry is by the database's clock.
func (db *DB) TryLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if name == "" || holder == "" {
		return Lease{}, errors.New("try lease: name and holder are required")
	}
	if ttl < time.Millisecond {
		return Lease{}, fmt.Errorf("try lease %q: ttl %s: want at least 1ms", name, ttl)
	}
	var out Lease
	err := db.Tx(ctx, func(tx *Tx) error {
		// The row exists from the first try on; the insert that loses a race
		// does nothing, and the lock below orders the contenders.
		if _, err := tx.exec(ctx, "INSERT INTO cluster_leases (name, holder, term, expires_ms) VALUES (?, '', 0, 0) ON CONFLICT (name) DO NOTHING", name); err != nil {
			return classify(err)
		}
		l, err := tx.lease(ctx, name, false)
		if err != nil {
			return err
		}
		now := l.Now.UnixMilli()
		switch {
		case l.Held(holder):
			// A renewal.
		case l.Expires.After(l.Now):
			out = l // held by another
			return nil
		default:
			l.Holder, l.Term = holder, l.Term+1
		}
		l.Expires = time.UnixMilli(now + ttl.Milliseconds()).UTC()
		if _, err := tx.exec(ctx, "UPDATE cluster_leases SET holder = ?, term = ?, expires_ms = ? WHERE name = ?",
			l.Holder, l.Term, l.Expires.UnixMilli(), name); err != nil {
			return classify(err)
		}
		out = l
		return nil
	})
	if err != nil {
		return Lease{}, fmt.Errorf("try lease %q for %s: %w", name, holder, err)
	}
	return out, nil
}

// ReleaseLease ends holder's lease at once if it still holds it under
// term (a clean shutdown: the next holder need not wait out the ttl).
// Releasing a lease one does not hold changes nothing.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string, term int64) error {
	_, err := db.exec(ctx, "UPDATE cluster_leases SET expires_ms = 0 WHERE name = ? AND holder = ? AND term = ?", name, holder, term)
	if err != nil {
		return fmt.Errorf("release lease %q: %w", name, classify(err))
	}
	return nil
}

// GetLease reads lease name; ErrNotFound if no one ever tried it.
func (db *DB) GetLease(ctx context.Context, name string) (Lease, error) {
	var l Lease
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		l, err = tx.lease(ctx, name, true)
		return err
	})
	if err != nil {
		return Lease{}, fmt.Errorf("get lease %q: %w", name, err)
	}
	return l, nil
}

// CheckLease is the fence of a holder's writes: in the caller's
// transaction it checks that holder holds lease name under term now, and
// returns ErrLeaseLost if not. On PostgreSQL it keeps a share lock on the
// row until the transaction ends, so no other instance can take the lease
// between this check and the commit: every write of a term is committed
// before the next term's first. Call it before the writes it guards.
func (tx *Tx) CheckLease(ctx context.Context, name, holder string, term int64) error {
	l, err := tx.lease(ctx, name, true)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("lease %q: never taken: %w", name, ErrLeaseLost)
	}
	if err != nil {
		return err
	}
	switch {
	case l.Holder != holder || l.Term != term:
		return fmt.Errorf("lease %q is held by %s under term %d, not by %s under term %d: %w", name, l.Holder, l.Term, holder, term, ErrLeaseLost)
	case !l.Expires.After(l.Now):
		return fmt.Errorf("lease %q of %s (term %d) expired %s ago: %w", name, holder, term, l.Now.Sub(l.Expires), ErrLeaseLost)
	}
	return nil
}

// lease reads a lease row with the database's time, locking it for update
// (or, with share, against updates) until the transaction ends.
func (q *queries) lease(ctx context.Context, name string, share bool) (Lease, error) {
	l := Lease{Name: name}
	var exp, now int64
	err := q.w.QueryRowContext(ctx, q.d.rebind("SELECT holder, term, expires_ms, "+q.d.nowMillis()+" FROM cluster_leases WHERE name = ?"+q.d.lockRow(share)), name).
		Scan(&l.Holder, &l.Term, &exp, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("lease %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read lease %q: %w", name, classify(err))
	}
	l.Expires, l.Now = time.UnixMilli(exp).UTC(), time.UnixMilli(now).UTC()
	return l, nil
}
