package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// newSchema creates schema bench_<random> in the database of base and
// returns a URL whose connections work in it (search_path), and a function
// that drops it. This is what internal/testsvc does for tests.
func newSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.New("parse the PostgreSQL URL (-pg): not a valid URL") // it may hold a password
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	schema := "bench_" + hex.EncodeToString(suffix[:])
	if err := execAdmin(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema %q: %w", schema, err)
	}
	drop := func() {
		// The benchmark's context may have ended; the drop must still run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = execAdmin(ctx, base, "DROP SCHEMA "+schema+" CASCADE")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// execAdmin runs one statement on a connection of its own.
func execAdmin(ctx context.Context, databaseURL, stmt string) error {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return errors.Join(err, db.Close())
}
