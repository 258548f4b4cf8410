package scheduler

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
)

func newTestScheduler(t *testing.T, db *store.DB) *Scheduler {
	return New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{}, nil, nil)
}

func createRun(t *testing.T, s *Scheduler, src string) store.Run {
	t.Helper()
	run, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: compile(t, src), Event: trigger.PushEvent("main", "abc")})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func getRun(t *testing.T, db *store.DB, id string) store.Run {
	t.Helper()
	run, err := db.GetRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// start plays an agent taking a queued job: dispatched, then running.
func start(t *testing.T, db *store.DB, runID, name string) {
	t.Helper()
	for _, j := range getRun(t, db, runID).Jobs {
		if j.Name != name {
			continue
		}
		for _, st := range []store.JobStatus{store.JobDispatched, store.JobRunning} {
			if ok, err := db.UpdateJobStatus(t.Context(), store.JobTransition{ID: j.ID, From: runstate.JobFrom(st), To: st}); err != nil || !ok {
				t.Fatalf("move %q to %s: %v %v", name, st, ok, err)
			}
		}
		return
	}
	t.Fatalf("run %s has no job %q", runID, name)
}

// settle does what RunConcurrency's loop does after the events published
// so far.
func settle(t *testing.T, s *Scheduler) {
	t.Helper()
	if err := s.settleNoted(t.Context()); err != nil {
		t.Fatal(err)
	}
}

const deployOne = `
on: {push: {}}
concurrency: "deploy-${{ event.branch }}"
jobs:
  deploy: {steps: [{run: ./deploy}]}
`

const deployCancel = `
on: {push: {}}
concurrency: {group: "deploy-${{ event.branch }}", cancel-in-progress: true}
jobs:
  deploy: {steps: [{run: ./deploy}]}
`

func TestWaitingRunStartsWhenTheFirstEnds(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first := createRun(t, s, deployOne)
		second := createRun(t, s, deployOne)
		_, jobs := statuses(t, db, second.ID)
		if jobs["deploy"] != store.JobWaiting {
			t.Fatalf("job of the second run: got %s, want waiting", jobs["deploy"])
		}
		want := fmt.Sprintf(`waiting for concurrency group "deploy-main" (run %s is in it)`, first.ID)
		if got := getRun(t, db, second.ID).Error; got != want || second.Error != want {
			t.Errorf("error of the waiting run: got %q (returned %q), want %q", got, second.Error, want)
		}
		// Another source's group of the same name is another group.
		other, err := s.CreateRun(t.Context(), RunInput{Source: "other", Workflow: compile(t, deployOne), Event: trigger.PushEvent("main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		if _, jobs := statuses(t, db, other.ID); jobs["deploy"] != store.JobQueued {
			t.Errorf("job of another source's run: got %s, want queued", jobs["deploy"])
		}

		settle(t, s)
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobWaiting {
			t.Fatalf("second run's job before the first ended: got %s, want waiting", jobs["deploy"])
		}
		finish(t, s, db, first.ID, "deploy", store.JobSuccess)
		settle(t, s)
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobQueued {
			t.Fatalf("second run's job after the first ended: got %s, want queued", jobs["deploy"])
		}
		if got := getRun(t, db, second.ID).Error; got != "" {
			t.Errorf("error of the started run: got %q, want none", got)
		}
	})
}

// TestWaitingRunStartsAfterACrash: the orchestrator that ended the first
// run stopped before starting the second; a sweep (here by a scheduler
// that saw none of it) starts it.
func TestWaitingRunStartsAfterACrash(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first := createRun(t, s, deployOne)
		second := createRun(t, s, deployOne)
		finish(t, s, db, first.ID, "deploy", store.JobSuccess)
		// s's notes die with it.
		restarted := newTestScheduler(t, db)
		if err := restarted.SweepConcurrency(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobQueued {
			t.Fatalf("second run's job after the sweep: got %s, want queued", jobs["deploy"])
		}
	})
}

func TestCancelInProgressCancelsTheOlderRun(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first := createRun(t, s, deployCancel)
		start(t, db, first.ID, "deploy")
		second := createRun(t, s, deployCancel)
		got := getRun(t, db, first.ID)
		if got.Status != store.RunCancelled {
			t.Fatalf("first run: got %s, want cancelled", got.Status)
		}
		for _, text := range []string{got.Error, got.Jobs[0].Error} {
			if !strings.Contains(text, second.ID) || !strings.Contains(text, `"deploy-main"`) {
				t.Errorf("first run's error %q: want it to name run %s and the group", text, second.ID)
			}
		}
		settle(t, s)
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobQueued {
			t.Fatalf("second run's job: got %s, want queued once the first ended", jobs["deploy"])
		}
	})
}

func TestOnlyTheNewestWaitingRunWaits(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first := createRun(t, s, deployOne)
		second := createRun(t, s, deployOne)
		third := createRun(t, s, deployOne)
		got := getRun(t, db, second.ID)
		want := fmt.Sprintf(`superseded by run %s in concurrency group "deploy-main": of the runs waiting for the group, only the newest waits`, third.ID)
		if got.Status != store.RunCancelled || got.Error != want {
			t.Fatalf("second run: got %s %q, want cancelled %q", got.Status, got.Error, want)
		}
		if st, _ := statuses(t, db, first.ID); st != store.RunPending {
			t.Errorf("first run: got %s, want it left alone", st)
		}
		finish(t, s, db, first.ID, "deploy", store.JobSuccess)
		settle(t, s)
		if _, jobs := statuses(t, db, third.ID); jobs["deploy"] != store.JobQueued {
			t.Fatalf("third run's job: got %s, want queued", jobs["deploy"])
		}
	})
}

// testDeadline is the ack deadline of the tests' claims.
var testDeadline = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// claimAll claims queued jobs for one agent until none is left and
// returns their names.
func claimAll(t *testing.T, db *store.DB) []string {
	t.Helper()
	var names []string
	for {
		e, ok, err := db.ClaimForAgent(t.Context(), "test", "agent", nil, testDeadline)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return names
		}
		j, err := db.GetJob(t.Context(), e.JobID)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, j.RunID+"/"+j.Name)
	}
}

func TestJobGroupKeepsTheSecondJobQueued(t *testing.T) {
	t.Parallel()
	const src = `
on: {push: {}}
jobs:
  build: {steps: [{run: make}]}
  deploy:
    concurrency: "deploy-${{ event.branch }}"
    steps: [{run: ./deploy}]
`
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first, second := createRun(t, s, src), createRun(t, s, src)
		got := claimAll(t, db)
		want := []string{first.ID + "/build", first.ID + "/deploy", second.ID + "/build"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("claimed (-want +got):\n%s", diff)
		}
		_, jobs := statuses(t, db, second.ID)
		if jobs["deploy"] != store.JobQueued {
			t.Errorf("second deploy: got %s, want queued", jobs["deploy"])
		}
		deploy := getRun(t, db, second.ID).Jobs[1]
		waits, err := db.ConcurrencyWaits(t.Context(), []string{deploy.ID})
		if err != nil {
			t.Fatal(err)
		}
		why := fmt.Sprintf(`waiting for concurrency group "deploy-main" (run %s job deploy is in it)`, first.ID)
		if waits[deploy.ID] != why {
			t.Errorf("why pending: got %q, want %q", waits[deploy.ID], why)
		}
		// A third run's deploy supersedes the second's, which waits.
		third := createRun(t, s, src)
		settle(t, s)
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobCancelled {
			t.Errorf("second deploy after a third queued: got %s, want cancelled", jobs["deploy"])
		}
		if _, jobs := statuses(t, db, first.ID); jobs["deploy"] != store.JobQueued && jobs["deploy"] != store.JobDispatched {
			t.Errorf("first deploy: got %s, want it left alone", jobs["deploy"])
		}
		if _, jobs := statuses(t, db, third.ID); jobs["deploy"] != store.JobQueued {
			t.Errorf("third deploy: got %s, want queued", jobs["deploy"])
		}
	})
}

func TestJobGroupCancelInProgress(t *testing.T) {
	t.Parallel()
	const src = `
on: {push: {}}
jobs:
  deploy:
    concurrency: {group: "deploy-${{ event.branch }}", cancel-in-progress: true}
    steps: [{run: ./deploy}]
`
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		first := createRun(t, s, src)
		start(t, db, first.ID, "deploy")
		second := createRun(t, s, src)
		settle(t, s)
		got := getRun(t, db, first.ID)
		if got.Jobs[0].Status != store.JobCancelled || !strings.Contains(got.Jobs[0].Error, "cancelled by run "+second.ID+" job deploy") {
			t.Fatalf("first deploy: got %s %q, want cancelled by the second", got.Jobs[0].Status, got.Jobs[0].Error)
		}
		if _, jobs := statuses(t, db, second.ID); jobs["deploy"] != store.JobQueued {
			t.Errorf("second deploy: got %s, want queued", jobs["deploy"])
		}
	})
}

func TestFailFastCancelsTheSiblings(t *testing.T) {
	t.Parallel()
	const src = `
on: {push: {}}
jobs:
  build:
    matrix: {n: ["1", "2", "3"], fail-fast: true}
    steps: [{run: make}]
  lint: {steps: [{run: lint}]}
`
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		run := createRun(t, s, src)
		start(t, db, run.ID, "build (n=2)")
		finish(t, s, db, run.ID, "build (n=1)", store.JobFailure)
		// The dispatcher publishes the end of a job an agent reported.
		failed := getRun(t, db, run.ID).Jobs[0]
		s.Publish([]apiv1.Event{{Kind: "job", RunID: run.ID, JobID: failed.ID, Job: failed.Name, Status: string(store.JobFailure)}})
		settle(t, s)
		got := getRun(t, db, run.ID)
		want := map[string]store.JobStatus{
			"build (n=1)": store.JobFailure, "build (n=2)": store.JobCancelled, "build (n=3)": store.JobCancelled, "lint": store.JobQueued,
		}
		for _, j := range got.Jobs {
			if j.Status != want[j.Name] {
				t.Errorf("%s: got %s, want %s", j.Name, j.Status, want[j.Name])
			}
			if j.Status == store.JobCancelled && !strings.Contains(j.Error, `matrix job "build (n=1)" failed`) {
				t.Errorf("%s: error %q, want it to name the failed combination", j.Name, j.Error)
			}
		}
		// Another job of the run is not a sibling: it runs on, and the
		// run fails when it ends.
		finish(t, s, db, run.ID, "lint", store.JobSuccess)
		if st, _ := statuses(t, db, run.ID); st != store.RunFailure {
			t.Errorf("run: got %s, want failure", st)
		}
	})
}

func TestMaxParallelOneKeepsTheSecondQueued(t *testing.T) {
	t.Parallel()
	const src = `
on: {push: {}}
jobs:
  build:
    matrix: {n: ["1", "2"], max-parallel: 1}
    steps: [{run: make}]
`
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := newTestScheduler(t, db)
		run := createRun(t, s, src)
		if diff := cmp.Diff([]string{run.ID + "/build (n=1)"}, claimAll(t, db)); diff != "" {
			t.Fatalf("claimed (-want +got):\n%s", diff)
		}
		second := getRun(t, db, run.ID).Jobs[1]
		if second.Status != store.JobQueued {
			t.Errorf("second combination: got %s, want queued", second.Status)
		}
		waits, err := db.ConcurrencyWaits(t.Context(), []string{second.ID})
		if err != nil {
			t.Fatal(err)
		}
		if want := `waiting for a max-parallel slot: matrix job "build" runs at most 1 at once (in progress: build (n=1))`; waits[second.ID] != want {
			t.Errorf("why pending: got %q, want %q", waits[second.ID], want)
		}
	})
}

func TestDecideRunGroup(t *testing.T) {
	t.Parallel()
	m := func(id string, st store.RunGroupState, cip bool) store.RunGroup {
		return store.RunGroup{RunID: id, State: st, CancelInProgress: cip}
	}
	type cancel struct{ Run, Why string }
	tests := []struct {
		name        string
		members     []store.RunGroup
		wantStart   string
		wantHolder  string
		wantCancels []cancel
	}{
		{name: "alone: starts", members: []store.RunGroup{m("a", store.RunGroupWaiting, false)}, wantStart: "a"},
		{name: "behind an active run: waits",
			members:    []store.RunGroup{m("a", store.RunGroupActive, false), m("b", store.RunGroupWaiting, false)},
			wantHolder: "a"},
		{name: "newest waiting supersedes the older",
			members:     []store.RunGroup{m("a", store.RunGroupActive, false), m("b", store.RunGroupWaiting, false), m("c", store.RunGroupWaiting, false)},
			wantHolder:  "a",
			wantCancels: []cancel{{"b", `superseded by run c in concurrency group "g"`}}},
		{name: "cancel-in-progress cancels every older run and waits for them to end",
			members:     []store.RunGroup{m("a", store.RunGroupActive, false), m("b", store.RunGroupWaiting, false), m("c", store.RunGroupWaiting, true)},
			wantHolder:  "a",
			wantCancels: []cancel{{"a", "cancelled by run c"}, {"b", "cancelled by run c"}}},
		{name: "no active run left: the newest waiting starts, the older are superseded",
			members:     []store.RunGroup{m("b", store.RunGroupWaiting, false), m("c", store.RunGroupWaiting, false)},
			wantStart:   "c",
			wantCancels: []cancel{{"b", `superseded by run c in concurrency group "g"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := decideRunGroup("g", tt.members)
			var got []cancel
			for _, c := range p.cancels {
				why, _, _ := strings.Cut(c.reason, ":")
				got = append(got, cancel{c.runID, why})
			}
			if p.start != tt.wantStart || p.holder != tt.wantHolder {
				t.Errorf("start %q holder %q, want %q %q", p.start, p.holder, tt.wantStart, tt.wantHolder)
			}
			if diff := cmp.Diff(tt.wantCancels, got); diff != "" {
				t.Errorf("cancels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideJobGroup(t *testing.T) {
	t.Parallel()
	m := func(run, job string, dispatched, cip bool) store.JobGroupMember {
		return store.JobGroupMember{RunID: run, JobID: run + "/" + job, Job: job, Dispatched: dispatched, CancelInProgress: cip}
	}
	type cancel struct {
		Run  string
		Jobs []string
		Why  string
	}
	tests := []struct {
		name    string
		members []store.JobGroupMember
		want    []cancel
	}{
		{name: "one dispatched, one queued: nothing to cancel",
			members: []store.JobGroupMember{m("r1", "d", true, false), m("r2", "d", false, false)}},
		{name: "a newer queued job supersedes an older of another run",
			members: []store.JobGroupMember{m("r1", "d", true, false), m("r2", "d", false, false), m("r3", "d", false, false)},
			want:    []cancel{{"r2", []string{"r2/d"}, "superseded by run r3 job d in concurrency group \"g\""}}},
		{name: "jobs of one run take turns",
			members: []store.JobGroupMember{m("r1", "a", true, false), m("r1", "b", false, false), m("r1", "c", false, true)}},
		{name: "cancel-in-progress cancels older jobs of other runs",
			members: []store.JobGroupMember{m("r1", "a", true, false), m("r1", "b", false, false), m("r2", "d", false, true)},
			want:    []cancel{{"r1", []string{"r1/a", "r1/b"}, "cancelled by run r2 job d"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []cancel
			for _, c := range decideJobGroup("g", tt.members) {
				why, _, _ := strings.Cut(c.reason, ":")
				got = append(got, cancel{c.runID, c.jobIDs, why})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cancels (-want +got):\n%s", diff)
			}
		})
	}
}
