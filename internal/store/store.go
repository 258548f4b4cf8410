package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Config configures Open. The zero value is not valid: set DataDir or
// DatabaseURL.
type Config struct {
	// DataDir is the directory that holds the SQLite file kici.db. It is
	// created (mode 0700) when missing. Required when DatabaseURL is empty;
	// ignored otherwise.
	DataDir string
	// DatabaseURL selects PostgreSQL when set: a postgres:// or
	// postgresql:// URL in the form pgx accepts. Empty means SQLite in
	// DataDir.
	DatabaseURL string
	// Logger receives migration progress and transaction retries. Nil
	// discards them.
	Logger *slog.Logger
	// Now is the clock for the timestamps the store stamps itself
	// (created_at, enqueued_at, updated_at, "now" when claiming). Nil means
	// time.Now. Stamps are UTC, in microseconds, and strictly increasing
	// within one DB, so rows created in one call keep their order.
	Now func() time.Time
	// MaxConns bounds the open PostgreSQL connections, and the SQLite read
	// connections (SQLite always has exactly one write connection). Zero
	// means 10.
	MaxConns int
}

// Validate reports the first invalid field of cfg.
func (cfg Config) Validate() error {
	if cfg.MaxConns < 0 {
		return fmt.Errorf("store config: MaxConns: got %d, want zero or more", cfg.MaxConns)
	}
	if cfg.DatabaseURL != "" {
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil {
			// The URL may hold a password: do not echo it.
			return errors.New("store config: DatabaseURL: not a valid URL")
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			return fmt.Errorf("store config: DatabaseURL: got scheme %q, want postgres or postgresql", u.Scheme)
		}
		return nil
	}
	if cfg.DataDir == "" {
		return errors.New("store config: DataDir: required when DatabaseURL is empty")
	}
	if strings.ContainsRune(cfg.DataDir, '?') {
		return fmt.Errorf("store config: DataDir: %q contains '?', which the SQLite driver cannot open", cfg.DataDir)
	}
	return nil
}

// DB is an open kici database, SQLite or PostgreSQL. It is safe for
// concurrent use by many goroutines. Methods that write one row run as one
// statement; methods that write several rows run in one transaction. Use
// Tx to make several calls atomic.
type DB struct {
	queries
	write *sql.DB // every write; on SQLite exactly one connection
	read  *sql.DB // reads outside a transaction; same pool as write on PostgreSQL
	// wstmts and rstmts are the prepared statements of write and read
	// (the same cache when the pools are the same); nil when not cached.
	wstmts, rstmts *stmtCache
	logger         *slog.Logger
	// retryBase is the first back-off of Tx between attempts (txRetryBase;
	// tests set 0).
	retryBase time.Duration
}

// Open connects to the database cfg names. It does not migrate: call
// Migrate (or check MigrationStatus) before using the tables.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	maxConns := cfg.MaxConns
	if maxConns == 0 {
		maxConns = 10
	}
	var (
		db  *DB
		err error
	)
	if cfg.DatabaseURL != "" {
		db, err = openPostgres(ctx, cfg.DatabaseURL, maxConns)
	} else {
		db, err = openSQLite(ctx, logger, cfg.DataDir, maxConns)
	}
	if err != nil {
		return nil, err
	}
	db.logger = logger.With("database", db.d.name)
	db.clock = &clock{now: now}
	db.retryBase = txRetryBase
	db.queries.w = db.write
	db.queries.r = db.read
	if db.d.cacheStmts {
		db.wstmts = newStmtCache(db.write, db.d)
		db.rstmts = db.wstmts
		if db.read != db.write {
			db.rstmts = newStmtCache(db.read, db.d)
		}
	}
	db.queries.ws, db.queries.rs = db.wstmts, db.rstmts
	return db, nil
}

// Close closes every prepared statement and connection. Calls in flight
// fail.
func (db *DB) Close() error {
	var err error
	if db.wstmts != nil {
		err = db.wstmts.close()
	}
	if db.rstmts != db.wstmts {
		err = errors.Join(err, db.rstmts.close())
	}
	err = errors.Join(err, db.write.Close())
	if db.read != db.write {
		err = errors.Join(err, db.read.Close())
	}
	return err
}

// Dialect is "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.d.name }

// Ping checks that the database answers. On SQLite it uses a read
// connection, so it does not wait for a write in progress.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.read.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", db.d.name, err)
	}
	return nil
}

// execer is what *sql.DB and *sql.Tx have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries carries the methods shared by DB and Tx. Outside a transaction
// w is the write pool and r the read pool; inside one both are the
// transaction.
type queries struct {
	w, r  execer
	d     dialect
	clock *clock
	// ws and rs are the prepared statements of the pools w and r run on
	// (inside a transaction, both are its pool's); nil runs every query
	// unprepared.
	ws, rs *stmtCache
	// tx is the transaction w and r are, or nil.
	tx *sql.Tx
}

// uncached returns q without its statement caches, for a query whose text
// varies with its input (an IN list of IDs, a multi-row INSERT): caching
// those would fill the cache with statements used once.
func (q *queries) uncached() *queries {
	c := *q
	c.ws, c.rs = nil, nil
	return &c
}

// stmt returns the prepared statement of query from c, bound to q's
// transaction if there is one, or nil to run query unprepared.
func (q *queries) stmt(ctx context.Context, c *stmtCache, query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	if q.tx == nil {
		return c.prepare(ctx, query)
	}
	s := c.lookup(query)
	if s == nil {
		// Preparing on the pool now would wait for a connection while the
		// transaction holds one: prepare it after the transaction.
		c.wantLater(query)
		return nil
	}
	// The copy already prepared on the transaction's connection, or one
	// prepared on it now.
	return q.tx.StmtContext(ctx, s)
}

func (q *queries) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := q.stmt(ctx, q.ws, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return q.w.ExecContext(ctx, q.d.rebind(query), args...)
}

// execChanged runs a write and reports whether it changed at least one row.
func (q *queries) execChanged(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := q.exec(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("count changed rows: %w", err)
	}
	return n > 0, nil
}

// writeRow runs a write with a RETURNING clause.
func (q *queries) writeRow(ctx context.Context, query string, args ...any) *sql.Row {
	if s := q.stmt(ctx, q.ws, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return q.w.QueryRowContext(ctx, q.d.rebind(query), args...)
}

// writeRows runs a write with a RETURNING clause that may return many rows.
func (q *queries) writeRows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := q.stmt(ctx, q.ws, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return q.w.QueryContext(ctx, q.d.rebind(query), args...)
}

func (q *queries) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := q.stmt(ctx, q.rs, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return q.r.QueryContext(ctx, q.d.rebind(query), args...)
}

func (q *queries) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if s := q.stmt(ctx, q.rs, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return q.r.QueryRowContext(ctx, q.d.rebind(query), args...)
}

// exists reports whether query (a SELECT 1 … ) finds a row, asking the
// write side so that it sees the caller's own transaction.
func (q *queries) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	var row *sql.Row
	if s := q.stmt(ctx, q.ws, query); s != nil {
		row = s.QueryRowContext(ctx, args...)
	} else {
		row = q.w.QueryRowContext(ctx, q.d.rebind(query), args...)
	}
	err := row.Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// guarded finishes a guarded update that may have changed nothing: it
// returns (true, nil) if it did, (false, nil) if the row exists but was not
// in an allowed state, and ErrNotFound if there is no such row.
func (q *queries) guarded(ctx context.Context, changed bool, existsQuery string, args ...any) (bool, error) {
	if changed {
		return true, nil
	}
	ok, err := q.exists(ctx, existsQuery, args...)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, ErrNotFound
	}
	return false, nil
}

// NewID returns a new row ID: a UUID (version 7, so IDs made later sort
// later).
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// Only a failing system random source gets here.
		return uuid.NewString()
	}
	return id.String()
}

// clock stamps strictly increasing UTC times with microsecond precision.
type clock struct {
	mu   sync.Mutex
	now  func() time.Time
	last time.Time
}

// Now returns the clock's time, or one microsecond past the last stamp if
// the clock has not moved on since.
func (c *clock) Now() time.Time {
	t := normTime(c.now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.last) {
		t = c.last.Add(time.Microsecond)
	}
	c.last = t
	return t
}

// statusArgs converts a list of statuses to query arguments.
func statusArgs[S ~string](statuses []S) []any {
	args := make([]any, len(statuses))
	for i, s := range statuses {
		args[i] = string(s)
	}
	return args
}
