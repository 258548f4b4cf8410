package scheduler

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

func compile(t *testing.T, src string) workflow.Workflow {
	t.Helper()
	plan, err := workflow.Compile([]workflow.File{{Path: ".kici/workflows/w.yml", Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	return plan.Workflows[0]
}

// finish plays an agent: it moves a queued job through dispatched and
// running to the given end status, then advances the run.
func finish(t *testing.T, s *Scheduler, db *store.DB, runID, name string, to store.JobStatus) {
	t.Helper()
	ctx := t.Context()
	run, err := db.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var job store.Job
	for _, j := range run.Jobs {
		if j.Name == name {
			job = j
		}
	}
	if job.Status != store.JobQueued {
		t.Fatalf("job %q is %s, want queued", name, job.Status)
	}
	for _, st := range []store.JobStatus{store.JobDispatched, store.JobRunning, to} {
		ok, err := db.UpdateJobStatus(ctx, store.JobTransition{ID: job.ID, From: runstate.JobFrom(st), To: st})
		if err != nil || !ok {
			t.Fatalf("move %q to %s: %v %v", name, st, ok, err)
		}
	}
	if _, err := db.Dequeue(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(ctx, runID); err != nil {
		t.Fatal(err)
	}
}

func statuses(t *testing.T, db *store.DB, runID string) (store.RunStatus, map[string]store.JobStatus) {
	t.Helper()
	run, err := db.GetRun(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.JobStatus{}
	for _, j := range run.Jobs {
		out[j.Name] = j.Status
	}
	return run.Status, out
}

const graph = `
on: {push: {}}
jobs:
  build:
    matrix: {n: ["1", "2"]}
    steps: [{run: make}]
  test:
    needs: [build]
    steps: [{run: make test}]
  lint:
    continue-on-error: true
    steps: [{run: lint}]
  docs:
    needs: [lint]
    steps: [{run: docs}]
  deploy:
    needs: [test]
    if: event.branch == 'main'
    steps: [{run: deploy}]
  notify:
    needs: {deploy: always}
    steps: [{run: notify}]
  on-fail:
    needs: {test: failure}
    steps: [{run: page}]
`

func TestRunAdvancesThroughTheNeedsGraph(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		branch string
		play   []struct {
			job string
			to  store.JobStatus
		}
		wantRun store.RunStatus
		want    map[string]store.JobStatus
	}{
		{
			name:   "all succeed on main",
			branch: "main",
			play: []struct {
				job string
				to  store.JobStatus
			}{
				{"build (n=1)", store.JobSuccess}, {"build (n=2)", store.JobSuccess}, {"lint", store.JobFailure},
				{"docs", store.JobSuccess}, {"test", store.JobSuccess}, {"deploy", store.JobSuccess}, {"notify", store.JobSuccess},
			},
			wantRun: store.RunSuccess,
			want: map[string]store.JobStatus{
				"build (n=1)": store.JobSuccess, "build (n=2)": store.JobSuccess, "lint": store.JobFailure,
				"docs": store.JobSuccess, "test": store.JobSuccess, "deploy": store.JobSuccess,
				"notify": store.JobSuccess, "on-fail": store.JobSkipped,
			},
		},
		{
			name:   "one matrix job fails: dependants skip in cascade, failure handlers run",
			branch: "main",
			play: []struct {
				job string
				to  store.JobStatus
			}{
				{"build (n=1)", store.JobSuccess}, {"build (n=2)", store.JobFailure}, {"lint", store.JobSuccess},
				{"docs", store.JobSuccess}, {"notify", store.JobSuccess},
			},
			wantRun: store.RunFailure,
			want: map[string]store.JobStatus{
				"build (n=1)": store.JobSuccess, "build (n=2)": store.JobFailure, "lint": store.JobSuccess,
				"docs": store.JobSuccess, "test": store.JobSkipped, "deploy": store.JobSkipped,
				"notify": store.JobSuccess, "on-fail": store.JobSkipped,
			},
		},
		{
			name:   "if false skips deploy off main",
			branch: "dev",
			play: []struct {
				job string
				to  store.JobStatus
			}{
				{"build (n=1)", store.JobSuccess}, {"build (n=2)", store.JobSuccess}, {"lint", store.JobSuccess},
				{"docs", store.JobSuccess}, {"test", store.JobFailure}, {"on-fail", store.JobSuccess}, {"notify", store.JobSuccess},
			},
			wantRun: store.RunFailure,
			want: map[string]store.JobStatus{
				"build (n=1)": store.JobSuccess, "build (n=2)": store.JobSuccess, "lint": store.JobSuccess,
				"docs": store.JobSuccess, "test": store.JobFailure, "deploy": store.JobSkipped,
				"notify": store.JobSuccess, "on-fail": store.JobSuccess,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
				s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{QueueTimeout: time.Hour}, nil, nil)
				run, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: compile(t, graph), Event: trigger.PushEvent(tt.branch, "abc")})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range tt.play {
					finish(t, s, db, run.ID, p.job, p.to)
				}
				gotRun, got := statuses(t, db, run.ID)
				if gotRun != tt.wantRun {
					t.Errorf("run status: got %s, want %s", gotRun, tt.wantRun)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("job statuses (-want +got):\n%s", diff)
				}
				// Advancing a finished run again changes nothing.
				if err := s.Advance(t.Context(), run.ID); err != nil {
					t.Fatal(err)
				}
				if _, again := statuses(t, db, run.ID); !cmp.Equal(again, got) {
					t.Errorf("a second Advance changed the run: %v", cmp.Diff(got, again))
				}
			})
		})
	}
}

func TestRootJobsStartQueuedAndQueueRowsExist(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{QueueTimeout: time.Hour}, nil, nil)
		run, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: compile(t, graph), Event: trigger.PushEvent("main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		queue, err := db.ListQueue(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var queued []string
		for _, e := range queue {
			for _, j := range run.Jobs {
				if j.ID == e.JobID {
					queued = append(queued, j.Name)
				}
			}
			if e.ExpiresAt == nil {
				t.Errorf("queue row of %s has no expiry, want the queue timeout", e.JobID)
			}
		}
		want := []string{"build (n=1)", "build (n=2)", "lint"}
		if diff := cmp.Diff(want, queued); diff != "" {
			t.Errorf("queued jobs (-want +got):\n%s", diff)
		}
		if st, _ := statuses(t, db, run.ID); st != store.RunPending {
			t.Errorf("run status: got %s, want pending", st)
		}
	})
}

// TestLastJobsEndingTogetherEndTheRun: two transactions each ending one
// of a run's last two jobs at the same moment must not each leave the run
// to the other (it stayed running on PostgreSQL before advance locked the
// run row).
func TestLastJobsEndingTogetherEndTheRun(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{}, nil, nil)
		wf := compile(t, "on: {push: {}}\njobs:\n  a: {steps: [{run: x}]}\n  b: {steps: [{run: x}]}\n")
		for round := 0; round < 15; round++ {
			run, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: wf, Event: trigger.PushEvent("main", "abc")})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range run.Jobs {
				for _, st := range []store.JobStatus{store.JobDispatched, store.JobRunning} {
					if _, err := db.UpdateJobStatus(t.Context(), store.JobTransition{ID: j.ID, From: runstate.JobFrom(st), To: st}); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := make(chan struct{})
			errs := make(chan error, len(run.Jobs))
			for _, j := range run.Jobs {
				go func() {
					<-start
					errs <- db.Tx(t.Context(), func(tx *store.Tx) error {
						if _, err := tx.UpdateJobStatus(t.Context(), store.JobTransition{ID: j.ID, From: runstate.JobFrom(store.JobSuccess), To: store.JobSuccess}); err != nil {
							return err
						}
						_, err := s.AdvanceTx(t.Context(), tx, run.ID)
						return err
					})
				}()
			}
			close(start)
			for range run.Jobs {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if st, _ := statuses(t, db, run.ID); st != store.RunSuccess {
				t.Fatalf("round %d: run is %s after both jobs succeeded, want success", round, st)
			}
		}
	})
}
