// Package storetest opens real, migrated databases for the tests of
// packages built on the store: one on SQLite in a temporary directory and
// one on PostgreSQL in a schema of its own (see testsvc). Test code only.
package storetest

import (
	"log/slog"
	"testing"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

// ForEachEngine runs fn as two parallel subtests, "sqlite" and
// "postgres", each with a freshly migrated database that is closed when
// the subtest ends. The PostgreSQL variant skips (or fails, under
// KICI_TEST_REQUIRE_SERVICES=1) without KICI_TEST_DATABASE_URL.
func ForEachEngine(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := store.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
			if engine == "postgres" {
				cfg.DatabaseURL = testsvc.PostgresURL(t)
			}
			db, err := store.Open(t.Context(), cfg)
			if err != nil {
				t.Fatalf("open %s: %v", engine, err)
			}
			t.Cleanup(func() { db.Close() })
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate %s: %v", engine, err)
			}
			fn(t, db)
		})
	}
}
