package store

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
	"github.com/kici-dev/kici/internal/workflow"
)

// testNow is the store clock of every test database, so stamps are
// predictable and expiry tests need no waiting.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// engine is one database engine the store runs on.
type engine struct {
	name string
	// config returns the configuration of a fresh, empty database.
	config func(t *testing.T) Config
}

var engines = []engine{
	{name: "sqlite", config: func(t *testing.T) Config {
		return Config{DataDir: t.TempDir()}
	}},
	{name: "postgres", config: func(t *testing.T) Config {
		// Few connections per database: many tests, in several packages,
		// share one server and its max_connections (100 by default).
		return Config{DatabaseURL: testsvc.PostgresURL(t), MaxConns: 4}
	}},
}

// forEachEngine runs fn, in parallel, once on a migrated SQLite database
// and once on a migrated PostgreSQL schema (skipped without
// KICI_TEST_DATABASE_URL, or failed if KICI_TEST_REQUIRE_SERVICES=1).
func forEachEngine(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := openTestDB(t, e.config(t))
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			fn(t, db)
		})
	}
}

// openTestDB opens cfg with the test clock and a logger writing to the
// test's log, and closes the database when the test ends.
func openTestDB(t *testing.T, cfg Config) *DB {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	db, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// testJob returns a compiled job named name that runs on labels, with two
// steps, needing the jobs in needs to succeed.
func testJob(name string, labels []string, needs ...string) workflow.Job {
	j := workflow.Job{
		Name:   name,
		Base:   name,
		RunsOn: labels,
		Steps: []workflow.Step{
			{Name: "build", Run: "make"},
			{Name: "test", Run: "make test"},
		},
	}
	for _, n := range needs {
		j.Needs = append(j.Needs, workflow.Need{Job: n, On: []string{workflow.NeedSuccess}})
	}
	return j
}

// testRun returns a NewRun of workflow "ci" of source "repo" with the given
// jobs; the jobs without needs are enqueued.
func testRun(jobs ...workflow.Job) NewRun {
	nr := NewRun{
		Source:       "repo",
		Workflow:     "ci",
		WorkflowFile: ".kici/workflows/ci.yml",
		Event:        json.RawMessage(`{"kind":"push","ref":"refs/heads/main"}`),
		EventKind:    "push",
		Ref:          "refs/heads/main",
		SHA:          "0123456789abcdef0123456789abcdef01234567",
		Plan:         workflow.Workflow{Name: "ci", File: ".kici/workflows/ci.yml", Jobs: jobs},
	}
	for _, j := range jobs {
		status := JobWaiting
		if len(j.Needs) == 0 {
			status = JobQueued
		}
		nr.Jobs = append(nr.Jobs, NewJob{Spec: j, Status: status, Enqueue: len(j.Needs) == 0})
	}
	return nr
}

// createTestRun creates testRun(jobs...) and returns it.
func createTestRun(t *testing.T, db *DB, jobs ...workflow.Job) Run {
	t.Helper()
	run, err := db.CreateRun(t.Context(), testRun(jobs...))
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return run
}

// countRows returns the number of rows in table.
func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.queryRow(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count rows of %s: %v", table, err)
	}
	return n
}
