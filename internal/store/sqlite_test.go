package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSQLiteConcurrentWriters writes from 20 goroutines at once, single
// statements and multi-statement transactions mixed with reads, and
// checks that none of them fails, "database is locked" in particular.
func TestSQLiteConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestDB(t, Config{DataDir: t.TempDir(), Now: time.Now})
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	const writers, rounds = 20, 5
	errs := make(chan error, writers*rounds*4)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				name := fmt.Sprintf("w%d-r%d", w, r)
				if _, err := db.CreateSource(ctx, Source{Name: name, Kind: SourceLocal, Location: "/" + name}); err != nil {
					errs <- fmt.Errorf("create source %s: %w", name, err)
				}
				run, err := db.CreateRun(ctx, testRun(testJob("a", []string{"linux"}), testJob("b", nil, "a")))
				if err != nil {
					errs <- fmt.Errorf("create run %s: %w", name, err)
					continue
				}
				err = db.Tx(ctx, func(tx *Tx) error {
					if _, err := tx.ApplyJobMessage(ctx, run.Jobs[0].ID, 1); err != nil {
						return err
					}
					_, err := tx.UpdateJobStatus(ctx, JobTransition{ID: run.Jobs[0].ID, From: []JobStatus{JobQueued}, To: JobRunning})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("tx %s: %w", name, err)
				}
				if _, err := db.ListRuns(ctx, RunFilter{Limit: 5}); err != nil {
					errs <- fmt.Errorf("list runs %s: %w", name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if strings.Contains(err.Error(), "locked") || retryable(err) {
			t.Errorf("got %v, want no lock contention", err)
		} else {
			t.Errorf("got %v, want no error", err)
		}
	}
	if got, want := countRows(t, db, "runs"), writers*rounds; got != want {
		t.Errorf("got %d runs, want %d", got, want)
	}
}

func TestSQLiteSettings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data", "nested")
	db := openTestDB(t, Config{DataDir: dir})

	info, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("stat data dir: %v", err)
	}
	if got := info.Mode().Perm(); got != 0o700 {
		t.Errorf("got data dir mode %o, want 700", got)
	}
	if _, err := os.Stat(filepath.Join(dir, SQLiteFile)); err != nil {
		t.Errorf("stat database file: %v", err)
	}

	tests := []struct {
		pragma string
		want   string
	}{
		{pragma: "journal_mode", want: "wal"},
		{pragma: "synchronous", want: "2"}, // FULL
		{pragma: "foreign_keys", want: "1"},
		{pragma: "busy_timeout", want: "5000"},
	}
	for _, tt := range tests {
		t.Run(tt.pragma, func(t *testing.T) {
			t.Parallel()
			var got string
			if err := db.write.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatalf("read pragma: %v", err)
			}
			if got != tt.want {
				t.Errorf("PRAGMA %s on the write connection: got %q, want %q", tt.pragma, got, tt.want)
			}
		})
	}
	t.Run("readers cannot write", func(t *testing.T) {
		t.Parallel()
		if _, err := db.read.ExecContext(ctx, "CREATE TABLE nope (x INTEGER)"); err == nil {
			t.Errorf("create table on a read connection: got no error, want one")
		}
	})
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	first, err := Open(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := first.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if _, err := first.CreateSource(ctx, Source{Name: "kept", Kind: SourceLocal, Location: "/x"}); err != nil {
		t.Fatalf("create source: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	second := openTestDB(t, Config{DataDir: dir})
	status, err := second.MigrationStatus(ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if !status.UpToDate() {
		t.Errorf("got status %v after reopening, want up to date", status)
	}
	sources, err := second.ListSources(ctx)
	if err != nil {
		t.Fatalf("list sources: %v", err)
	}
	if diff := cmp.Diff([]string{"kept"}, sourceNames(sources)); diff != "" {
		t.Errorf("sources after reopening (-want +got):\n%s", diff)
	}
}

// TestTxNestedWriteThroughDBWouldBlock documents why Tx's doc says to use
// tx inside fn: on SQLite the transaction holds the only write connection.
func TestTxNestedWriteThroughDBWouldBlock(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, Config{DataDir: t.TempDir()})
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	err := db.Tx(t.Context(), func(tx *Tx) error {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := db.CreateSource(ctx, Source{Name: "x", Kind: SourceLocal, Location: "/x"})
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write through db inside Tx: got %v, want it to wait until its context ends", err)
	}
}

// TestSQLiteHealthChecksDoNotWaitForWrites runs /readyz's calls while a
// write transaction holds the only write connection.
func TestSQLiteHealthChecksDoNotWaitForWrites(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, Config{DataDir: t.TempDir()})
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	err := db.Tx(t.Context(), func(tx *Tx) error {
		if _, err := tx.CreateSource(t.Context(), Source{Name: "x", Kind: SourceLocal, Location: "/x"}); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		status, err := db.MigrationStatus(ctx)
		if err != nil {
			return fmt.Errorf("migration status: %w", err)
		}
		if !status.UpToDate() {
			return fmt.Errorf("got status %v, want up to date", status)
		}
		return nil
	})
	if err != nil {
		t.Errorf("health checks inside a write transaction: %v", err)
	}
}

// TestSQLiteFilesOwnerOnly checks that kici.db and the -wal and -shm files
// SQLite makes beside it are readable by their owner only, whether the
// database is new or an existing one was left group- and world-readable.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prepare runs on the empty data dir before the database opens.
		prepare func(t *testing.T, dir string)
	}{
		{name: "new database", prepare: func(*testing.T, string) {}},
		{name: "existing world-readable database", prepare: func(t *testing.T, dir string) {
			// Made by an older kici: a database file and a WAL of mode 0644.
			db := openTestDB(t, Config{DataDir: dir})
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{SQLiteFile, SQLiteFile + "-wal"} {
				p := filepath.Join(dir, f)
				f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.prepare(t, dir)
			db := openTestDB(t, Config{DataDir: dir})
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if _, err := db.PutAgentDrain(t.Context(), AgentDrain{AgentID: "a"}); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{SQLiteFile, SQLiteFile + "-wal", SQLiteFile + "-shm"} {
				fi, err := os.Stat(filepath.Join(dir, f))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if got := fi.Mode().Perm(); got&0o077 != 0 {
					t.Errorf("%s: got mode %s, want no group or other bits", f, got)
				}
			}
		})
	}
}
