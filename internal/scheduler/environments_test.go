package scheduler

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
)

const deploy = `
on: {push: {}, pull_request: {}}
jobs:
  ship:
    environment: production
    steps: [{run: ./ship}]
  docs:
    steps: [{run: make docs}]
`

// TestEnvironmentHoldsForApproval: a job of an environment that requires
// an approval is held (waiting, one timeline entry however often the run
// is advanced) until Approve, which queues it; the other job is not held.
func TestEnvironmentHoldsForApproval(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		if _, err := db.PutEnvironment(ctx, store.Environment{Name: "production", RequireApproval: true, Branches: []string{"main"}}); err != nil {
			t.Fatal(err)
		}
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{}, nil, nil)
		run, err := s.CreateRun(ctx, RunInput{Source: "src", Workflow: compile(t, deploy), Event: trigger.PushEvent("refs/heads/main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := s.Advance(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
		}
		_, jobs := statuses(t, db, run.ID)
		if jobs["ship"] != store.JobWaiting || jobs["docs"] != store.JobQueued {
			t.Fatalf("ship %s, docs %s; want ship held (waiting) and docs queued", jobs["ship"], jobs["docs"])
		}
		approvals, err := db.ListJobApprovals(ctx, run.ID)
		if err != nil || len(approvals) != 1 || approvals[0].State != store.ApprovalPending {
			t.Fatalf("approvals %+v (%v), want one pending", approvals, err)
		}
		evs, err := db.ListJobEvents(ctx, approvals[0].JobID)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, e := range evs {
			if e.Type == EventEnvironmentHeld {
				held++
			}
		}
		if held != 1 {
			t.Errorf("%d hold entries in ship's timeline after three advances, want 1", held)
		}
		if _, err := s.Approve(ctx, run.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if _, jobs := statuses(t, db, run.ID); jobs["ship"] != store.JobQueued {
			t.Errorf("after the approval ship is %s, want queued", jobs["ship"])
		}
		if _, err := s.Approve(ctx, run.ID, "alice"); err == nil {
			t.Error("a second approval with nothing held succeeded, want ErrNotAwaitingApproval")
		}
	})
}

// TestEnvironmentBranches: a run of a branch the environment does not
// accept fails the environment's job; so does a pull request's run, even
// one that targets an accepted branch.
func TestEnvironmentBranches(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		if _, err := db.PutEnvironment(ctx, store.Environment{Name: "production", Branches: []string{"main", "release/*"}}); err != nil {
			t.Fatal(err)
		}
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{}, nil, nil)
		for _, c := range []struct {
			name string
			ev   trigger.Event
			want store.JobStatus
		}{
			{"release branch", trigger.PushEvent("refs/heads/release/1.2", "abc"), store.JobQueued},
			{"other branch", trigger.PushEvent("refs/heads/dev", "abc"), store.JobFailure},
			{"pull request into main", trigger.PullRequestEvent("main", "feature", "opened"), store.JobFailure},
		} {
			run, err := s.CreateRun(ctx, RunInput{Source: "src", Workflow: compile(t, deploy), Event: c.ev})
			if err != nil {
				t.Fatal(err)
			}
			got, err := db.GetRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range got.Jobs {
				if j.Name != "ship" {
					continue
				}
				if j.Status != c.want {
					t.Errorf("%s: ship is %s (%q), want %s", c.name, j.Status, j.Error, c.want)
				}
				if c.want == store.JobFailure && !strings.Contains(j.Error, "accepts runs of branches main, release/* only") {
					t.Errorf("%s: ship's error %q does not name the rule", c.name, j.Error)
				}
			}
		}
	})
}
