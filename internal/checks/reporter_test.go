package checks

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/source/githubfake"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

const (
	testToken = "ghp_test-token"
	testRepo  = "kici-dev/app"
	testSHA   = "0123456789abcdef0123456789abcdef01234567"
	publicURL = "https://ci.example.com"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a database with a github source, a fake GitHub and a clock.
type fixture struct {
	db    *store.DB
	gh    *githubfake.Server
	clock *testClock
}

func newFixture(t *testing.T, db *store.DB) *fixture {
	t.Helper()
	gh := githubfake.New(testToken)
	t.Cleanup(gh.Close)
	gh.AddRepo(testRepo)
	if _, err := db.CreateSource(t.Context(), store.Source{Name: "app", Kind: store.SourceGitHub, Location: testRepo}); err != nil {
		t.Fatal(err)
	}
	return &fixture{db: db, gh: gh, clock: &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}}
}

// reporter returns a new reporter on the fixture, as a new orchestrator
// process would make one.
func (f *fixture) reporter(t *testing.T) *Reporter {
	t.Helper()
	r, err := New(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})), f.db, Config{
		APIURL: f.gh.URL, Token: testToken, PublicURL: publicURL, Now: f.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// createRun creates a pending run of workflow ci of source src with jobs
// build and test.
func createRun(t *testing.T, db *store.DB, src string) store.Run {
	t.Helper()
	job := func(name string) workflow.Job {
		return workflow.Job{Name: name, Base: name, RunsOn: []string{"linux"}, Steps: []workflow.Step{{Name: "make", Run: "make"}}}
	}
	run, err := db.CreateRun(t.Context(), store.NewRun{
		Source: src, Workflow: "ci", WorkflowFile: ".kici/workflows/ci.yml", Event: []byte(`{}`), EventKind: "push",
		Ref: "refs/heads/main", SHA: testSHA,
		Plan: workflow.Workflow{Name: "ci", File: ".kici/workflows/ci.yml", Jobs: []workflow.Job{job("build"), job("test")}},
		Jobs: []store.NewJob{{Spec: job("build"), Status: store.JobQueued}, {Spec: job("test"), Status: store.JobQueued}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// setRun moves run to status (with its error), and failed's jobs to
// failure with their errors.
func setRun(t *testing.T, db *store.DB, run store.Run, status store.RunStatus, msg string, failed map[string]string) {
	t.Helper()
	ctx := t.Context()
	for _, j := range run.Jobs {
		if e, ok := failed[j.Name]; ok {
			if _, err := db.UpdateJobStatus(ctx, store.JobTransition{ID: j.ID, From: []store.JobStatus{store.JobQueued}, To: store.JobFailure, Error: &e}); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := []store.RunStatus{store.RunAwaitingApproval, store.RunPending, store.RunRunning}
	if _, err := db.UpdateRunStatus(ctx, store.RunTransition{ID: run.ID, From: all, To: status, Error: &msg}); err != nil {
		t.Fatal(err)
	}
}

// step notifies r of run's change and sends what is due, wanting sent
// reports to succeed.
func step(t *testing.T, r *Reporter, runID string, wantSent int) {
	t.Helper()
	r.Notify(runID)
	r.EnqueueNoted(t.Context())
	sent, err := r.ReportDue(t.Context())
	if err != nil {
		t.Fatalf("report due: %v", err)
	}
	if sent != wantSent {
		t.Fatalf("report due: got %d reports sent, want %d", sent, wantSent)
	}
}

// onlyCheckRun returns the fake's one check run, failing unless there is
// exactly one.
func onlyCheckRun(t *testing.T, gh *githubfake.Server) githubfake.CheckRun {
	t.Helper()
	runs := gh.CheckRuns(testRepo)
	if len(runs) != 1 {
		t.Fatalf("got %d check runs on %s, want exactly 1: %+v", len(runs), testRepo, runs)
	}
	return runs[0]
}

func TestReporterReportsEachStateOfARun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		end         store.RunStatus
		runError    string
		failed      map[string]string
		wantEnd     string
		wantSummary []string
	}{
		{name: "success", end: store.RunSuccess, wantEnd: "completed/success", wantSummary: []string{"ci: success"}},
		{name: "failure", end: store.RunFailure, failed: map[string]string{"test": "step make exited with code 2"},
			wantEnd: "completed/failure", wantSummary: []string{"Failed jobs", "**test**: step make exited with code 2"}},
		{name: "cancelled", end: store.RunCancelled, runError: "cancelled by alice",
			wantEnd: "completed/cancelled", wantSummary: []string{"cancelled by alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
				f := newFixture(t, db)
				r := f.reporter(t)
				run := createRun(t, db, "app")
				step(t, r, run.ID, 1)
				if got := onlyCheckRun(t, f.gh); got.Status != "queued" {
					t.Errorf("after creation: got status %q, want queued", got.Status)
				}
				setRun(t, db, run, store.RunRunning, "", nil)
				step(t, r, run.ID, 1)
				setRun(t, db, run, tt.end, tt.runError, tt.failed)
				step(t, r, run.ID, 1)
				// Nothing is left to send.
				step(t, r, run.ID, 0)

				got := onlyCheckRun(t, f.gh)
				want := []string{"queued", "in_progress", tt.wantEnd}
				if diff := cmp.Diff(want, got.History); diff != "" {
					t.Errorf("check run states (-want +got):\n%s", diff)
				}
				if got.ExternalID != run.ID || got.HeadSHA != testSHA || got.Name != "kici/ci" {
					t.Errorf("got check run %q on %s with external_id %q, want kici/ci on %s with %q", got.Name, got.HeadSHA, got.ExternalID, testSHA, run.ID)
				}
				if want := publicURL + "/runs/" + run.ID; got.DetailsURL != want {
					t.Errorf("details_url: got %q, want %q", got.DetailsURL, want)
				}
				for _, s := range tt.wantSummary {
					if !strings.Contains(got.Summary, s) {
						t.Errorf("summary %q: want it to contain %q", got.Summary, s)
					}
				}
			})
		})
	}
}

func TestReporterAwaitingApprovalIsActionRequired(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		r := f.reporter(t)
		run := createRun(t, db, "app")
		setRun(t, db, run, store.RunAwaitingApproval, "pull request from a fork", nil)
		step(t, r, run.ID, 1)
		got := onlyCheckRun(t, f.gh)
		if got.Status != "completed" || got.Conclusion != "action_required" || !strings.Contains(got.Summary, "kici-admin runs approve "+run.ID) {
			t.Errorf("awaiting approval: got %s/%s with summary %q, want completed/action_required naming the approve command", got.Status, got.Conclusion, got.Summary)
		}
		// Approved, it runs and succeeds on the same check run.
		setRun(t, db, run, store.RunPending, "", nil)
		step(t, r, run.ID, 0)
		setRun(t, db, run, store.RunRunning, "", nil)
		step(t, r, run.ID, 1)
		setRun(t, db, run, store.RunSuccess, "", nil)
		step(t, r, run.ID, 1)
		want := []string{"completed/action_required", "in_progress", "completed/success"}
		if diff := cmp.Diff(want, onlyCheckRun(t, f.gh).History); diff != "" {
			t.Errorf("check run states (-want +got):\n%s", diff)
		}
	})
}

func TestReporterRetries502WithoutDuplicating(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		r := f.reporter(t)
		run := createRun(t, db, "app")
		f.gh.FailCheckRuns(2, http.StatusBadGateway, nil)
		step(t, r, run.ID, 0)
		row, err := db.GetCheckReport(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Attempts != 1 || !strings.Contains(row.LastError, "502") {
			t.Errorf("after a 502: got %d attempts, error %q, want 1 and the 502", row.Attempts, row.LastError)
		}
		// Not due again before its back-off.
		step(t, r, run.ID, 0)
		if row2, _ := db.GetCheckReport(t.Context(), run.ID); row2.Attempts != 1 {
			t.Errorf("before the back-off ended: got %d attempts, want still 1", row2.Attempts)
		}
		f.clock.Add(backoffFor(1))
		step(t, r, run.ID, 0)
		f.clock.Add(backoffFor(2))
		step(t, r, run.ID, 1)
		got := onlyCheckRun(t, f.gh)
		if got.ExternalID != run.ID {
			t.Errorf("got external_id %q, want %q", got.ExternalID, run.ID)
		}
		row, err = db.GetCheckReport(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.CheckRunID != got.ID || row.Reported != store.CheckQueued || row.Attempts != 0 || row.LastError != "" {
			t.Errorf("after the 201: got %+v, want check run %d reported queued, attempts and error cleared", row, got.ID)
		}
	})
}

func TestReporterRestartDoesNotDuplicate(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		run := createRun(t, db, "app")
		// The first process creates the check run, but the answer is
		// lost; then the process stops.
		f.gh.LoseCreateAnswers(1)
		step(t, f.reporter(t), run.ID, 0)
		if n := len(f.gh.CheckRuns(testRepo)); n != 1 {
			t.Fatalf("after the lost answer: got %d check runs, want the 1 created", n)
		}
		// The next process finds it by external_id and goes on with it.
		f.clock.Add(backoffFor(1))
		r2 := f.reporter(t)
		setRun(t, db, run, store.RunRunning, "", nil)
		step(t, r2, run.ID, 1)
		// And a third, after the id was stored, uses the stored id.
		r3 := f.reporter(t)
		setRun(t, db, run, store.RunSuccess, "", nil)
		before := len(f.gh.Requests())
		step(t, r3, run.ID, 1)
		if diff := cmp.Diff([]string{"queued", "in_progress", "completed/success"}, onlyCheckRun(t, f.gh).History); diff != "" {
			t.Errorf("check run states (-want +got):\n%s", diff)
		}
		reqs := f.gh.Requests()[before:]
		if len(reqs) != 1 || !strings.HasPrefix(reqs[0], "PATCH /repos/"+testRepo+"/check-runs/") {
			t.Errorf("with the id stored: got requests %q, want one PATCH", reqs)
		}
	})
}

func TestReporterHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		r := f.reporter(t)
		run := createRun(t, db, "app")
		f.gh.FailCheckRuns(1, http.StatusServiceUnavailable, http.Header{"Retry-After": {"120"}})
		t0 := f.clock.Now()
		step(t, r, run.ID, 0)
		row, err := db.GetCheckReport(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(120 * time.Second); !row.NextAttemptAt.Equal(want) {
			t.Errorf("next attempt: got %v, want %v (Retry-After: 120)", row.NextAttemptAt, want)
		}
		f.clock.Add(119 * time.Second)
		before := len(f.gh.Requests())
		step(t, r, run.ID, 0)
		if n := len(f.gh.Requests()) - before; n != 0 {
			t.Errorf("a second before Retry-After ends: got %d requests, want none", n)
		}
		f.clock.Add(time.Second)
		step(t, r, run.ID, 1)
		onlyCheckRun(t, f.gh)
	})
}

func TestReporterHonoursRateLimitReset(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		r := f.reporter(t)
		run := createRun(t, db, "app")
		reset := f.clock.Now().Add(30 * time.Minute)
		f.gh.FailCheckRuns(1, http.StatusForbidden, http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {formatUnix(reset)},
		})
		step(t, r, run.ID, 0)
		row, err := db.GetCheckReport(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !row.NextAttemptAt.Equal(reset) || row.GaveUpAt != nil {
			t.Errorf("next attempt: got %v (given up: %v), want %v, the rate limit's reset", row.NextAttemptAt, row.GaveUpAt, reset)
		}
	})
}

func TestReporterReportsOnlyGitHubTiedSources(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		ctx := t.Context()
		if _, err := db.CreateSource(ctx, store.Source{Name: "plain", Kind: store.SourceGit, Location: "https://git.example.com/x.git"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateSource(ctx, store.Source{Name: "mirror", Kind: store.SourceLocal, Location: "/srv/app", GitHubRepo: testRepo}); err != nil {
			t.Fatal(err)
		}
		r := f.reporter(t)
		plain, mirror := createRun(t, db, "plain"), createRun(t, db, "mirror")
		r.Notify(plain.ID)
		step(t, r, mirror.ID, 1)
		if got := onlyCheckRun(t, f.gh); got.ExternalID != mirror.ID {
			t.Errorf("got a check run for run %q, want one for the mirror's run %q", got.ExternalID, mirror.ID)
		}
		if _, err := db.GetCheckReport(ctx, plain.ID); err == nil {
			t.Errorf("a run of a source with no GitHub repository got a report row, want none")
		}
	})
}

func TestReporterRunReportsANotifiedRun(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		run := createRun(t, db, "app")
		setRun(t, db, run, store.RunSuccess, "", nil)
		ctx, cancel := context.WithCancel(t.Context())
		r := f.reporter(t)
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		// Run enqueues unfinished runs by itself; this one ended, so
		// it is told.
		r.Notify(run.ID)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if runs := f.gh.CheckRuns(testRepo); len(runs) == 1 && runs[0].Status == "completed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s: got check runs %+v, want one completed", f.gh.CheckRuns(testRepo))
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: got %v, want nil at cancel", err)
		}
	})
}
