package store

import (
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// The benchmarks in this file time the store calls every agent message
// and every dispatch make, on both engines:
//
//	go test -run '^$' -bench . -benchmem ./internal/store/
//
// The PostgreSQL ones need KICI_TEST_DATABASE_URL. Besides the wall time,
// dominated by the commit's fsync, each reports cpu-ns/op: the CPU this
// process (the orchestrator's share, SQLite included) spent per operation.

// forEachEngineB runs fn as one sub-benchmark per engine, each with a
// freshly migrated database holding one run of one queued job, whose ID it
// passes on: "prepared" with the store's statement cache (stmtCache) on,
// "unprepared" with it off, whatever Open chose for the engine (on for
// SQLite, off for PostgreSQL, where pgx caches statements itself), to
// measure what it saves.
func forEachEngineB(b *testing.B, fn func(b *testing.B, db *DB, jobID string)) {
	for _, e := range []struct {
		name   string
		config func(b *testing.B) Config
	}{
		{"sqlite", func(b *testing.B) Config { return Config{DataDir: b.TempDir()} }},
		{"postgres", func(b *testing.B) Config { return Config{DatabaseURL: testsvc.PostgresURL(b), MaxConns: 4} }},
	} {
		for _, prepared := range []bool{true, false} {
			name := e.name + "/prepared"
			if !prepared {
				name = e.name + "/unprepared"
			}
			b.Run(name, func(b *testing.B) {
				db, err := Open(b.Context(), e.config(b))
				if err != nil {
					b.Fatalf("open: %v", err)
				}
				b.Cleanup(func() { db.Close() })
				db.wstmts, db.rstmts = nil, nil
				if prepared {
					db.wstmts = newStmtCache(db.write, db.d)
					db.rstmts = db.wstmts
					if db.read != db.write {
						db.rstmts = newStmtCache(db.read, db.d)
					}
				}
				db.queries.ws, db.queries.rs = db.wstmts, db.rstmts
				if err := db.Migrate(b.Context()); err != nil {
					b.Fatalf("migrate: %v", err)
				}
				run, err := db.CreateRun(b.Context(), testRun(testJob("build", []string{"linux"})))
				if err != nil {
					b.Fatalf("create run: %v", err)
				}
				cpu := processCPU(b)
				fn(b, db, run.Jobs[0].ID)
				if b.N > 0 {
					b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkApplyStepStatus is what dispatch.Apply does for a step report:
// read the job, record the message's seq, update the step, in one
// transaction.
func BenchmarkApplyStepStatus(b *testing.B) {
	forEachEngineB(b, func(b *testing.B, db *DB, jobID string) {
		ctx := b.Context()
		seq := int64(0)
		now := testNow
		for b.Loop() {
			seq++
			err := db.Tx(ctx, func(tx *Tx) error {
				if _, err := tx.GetJobHead(ctx, jobID); err != nil {
					return err
				}
				if fresh, err := tx.ApplyJobMessage(ctx, jobID, seq); err != nil || !fresh {
					b.Fatalf("apply message %d: %t, %v", seq, fresh, err)
				}
				changed, err := tx.UpdateStepStatus(ctx, StepTransition{JobID: jobID, Index: 0,
					From: []StepStatus{StepPending, StepRunning}, To: StepRunning, StartedAt: &now})
				if err != nil || !changed {
					b.Fatalf("update step: %t, %v", changed, err)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkApplyJobStatus is dispatch.Apply for a job's running report:
// read the job, record the seq, ack, update the job and its run.
func BenchmarkApplyJobStatus(b *testing.B) {
	forEachEngineB(b, func(b *testing.B, db *DB, jobID string) {
		ctx := b.Context()
		seq := int64(0)
		now := testNow
		for b.Loop() {
			seq++
			err := db.Tx(ctx, func(tx *Tx) error {
				job, err := tx.GetJobHead(ctx, jobID)
				if err != nil {
					return err
				}
				if fresh, err := tx.ApplyJobMessage(ctx, jobID, seq); err != nil || !fresh {
					b.Fatalf("apply message %d: %t, %v", seq, fresh, err)
				}
				if _, err := tx.Ack(ctx, jobID, "agent-1"); err != nil {
					return err
				}
				changed, err := tx.UpdateJobStatus(ctx, JobTransition{ID: jobID,
					From: []JobStatus{JobQueued, JobRunning}, To: JobRunning, StartedAt: &now})
				if err != nil || !changed {
					b.Fatalf("update job: %t, %v", changed, err)
				}
				_, err = tx.UpdateRunStatus(ctx, RunTransition{ID: job.RunID,
					From: []RunStatus{RunPending, RunRunning}, To: RunRunning, StartedAt: &now})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClaimRequeue claims the queued job for an agent, as a dispatch
// does, and puts it back, so the next round finds it again.
func BenchmarkClaimRequeue(b *testing.B) {
	forEachEngineB(b, func(b *testing.B, db *DB, jobID string) {
		ctx := b.Context()
		deadline := testNow.Add(time.Minute)
		labels := []string{"linux", "x64"}
		for b.Loop() {
			e, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-1", labels, deadline)
			if err != nil || !ok || e.JobID != jobID {
				b.Fatalf("claim: got %q, %t, %v, want %q", e.JobID, ok, err, jobID)
			}
			if _, ok, err := db.Requeue(ctx, RequeueRequest{JobID: jobID, AgentID: "agent-1", Reason: "bench"}); err != nil || !ok {
				b.Fatalf("requeue: %t, %v", ok, err)
			}
		}
	})
}

// BenchmarkGetJobHead is the read of every log chunk, outside a
// transaction.
func BenchmarkGetJobHead(b *testing.B) {
	forEachEngineB(b, func(b *testing.B, db *DB, jobID string) {
		ctx := b.Context()
		for b.Loop() {
			if _, err := db.GetJobHead(ctx, jobID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// processCPU returns the user and system CPU time this process has used,
// in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
