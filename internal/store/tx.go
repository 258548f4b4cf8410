package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// txMaxAttempts bounds how often Tx runs its function when the engine
// reports a lost race (see retryable).
const txMaxAttempts = 5

// txRetryBase is the first back-off between attempts; it doubles each time,
// with jitter.
const txRetryBase = 5 * time.Millisecond

// Tx is one database transaction, handed to the function given to DB.Tx.
// It has the same query methods as DB, applied inside the transaction. It
// must not be used after that function returns, nor by more than one
// goroutine.
type Tx struct {
	queries
}

// Tx runs fn in one transaction and commits it if fn returns nil. If fn
// returns an error the transaction is rolled back and the error returned
// unchanged.
//
// When the engine reports that the transaction lost a race (SQLite busy
// past busy_timeout, a PostgreSQL serialization failure or deadlock), or
// the server ended the connection before the COMMIT was sent (a restart,
// an administrator terminating sessions), the transaction is rolled back
// and fn runs again, up to 5 times in all. A failed COMMIT is never run
// again: it may have landed. So fn
// must only touch the database through tx, and must not have effects
// outside it (sending messages, closing channels) that cannot repeat.
//
// Inside fn, use tx, never db: on SQLite the transaction holds the only
// write connection, so a write through db would wait for it forever.
func (db *DB) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := db.runTx(ctx, fn)
		if err == nil || !(retryable(err) || lostBeforeCommit(err)) {
			return err
		}
		if attempt == txMaxAttempts {
			return fmt.Errorf("transaction gave up after %d attempts: %w", attempt, err)
		}
		db.logger.Debug("transaction retry", "attempt", attempt, "err", err)
		backoff := db.retryBase << (attempt - 1)
		if backoff > 0 {
			backoff += rand.N(backoff)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("transaction retry: %w", errors.Join(context.Cause(ctx), err))
		case <-time.After(backoff):
		}
	}
}

func (db *DB) runTx(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Runs after the rollback below, once the connection is back in the
	// pool.
	defer db.prepareWanted(ctx, db.wstmts)
	// Roll back on every path that does not commit, a panic in fn included,
	// so the connection goes back to the pool. After a commit, Rollback is
	// a no-op; its error adds nothing to the one being returned.
	defer func() { _ = sqlTx.Rollback() }()
	tx := db.txQueries(sqlTx, db.wstmts)
	if fence, ok := ctx.Value(fenceKey{}).(Fence); ok {
		if err := fence(ctx, tx); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return &commitError{err: err}
	}
	return nil
}

// Fence is a check a transaction runs first, before any of its writes;
// an error rolls the transaction back and is returned unchanged. The
// leader's singleton duties fence their writes with the leader lease
// (Tx.CheckLease).
type Fence func(ctx context.Context, tx *Tx) error

type fenceKey struct{}

// WithFence returns a context whose transactions (every DB.Tx run with it)
// start with fence. Store methods that write in one statement outside a
// transaction are not fenced: a duty that must be fenced uses methods
// that write in a transaction (their doc says so).
func WithFence(ctx context.Context, fence Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// commitError is a failed COMMIT. Whether the transaction landed is then
// unknown, so it is never run again on a lost connection.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit transaction: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// lostBeforeCommit reports whether a transaction failed because the server
// ended its connection before the COMMIT was sent: nothing was written, and
// on a fresh connection it may simply run again.
func lostBeforeCommit(err error) bool {
	var ce *commitError
	return connectionLost(err) && !errors.As(err, &ce)
}

// readTx runs fn in a read-only transaction, so that its several reads see
// one snapshot. It is not retried for races (a reader never loses one),
// only when the server ended the connection.
func (db *DB) readTx(ctx context.Context, fn func(tx *Tx) error) error {
	err := db.readTxOnce(ctx, fn)
	// A pooled connection the server ended (a restart, an administrator)
	// fails its next use and leaves the pool; several idle ones may have
	// been ended at once, so try a few more.
	for attempt := 1; attempt < txMaxAttempts && err != nil && connectionLost(err) && ctx.Err() == nil; attempt++ {
		err = db.readTxOnce(ctx, fn)
	}
	return err
}

func (db *DB) readTxOnce(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := db.read.BeginTx(ctx, db.d.readTx)
	if err != nil {
		return fmt.Errorf("begin read transaction: %w", err)
	}
	defer db.prepareWanted(ctx, db.rstmts)
	defer func() { _ = sqlTx.Rollback() }() // a read-only transaction has nothing to keep
	return fn(db.txQueries(sqlTx, db.rstmts))
}

// txQueries returns the query methods of sqlTx, a transaction on the pool
// whose statements stmts caches.
func (db *DB) txQueries(sqlTx *sql.Tx, stmts *stmtCache) *Tx {
	return &Tx{queries: queries{w: sqlTx, r: sqlTx, d: db.d, clock: db.clock, ws: stmts, rs: stmts, tx: sqlTx}}
}

// prepareWanted prepares the statements first met inside a transaction
// that has ended, unless ctx is done.
func (db *DB) prepareWanted(ctx context.Context, stmts *stmtCache) {
	if stmts != nil && ctx.Err() == nil {
		stmts.prepareWanted(ctx)
	}
}
