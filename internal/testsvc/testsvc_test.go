package testsvc

import (
	"database/sql"
	"errors"
	"net/url"
	"testing"
)

func TestPostgresURLGivesAFreshSchemaAndDropsIt(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("use", func(t *testing.T) {
		dsn := PostgresURL(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parse returned URL: %v", err)
		}
		schema = u.Query().Get("search_path")
		if schema == "" {
			t.Fatalf("got URL without search_path, want one naming the schema")
		}
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer db.Close()
		var current string
		if err := db.QueryRowContext(t.Context(), "SELECT current_schema()").Scan(&current); err != nil {
			t.Fatalf("read current schema: %v", err)
		}
		if current != schema {
			t.Errorf("got current schema %q, want %q", current, schema)
		}
		var tables int
		if err := db.QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables); err != nil {
			t.Fatalf("count tables: %v", err)
		}
		if tables != 0 {
			t.Errorf("got %d tables in the new schema, want 0", tables)
		}
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE t (x INTEGER)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
	})
	if schema == "" {
		return // the subtest skipped or failed already
	}

	db, err := sql.Open("pgx", Lookup(t, EnvDatabaseURL, "a PostgreSQL database"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	var one int
	err = db.QueryRowContext(t.Context(), "SELECT 1 FROM pg_namespace WHERE nspname = $1", schema).Scan(&one)
	if !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("look up schema %q after its test ended: got %v, want it dropped", schema, err)
	}
}
