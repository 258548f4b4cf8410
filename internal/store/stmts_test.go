package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// jobHeadQuery is the query of GetJobHead, as written.
const jobHeadQuery = "SELECT " + jobColumns + " FROM jobs WHERE id = ?"

// applyQuery is the query of ApplyJobMessage, as written.
const applyQuery = "UPDATE jobs SET last_seq = ? WHERE id = ? AND last_seq < ?"

// TestStmtCacheReusesStatements (SQLite): a query is prepared once and the
// same statement serves every later call; one first met inside a
// transaction is prepared when the transaction ends, never from inside it
// (which would wait for the write connection the transaction holds).
func TestStmtCacheReusesStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestDB(t, Config{DataDir: t.TempDir()})
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if db.wstmts == nil || db.rstmts == nil || db.wstmts == db.rstmts {
		t.Fatalf("caches: got write %p, read %p, want two distinct caches", db.wstmts, db.rstmts)
	}
	run := createTestRun(t, db, testJob("build", []string{"linux"}))
	jobID := run.Jobs[0].ID

	if _, err := db.GetJobHead(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	first := db.rstmts.lookup(jobHeadQuery)
	if first == nil {
		t.Fatal("GetJobHead: its statement is not cached")
	}
	n := db.rstmts.len()
	for range 3 {
		if _, err := db.GetJobHead(ctx, jobID); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.rstmts.lookup(jobHeadQuery); got != first {
		t.Errorf("GetJobHead again: got statement %p, want the cached %p", got, first)
	}
	if got := db.rstmts.len(); got != n {
		t.Errorf("read cache after repeated calls: got %d statements, want %d", got, n)
	}

	if db.wstmts.lookup(applyQuery) != nil {
		t.Fatal("ApplyJobMessage's statement is cached before its first call")
	}
	for seq := int64(1); seq <= 3; seq++ {
		err := db.Tx(ctx, func(tx *Tx) error {
			if seq == 1 && db.wstmts.lookup(applyQuery) != nil {
				t.Error("a statement was prepared from inside the transaction that first ran it")
			}
			fresh, err := tx.ApplyJobMessage(ctx, jobID, seq)
			if err == nil && !fresh {
				err = fmt.Errorf("message %d: not fresh", seq)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if seq == 1 {
			first = db.wstmts.lookup(applyQuery)
			if first == nil {
				t.Fatal("ApplyJobMessage: its statement is not cached after the transaction")
			}
			n = db.wstmts.len()
			continue
		}
		if got := db.wstmts.lookup(applyQuery); got != first {
			t.Errorf("transaction %d: got statement %p, want the cached %p", seq, got, first)
		}
		if got := db.wstmts.len(); got != n {
			t.Errorf("write cache after transaction %d: got %d statements, want %d", seq, got, n)
		}
	}
	job, err := db.GetJobHead(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.LastSeq != 3 {
		t.Errorf("last seq through the cached statement: got %d, want 3", job.LastSeq)
	}
}

// TestStmtCacheIsBounded (SQLite): queries whose text varies with their
// input are not cached, and past maxCachedStmts queries still run, without
// being cached.
func TestStmtCacheIsBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestDB(t, Config{DataDir: t.TempDir()})
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Creating a run inserts its jobs and steps with multi-row INSERTs.
	createTestRun(t, db, testJob("a", nil), testJob("b", nil), testJob("c", nil))
	db.wstmts.stmts.Range(func(k, _ any) bool {
		if strings.Contains(k.(string), "), (") {
			t.Errorf("a multi-row INSERT is cached: %.80q", k)
		}
		return true
	})
	if _, err := db.uncached().exec(ctx, "DELETE FROM runs WHERE id IN (?, ?)", "x", "y"); err != nil {
		t.Fatal(err)
	}
	if db.wstmts.lookup("DELETE FROM runs WHERE id IN (?, ?)") != nil {
		t.Error("an uncached query was cached")
	}

	before := db.rstmts.len()
	for i := range maxCachedStmts + 10 {
		var got int
		if err := db.queryRow(ctx, fmt.Sprintf("SELECT %d + ?", i), 1).Scan(&got); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if got != i+1 {
			t.Fatalf("query %d: got %d, want %d", i, got, i+1)
		}
	}
	if got := db.rstmts.len(); got != maxCachedStmts {
		t.Errorf("read cache after %d distinct queries (%d cached before): got %d statements, want the bound %d",
			maxCachedStmts+10, before, got, maxCachedStmts)
	}
}

// TestCloseClosesStatements (SQLite): DB.Close closes every cached
// statement.
func TestCloseClosesStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(ctx, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetJobHead(ctx, "no-such-job"); err == nil {
		t.Fatal("GetJobHead of a missing job: got no error")
	}
	if err := db.HeartbeatInstance(ctx, "no-such-instance", time.Minute); err == nil {
		t.Fatal("HeartbeatInstance of a missing instance: got no error")
	}
	var stmts []*sql.Stmt
	for _, c := range []*stmtCache{db.rstmts, db.wstmts} {
		c.stmts.Range(func(_, v any) bool {
			stmts = append(stmts, v.(*sql.Stmt))
			return true
		})
	}
	if len(stmts) < 2 {
		t.Fatalf("cached statements: got %d, want at least 2", len(stmts))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range stmts {
		if _, err := s.ExecContext(ctx, "x"); err == nil || !strings.Contains(err.Error(), "statement is closed") {
			t.Errorf("statement %d after Close: got %v, want statement is closed", i, err)
		}
	}
	if n := db.rstmts.len() + db.wstmts.len(); n != 0 {
		t.Errorf("caches after Close: got %d statements, want 0", n)
	}
}

// TestPostgresStatementsOutliveTerminatedConnections (PostgreSQL): a hot
// query is prepared on the connection it runs on (by pgx's own statement
// cache, or by a stmtCache), and when the server ends that connection the
// transaction runs again on a fresh one, where the statement is prepared
// again without the caller seeing the fault.
func TestPostgresStatementsOutliveTerminatedConnections(t *testing.T) {
	t.Parallel()
	base := testsvc.PostgresURL(t)
	for _, stmtCache := range []bool{false, true} {
		t.Run(fmt.Sprintf("stmtCache=%t", stmtCache), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			db := openTestDB(t, Config{DatabaseURL: base, MaxConns: 2})
			if db.wstmts != nil {
				t.Fatal("PostgreSQL: got a stmtCache, want pgx's statement cache alone")
			}
			if stmtCache {
				db.wstmts = newStmtCache(db.write, db.d)
				db.rstmts = db.wstmts
				db.queries.ws, db.queries.rs = db.wstmts, db.rstmts
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			run := createTestRun(t, db, testJob("build", []string{"linux"}))
			jobID := run.Jobs[0].ID
			admin, err := sql.Open("pgx", base)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Close() })

			// Warm up: the statement is prepared on the pool's connection(s).
			if _, err := db.GetJobHead(ctx, jobID); err != nil {
				t.Fatal(err)
			}
			var pids []int
			attempts := 0
			err = db.Tx(ctx, func(tx *Tx) error {
				attempts++
				if _, err := tx.GetJobHead(ctx, jobID); err != nil {
					return err
				}
				var pid, prepared int
				err := tx.w.QueryRowContext(ctx,
					"SELECT pg_backend_pid(), (SELECT count(*) FROM pg_prepared_statements WHERE statement = $1)",
					db.d.rebind(jobHeadQuery)).Scan(&pid, &prepared)
				if err != nil {
					return err
				}
				pids = append(pids, pid)
				if prepared == 0 {
					t.Errorf("attempt %d: GetJobHead's statement is not prepared on backend %d", attempts, pid)
				}
				if attempts == 1 {
					terminateBackend(ctx, t, admin, pid)
					_, err := tx.GetJobHead(ctx, jobID) // on the ended connection
					return err
				}
				return nil
			})
			if err != nil || attempts != 2 {
				t.Fatalf("transaction: got %v after %d attempts, want success after 2", err, attempts)
			}
			if pids[0] == pids[1] {
				t.Errorf("backends: got %d twice, want a fresh one after the first was ended", pids[0])
			}
			if _, err := db.GetJobHead(ctx, jobID); err != nil {
				t.Errorf("GetJobHead after the transaction: %v", err)
			}
		})
	}
}

// terminateBackend has the server end backend pid and waits until it is
// gone.
func terminateBackend(ctx context.Context, t *testing.T, admin *sql.DB, pid int) {
	t.Helper()
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
		select {
		case <-ctx.Done():
			t.Fatalf("backend %d still there: %v", pid, context.Cause(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
}
