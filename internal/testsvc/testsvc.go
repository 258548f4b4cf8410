// Package testsvc gives tests the external services the suite runs
// against (today PostgreSQL), and decides what a test does when one is not
// configured: it skips, unless KICI_TEST_REQUIRE_SERVICES=1 is set (as CI
// sets it), in which case it fails and names the missing variable. So a
// developer can run `go test ./...` with nothing installed, and CI cannot
// pass by skipping.
//
// Only test code imports this package. Its functions are safe to call from
// parallel tests.
package testsvc

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Environment variables read by this package.
const (
	// EnvRequireServices, set to 1, turns a missing service into a test
	// failure instead of a skip.
	EnvRequireServices = "KICI_TEST_REQUIRE_SERVICES"
	// EnvDatabaseURL is a PostgreSQL URL whose role may create schemas, e.g.
	// postgres://kici:kici@127.0.0.1:5432/kici_test?sslmode=disable.
	EnvDatabaseURL = "KICI_TEST_DATABASE_URL"
)

// RequireServices reports whether KICI_TEST_REQUIRE_SERVICES=1 is set.
func RequireServices() bool {
	return os.Getenv(EnvRequireServices) == "1"
}

// Lookup returns the value of the environment variable name that
// configures service (a few words, for the message). When it is unset the
// test is skipped, or fails if services are required.
func Lookup(t testing.TB, name, service string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if RequireServices() {
		t.Fatalf("%s is not set, and %s=1 requires %s", name, EnvRequireServices, service)
	}
	t.Skipf("%s is not set: skipping the test that needs %s (set %s=1 to fail instead)", name, service, EnvRequireServices)
	return ""
}

// PostgresURL returns the URL of a fresh, empty schema in the PostgreSQL
// database named by KICI_TEST_DATABASE_URL: the URL sets search_path to the
// new schema, so every connection opened with it works there. The schema is
// dropped when the test ends. Tests that each call PostgresURL can run in
// parallel, in one package or several.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := Lookup(t, EnvDatabaseURL, "a PostgreSQL database")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: not a valid URL", EnvDatabaseURL) // the URL may hold a password
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:]) // crypto/rand.Read never fails
	schema := "test_" + hex.EncodeToString(suffix[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := execAdmin(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %q: %v", schema, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execAdmin(ctx, base, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %q: %v", schema, err)
		}
	})

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// execAdmin runs one statement on a connection of its own.
func execAdmin(ctx context.Context, databaseURL, stmt string) error {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return fmt.Errorf("open %s: %w", EnvDatabaseURL, err)
	}
	_, err = db.ExecContext(ctx, stmt)
	return errors.Join(err, db.Close())
}
