package scheduler

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

func TestReusableJobs(t *testing.T) {
	t.Parallel()
	job := func(name string, status store.JobStatus, needs ...string) store.Job {
		j := store.Job{ID: "id-" + name, Name: name, Status: status}
		for _, n := range needs {
			j.Spec.Needs = append(j.Spec.Needs, workflow.Need{Job: n})
		}
		return j
	}
	tests := []struct {
		name    string
		status  store.RunStatus
		jobs    []store.Job
		want    []string // the reused jobs' names, sorted
		wantErr error
	}{
		{
			name: "a failed job, its dependants and theirs run again", status: store.RunFailure,
			jobs: []store.Job{job("a", store.JobSuccess), job("b", store.JobFailure), job("c", store.JobSuccess, "a"),
				job("d", store.JobSkipped, "b"), job("e", store.JobSkipped, "d", "c"), job("f", store.JobSkipped)},
			want: []string{"a", "c", "f"},
		},
		{
			name: "a cancelled job runs again", status: store.RunCancelled,
			jobs: []store.Job{job("a", store.JobSuccess), job("b", store.JobCancelled, "a")},
			want: []string{"a"},
		},
		{
			name: "a succeeded job downstream of a failed one runs again", status: store.RunFailure,
			jobs: []store.Job{job("lint", store.JobFailure), job("report", store.JobSuccess, "lint")},
			want: nil,
		},
		{
			name: "nothing failed", status: store.RunSuccess,
			jobs:    []store.Job{job("a", store.JobSuccess), job("b", store.JobSkipped, "a")},
			wantErr: ErrNothingFailed,
		},
		{
			name: "still running", status: store.RunRunning,
			jobs:    []store.Job{job("a", store.JobFailure), job("b", store.JobRunning)},
			wantErr: ErrRunNotEnded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reuse, err := ReusableJobs(store.Run{ID: "r1", Status: tt.status, Jobs: tt.jobs})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			var got []string
			for name, j := range reuse {
				if j.Name != name {
					t.Errorf("reuse[%q] is job %q", name, j.Name)
				}
				got = append(got, name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reused jobs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateRunReusesJobs: a rerun of the failed jobs copies a job that
// succeeded (not queued, its steps as they ended, its timeline saying
// where from), so that its dependant is queued at once; the failed job is
// queued again.
func TestCreateRunReusesJobs(t *testing.T) {
	t.Parallel()
	const src = `
on: {push: {}}
jobs:
  a:
    steps: [{run: make}]
  b:
    steps: [{run: make test}]
  c:
    needs: [a]
    steps: [{run: make docs}]
  d:
    needs: [b]
    steps: [{run: ship}]
`
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{QueueTimeout: time.Hour}, nil, nil)
		parent, err := s.CreateRun(ctx, RunInput{Source: "src", Workflow: compile(t, src), Event: trigger.PushEvent("main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		finish(t, s, db, parent.ID, "a", store.JobSuccess)
		finish(t, s, db, parent.ID, "b", store.JobFailure)
		finish(t, s, db, parent.ID, "c", store.JobSuccess)
		// finish moves jobs only: a's step succeeded too.
		zero := 0
		if _, err := db.UpdateStepStatus(ctx, store.StepTransition{JobID: parent.Jobs[0].ID, Index: 0,
			From: []store.StepStatus{store.StepPending}, To: store.StepSuccess, ExitCode: &zero}); err != nil {
			t.Fatal(err)
		}
		ended, err := db.GetRun(ctx, parent.ID)
		if err != nil || ended.Status != store.RunFailure {
			t.Fatalf("parent: %s (%v), want failure", ended.Status, err)
		}
		reuse, err := ReusableJobs(ended)
		if err != nil {
			t.Fatal(err)
		}
		child, err := s.CreateRun(ctx, RunInput{Source: "src", Workflow: ended.Plan, Event: trigger.PushEvent("main", "abc"),
			ParentRunID: ended.ID, Reuse: reuse})
		if err != nil {
			t.Fatal(err)
		}
		status, jobs := statuses(t, db, child.ID)
		want := map[string]store.JobStatus{"a": store.JobSuccess, "b": store.JobQueued, "c": store.JobSuccess, "d": store.JobWaiting}
		if diff := cmp.Diff(want, jobs); diff != "" || status != store.RunPending {
			t.Errorf("rerun: run %s, jobs (-want +got):\n%s", status, diff)
		}
		got, err := db.GetRun(ctx, child.ID)
		if err != nil {
			t.Fatal(err)
		}
		a := got.Jobs[0]
		if a.Steps[0].Status != store.StepSuccess {
			t.Errorf("reused job's step: %s, want success as in the parent", a.Steps[0].Status)
		}
		if e, err := db.GetQueueEntry(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reused job's queue row: %+v (%v), want none", e, err)
		}
		evs, err := db.ListJobEvents(ctx, a.ID)
		if err != nil || len(evs) != 1 || evs[0].Type != EventReused || !strings.Contains(evs[0].Detail, "reused from run "+ended.ID) {
			t.Errorf("reused job's timeline: %+v (%v), want one entry naming run %s", evs, err, ended.ID)
		}
		finish(t, s, db, child.ID, "b", store.JobSuccess)
		finish(t, s, db, child.ID, "d", store.JobSuccess)
		if status, _ := statuses(t, db, child.ID); status != store.RunSuccess {
			t.Errorf("rerun after b and d succeeded: %s, want success", status)
		}
	})
}
