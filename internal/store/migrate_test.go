package store

import (
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMigrateEmptyDatabaseToHead(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := openTestDB(t, e.config(t))
			files, err := fs.ReadDir(migrationsFS, "migrations/"+db.Dialect())
			if err != nil {
				t.Fatalf("read migrations: %v", err)
			}
			head := int64(len(files))
			var all []int64
			for v := int64(1); v <= head; v++ {
				all = append(all, v)
			}

			before, err := db.MigrationStatus(ctx)
			if err != nil {
				t.Fatalf("status before: %v", err)
			}
			if diff := cmp.Diff(MigrationStatus{Current: 0, Head: head, Pending: all}, before); diff != "" {
				t.Errorf("status before migrating (-want +got):\n%s", diff)
			}
			if before.UpToDate() {
				t.Errorf("got UpToDate() = true before migrating, want false")
			}

			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			after, err := db.MigrationStatus(ctx)
			if err != nil {
				t.Fatalf("status after: %v", err)
			}
			if diff := cmp.Diff(MigrationStatus{Current: head, Head: head}, after); diff != "" {
				t.Errorf("status after migrating (-want +got):\n%s", diff)
			}
			if !after.UpToDate() {
				t.Errorf("got UpToDate() = false after migrating, want true")
			}

			// Migrating again changes nothing.
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("migrate again: %v", err)
			}
			for _, table := range []string{"sources", "runs", "jobs", "steps", "job_needs", "dispatch_queue",
				"webhook_events", "delivery_dedup", "agent_tokens", "job_events", "admin_tokens", "secrets", "secret_key_check", "audit_log"} {
				if got := countRows(t, db, table); got != 0 {
					t.Errorf("got %d rows in %s, want 0", got, table)
				}
			}
		})
	}
}

// TestMigrationFilesMatch checks the migration rule: both dialects have the
// same numbered files, 1, 2, 3, … with no gap, each with an Up and a Down.
func TestMigrationFilesMatch(t *testing.T) {
	t.Parallel()
	names := map[string][]string{}
	for _, d := range []dialect{sqliteDialect, postgresDialect} {
		files, err := fs.ReadDir(migrationsFS, "migrations/"+d.name)
		if err != nil {
			t.Fatalf("read %s migrations: %v", d.name, err)
		}
		for i, f := range files {
			names[d.name] = append(names[d.name], f.Name())
			version, _, ok := strings.Cut(f.Name(), "_")
			if n, err := strconv.Atoi(version); !ok || err != nil || n != i+1 {
				t.Errorf("%s migration %q: got version %q, want %05d", d.name, f.Name(), version, i+1)
			}
			body, err := fs.ReadFile(migrationsFS, path.Join("migrations", d.name, f.Name()))
			if err != nil {
				t.Fatalf("read %s: %v", f.Name(), err)
			}
			for _, mark := range []string{"-- +goose Up", "-- +goose Down"} {
				if !strings.Contains(string(body), mark) {
					t.Errorf("%s migration %q: got no %q section, want one", d.name, f.Name(), mark)
				}
			}
		}
	}
	if diff := cmp.Diff(names["sqlite"], names["postgres"]); diff != "" {
		t.Errorf("migration files differ between dialects (-sqlite +postgres):\n%s", diff)
	}
}

// TestForkPolicyMigrationKeepsRuns migrates to 00021, writes a source and
// a run with its jobs, then applies 00022 (which rebuilds the runs table on
// SQLite): the run, its jobs and steps must all survive, the source reads
// as fork policy approve, and a run may then be awaiting_approval. Going
// down again cancels the awaiting run and keeps the rest.
func TestForkPolicyMigrationKeepsRuns(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := openTestDB(t, e.config(t))
			p, err := db.migrationProvider()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 21); err != nil {
				t.Fatalf("migrate to 21: %v", err)
			}
			if _, err := db.exec(ctx, "INSERT INTO sources (name, kind, location, webhook_secrets, created_at) VALUES ('old', 'local', '/x', '[]', ?)", timeArg(testNow)); err != nil {
				t.Fatalf("insert source at 21: %v", err)
			}
			// A run as a binary of schema 21 wrote it (today's CreateRun
			// writes columns added since).
			runID := insertRunAt21(t, db)
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("migrate to head: %v", err)
			}
			got, err := db.GetRun(ctx, runID)
			if err != nil {
				t.Fatalf("get run after 00022: %v", err)
			}
			if len(got.Jobs) != 2 || len(got.Jobs[0].Steps) != 2 || got.Status != RunPending {
				t.Errorf("after 00022: got run %s with %d jobs (status %s), want pending with 2 jobs of 2 steps", got.ID, len(got.Jobs), got.Status)
			}
			if n := countRows(t, db, "dispatch_queue"); n != 1 {
				t.Errorf("after 00022: got %d queue rows, want 1 (build's)", n)
			}
			src, err := db.GetSource(ctx, "old")
			if err != nil {
				t.Fatalf("get source after 00022: %v", err)
			}
			if src.ForkPullRequests != ForkApprove {
				t.Errorf("source added before 00022: got fork policy %q, want %q", src.ForkPullRequests, ForkApprove)
			}
			nr := testRun(testJob("build", []string{"linux"}))
			nr.Status, nr.Error, nr.Jobs[0].Status, nr.Jobs[0].Enqueue = RunAwaitingApproval, "awaiting approval", JobWaiting, false
			awaiting, err := db.CreateRun(ctx, nr)
			if err != nil {
				t.Fatalf("create awaiting run: %v", err)
			}
			// Down to 21, through every later migration, so that the test
			// holds as migrations are added after 00022.
			if _, err := p.DownTo(ctx, 21); err != nil {
				t.Fatalf("migrate down to 21: %v", err)
			}
			// Read as a binary of schema 21 would.
			var status string
			if err := db.queryRow(ctx, "SELECT status FROM runs WHERE id = ?", awaiting.ID).Scan(&status); err != nil || status != string(RunCancelled) {
				t.Errorf("awaiting run after going down: got %s (%v), want cancelled", status, err)
			}
			var jobs int
			if err := db.queryRow(ctx, "SELECT COUNT(*) FROM jobs WHERE run_id = ?", runID).Scan(&jobs); err != nil || jobs != 2 {
				t.Errorf("run after going down: got %d jobs (%v), want 2", jobs, err)
			}
		})
	}
}

// insertRunAt21 writes, with the columns of schema version 21, a run of
// two jobs of two steps each: build, queued (with its queue row), and
// test, which needs build. It returns the run's id.
func insertRunAt21(t *testing.T, db *DB) string {
	t.Helper()
	now := timeArg(testNow)
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO runs (id, source, workflow, workflow_file, event, event_kind, ref, sha, status, plan, created_at)
		  VALUES ('run-21', 'repo', 'ci', '.kici/workflows/ci.yml', '{"kind":"push"}', 'push', 'refs/heads/main', 'abc', 'pending', '{}', ?)`, []any{now}},
		{`INSERT INTO jobs (id, run_id, name, status, runs_on, spec, attempt, last_seq, created_at)
		  VALUES ('job-build', 'run-21', 'build', 'queued', '["linux"]', '{"name":"build"}', 0, 0, ?),
		         ('job-test', 'run-21', 'test', 'waiting', '["linux"]', '{"name":"test"}', 0, 0, ?)`, []any{now, now}},
		{`INSERT INTO steps (job_id, idx, name, status) VALUES ('job-build', 0, 'build', 'pending'), ('job-build', 1, 'test', 'pending'),
		  ('job-test', 0, 'build', 'pending'), ('job-test', 1, 'test', 'pending')`, nil},
		{`INSERT INTO job_needs (job_id, needs_job_id, run_on) VALUES ('job-test', 'job-build', '["success"]')`, nil},
		{`INSERT INTO dispatch_queue (job_id, run_id, labels, status, enqueued_at, updated_at)
		  VALUES ('job-build', 'run-21', '["linux"]', 'pending', ?, ?)`, []any{now, now}},
	} {
		if _, err := db.exec(t.Context(), st.q, st.args...); err != nil {
			t.Fatalf("write a run at schema 21: %v", err)
		}
	}
	return "run-21"
}
