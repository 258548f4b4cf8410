package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/kici-dev/kici/internal/testsvc"
)

// TestTransactionsOutliveTerminatedConnections (PostgreSQL): the server
// ends the connection a transaction is using, mid-transaction (an
// administrator's pg_terminate_backend, a restart). Nothing was committed,
// so a read transaction and a write transaction each run again on a fresh
// connection, and the caller sees neither the fault nor a double write.
func TestTransactionsOutliveTerminatedConnections(t *testing.T) {
	t.Parallel()
	base := testsvc.PostgresURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	db, err := Open(ctx, Config{DatabaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })

	// killOwnBackend has the server end the connection tx runs on, and
	// waits until that backend is gone.
	killOwnBackend := func(tx *Tx) {
		t.Helper()
		var pid int
		if err := tx.queryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if err := admin.QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminate backend %d: %t, %v", pid, ok, err)
		}
		for {
			var left int
			if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	reads := 0
	err = db.readTx(ctx, func(tx *Tx) error {
		reads++
		if reads == 1 {
			killOwnBackend(tx)
		}
		_, err := tx.GetRun(ctx, "no-such-run")
		return err
	})
	if !errors.Is(err, ErrNotFound) || reads != 2 {
		t.Fatalf("read transaction: got %v after %d attempts, want ErrNotFound after 2", err, reads)
	}

	writes := 0
	err = db.Tx(ctx, func(tx *Tx) error {
		writes++
		if writes == 1 {
			killOwnBackend(tx)
		}
		_, err := tx.CreateSource(ctx, Source{Name: fmt.Sprintf("written-on-attempt-%d", writes), Kind: SourceLocal, Location: "/src"})
		return err
	})
	if err != nil || writes != 2 {
		t.Fatalf("write transaction: got %v after %d attempts, want success after 2", err, writes)
	}
	sources, err := db.ListSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) != 1 || sources[0].Name != "written-on-attempt-2" {
		t.Fatalf("sources: got %+v, want only the one written on attempt 2", sources)
	}
}

func TestLostBeforeCommit(t *testing.T) {
	t.Parallel()
	terminated := &pgconn.PgError{Code: "57P01"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a statement on a terminated connection", fmt.Errorf("create source: %w", terminated), true},
		{"a begin on a broken connection", fmt.Errorf("begin transaction: %w", &pgconn.PgError{Code: "08006"}), true},
		{"a commit on a terminated connection", &commitError{err: terminated}, false},
		{"a constraint violation", &pgconn.PgError{Code: "23505"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lostBeforeCommit(tt.err); got != tt.want {
				t.Errorf("lostBeforeCommit(%v): got %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}
