package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// sqliteErrors returns real errors of the SQLite driver, made by running
// statements that fail, keyed by what they are.
func sqliteErrors(t *testing.T) map[string]error {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "errors.db")
	open := func(params string) *sql.DB {
		db, err := sql.Open("sqlite", path+"?"+params)
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db := open("_pragma=journal_mode(WAL)")
	for _, stmt := range []string{
		"CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
		"INSERT INTO t (id, name) VALUES ('1', 'a')",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	errs := map[string]error{}
	failing := map[string]string{
		"primary key": "INSERT INTO t (id, name) VALUES ('1', 'b')",
		"unique":      "INSERT INTO t (id, name) VALUES ('2', 'a')",
		"not null":    "INSERT INTO t (id, name) VALUES ('3', NULL)",
		"syntax":      "INSERT INTO",
	}
	for what, stmt := range failing {
		_, err := db.ExecContext(ctx, stmt)
		if err == nil {
			t.Fatalf("%s: got no error, want one", stmt)
		}
		errs[what] = err
	}

	// SQLITE_BUSY: a second connection, with no busy timeout, asks for the
	// write lock that the first one holds.
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("get connection: %v", err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("begin immediate: %v", err)
	}
	other := open("_pragma=busy_timeout(0)")
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	if err == nil {
		t.Fatalf("second begin immediate: got no error, want SQLITE_BUSY")
	}
	errs["busy"] = err
	if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("rollback: %v", err)
	}

	// SQLITE_FULL: the database may not grow past its page cap, as on a
	// full disk.
	full := open("_pragma=max_page_count(8)")
	if _, err := full.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS big (v TEXT)"); err != nil {
		t.Fatalf("create big: %v", err)
	}
	for i := 0; ; i++ {
		_, err := full.ExecContext(ctx, "INSERT INTO big (v) VALUES (?)", string(make([]byte, 4096)))
		if err != nil {
			errs["full"] = err
			break
		}
		if i > 1000 {
			t.Fatal("the capped database never filled up")
		}
	}
	return errs
}

func TestIsStorageFull(t *testing.T) {
	t.Parallel()
	lite := sqliteErrors(t)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "enospc from a write", err: fmt.Errorf("append log: %w", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), want: true},
		{name: "sqlite full", err: fmt.Errorf("commit transaction: %w", lite["full"]), want: true},
		{name: "sqlite busy", err: lite["busy"], want: false},
		{name: "postgres disk full", err: &pgconn.PgError{Code: "53100"}, want: true},
		{name: "postgres out of memory", err: &pgconn.PgError{Code: "53200"}, want: false},
		{name: "plain error", err: errors.New("no space, but not that one"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsStorageFull(tt.err); got != tt.want {
				t.Errorf("IsStorageFull(%v): got %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	lite := sqliteErrors(t)
	plain := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want error // the sentinel errors.Is must find, or nil for "none"
		same bool  // the error must come back unchanged
	}{
		{name: "nil", err: nil, same: true},
		{name: "plain error", err: plain, same: true},
		{name: "no rows", err: sql.ErrNoRows, want: ErrNotFound},
		{name: "wrapped no rows", err: fmt.Errorf("scan: %w", sql.ErrNoRows), want: ErrNotFound},
		{name: "already not found", err: fmt.Errorf("x: %w", ErrNotFound), want: ErrNotFound, same: true},
		{name: "postgres unique violation", err: &pgconn.PgError{Code: "23505"}, want: ErrConflict},
		{name: "wrapped postgres unique violation", err: fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505"}), want: ErrConflict},
		{name: "postgres foreign key violation", err: &pgconn.PgError{Code: "23503"}, same: true},
		{name: "postgres serialization failure", err: &pgconn.PgError{Code: "40001"}, same: true},
		{name: "sqlite primary key", err: lite["primary key"], want: ErrConflict},
		{name: "sqlite unique", err: lite["unique"], want: ErrConflict},
		{name: "wrapped sqlite unique", err: fmt.Errorf("insert: %w", lite["unique"]), want: ErrConflict},
		{name: "sqlite not null", err: lite["not null"], same: true},
		{name: "sqlite syntax", err: lite["syntax"], same: true},
		{name: "sqlite busy", err: lite["busy"], same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tt.err)
			for _, sentinel := range []error{ErrNotFound, ErrConflict} {
				if is, want := errors.Is(got, sentinel), sentinel == tt.want; is != want {
					t.Errorf("errors.Is(classify(%v), %v): got %t, want %t", tt.err, sentinel, is, want)
				}
			}
			if tt.same && got != tt.err {
				t.Errorf("classify(%v): got %v, want the error unchanged", tt.err, got)
			}
			if tt.want == ErrConflict && !errors.Is(got, tt.err) {
				t.Errorf("classify(%v): got %v, want it to still wrap the driver error", tt.err, got)
			}
		})
	}
}

func TestConnectionLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "administrator terminated the session", err: &pgconn.PgError{Code: "57P01"}, want: true},
		{name: "server crash shutdown", err: fmt.Errorf("begin: %w", &pgconn.PgError{Code: "57P02"}), want: true},
		{name: "connection failure", err: &pgconn.PgError{Code: "08006"}, want: true},
		{name: "bad connection", err: driver.ErrBadConn, want: true},
		{name: "serialization failure", err: &pgconn.PgError{Code: "40001"}, want: false},
		{name: "plain error", err: errors.New("boom"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := connectionLost(tt.err); got != tt.want {
				t.Errorf("connectionLost(%v): got %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	lite := sqliteErrors(t)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "plain error", err: errors.New("boom"), want: false},
		{name: "context cancelled", err: context.Canceled, want: false},
		{name: "postgres serialization failure", err: &pgconn.PgError{Code: "40001"}, want: true},
		{name: "postgres deadlock", err: &pgconn.PgError{Code: "40P01"}, want: true},
		{name: "wrapped postgres deadlock", err: fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40P01"}), want: true},
		{name: "postgres unique violation", err: &pgconn.PgError{Code: "23505"}, want: false},
		{name: "sqlite busy", err: lite["busy"], want: true},
		{name: "wrapped sqlite busy", err: fmt.Errorf("begin: %w", lite["busy"]), want: true},
		{name: "sqlite unique", err: lite["unique"], want: false},
		{name: "sqlite syntax", err: lite["syntax"], want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retryable(tt.err); got != tt.want {
				t.Errorf("retryable(%v): got %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}
