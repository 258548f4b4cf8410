package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// openPostgres opens a pool to the PostgreSQL server at databaseURL. Reads
// and writes share the pool; concurrent claims are made safe by row locks
// (FOR UPDATE SKIP LOCKED), not by a single writer.
func openPostgres(ctx context.Context, databaseURL string, maxConns int) (*DB, error) {
	pool, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open postgresql: %w", err)
	}
	pool.SetMaxOpenConns(maxConns)
	pool.SetMaxIdleConns(maxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	if err := pool.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to postgresql: %w", err), pool.Close())
	}
	return &DB{write: pool, read: pool, queries: queries{d: postgresDialect}}, nil
}
