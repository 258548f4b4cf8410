package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// maxCachedStmts bounds the prepared statements kept per pool. The store's
// query texts are constants or are built from a bounded set of fragments
// (a guarded update's from-statuses, a list's optional filters), so a few
// dozen are in use; a query whose text grows with its input (an IN list of
// IDs, a multi-row INSERT) is run uncached (see queries.uncached). Past the
// bound, new queries simply run unprepared.
const maxCachedStmts = 256

// stmtCache keeps one prepared statement per query text for one pool, so
// the hot queries are parsed once per connection instead of at every
// call. database/sql prepares a cached statement again, transparently, on
// each connection it is used on (a new one, or one replacing a connection
// the server ended), and a transaction reuses the copy already prepared on
// its connection (Tx.StmtContext).
//
// A statement is never prepared on the pool from inside a transaction: the
// transaction holds a connection (on SQLite the only write connection), and
// preparing on the pool would wait for another, which may never come. The
// query runs unprepared that time and is prepared when the transaction
// ends (prepareWanted).
type stmtCache struct {
	db *sql.DB
	d  dialect
	// stmts maps the query text as written (before rebind) to its
	// *sql.Stmt; only stored under mu.
	stmts sync.Map
	mu    sync.Mutex
	n     int                 // entries in stmts
	want  map[string]struct{} // queries first met inside a transaction
	// wanted is len(want) > 0, read without mu on the hot path.
	wanted atomic.Bool
	closed bool
}

func newStmtCache(db *sql.DB, d dialect) *stmtCache {
	return &stmtCache{db: db, d: d, want: map[string]struct{}{}}
}

// lookup returns the statement cached for query, or nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	if s, ok := c.stmts.Load(query); ok {
		return s.(*sql.Stmt)
	}
	return nil
}

// prepare returns the statement for query, preparing it on the pool if it
// is not cached yet. It returns nil, and the caller runs query unprepared,
// when the cache is full or closed or preparing failed: an error preparing
// is the query's own error, which running it reports in its usual form.
// The caller must not be holding a connection of the pool.
func (c *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	if s := c.lookup(query); s != nil {
		return s
	}
	c.mu.Lock()
	full := c.closed || c.n >= maxCachedStmts
	c.mu.Unlock()
	if full {
		return nil
	}
	s, err := c.db.PrepareContext(ctx, c.d.rebind(query))
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.lookup(query); old != nil || c.closed || c.n >= maxCachedStmts {
		// Another caller cached it first, or the cache closed or filled
		// meanwhile: use the cached one, or none.
		_ = s.Close()
		return old
	}
	c.stmts.Store(query, s)
	c.n++
	return s
}

// wantLater notes that query, met inside a transaction, is to be prepared
// once the transaction has ended.
func (c *stmtCache) wantLater(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.n+len(c.want) >= maxCachedStmts {
		return
	}
	c.want[query] = struct{}{}
	c.wanted.Store(true)
}

// prepareWanted prepares the queries wantLater noted. Call it with no
// connection of the pool held, after a transaction.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	if !c.wanted.Load() {
		return
	}
	c.mu.Lock()
	queries := make([]string, 0, len(c.want))
	for q := range c.want {
		queries = append(queries, q)
	}
	clear(c.want)
	c.wanted.Store(false)
	c.mu.Unlock()
	for _, q := range queries {
		c.prepare(ctx, q)
	}
}

// close closes every cached statement; later queries run unprepared.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	clear(c.want)
	c.wanted.Store(false)
	var errs []error
	c.stmts.Range(func(k, v any) bool {
		errs = append(errs, v.(*sql.Stmt).Close())
		c.stmts.Delete(k)
		return true
	})
	c.n = 0
	return errors.Join(errs...)
}

// len returns the number of cached statements.
func (c *stmtCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
