package scheduler

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
)

// setSecrets is a SecretChecker over a fixed set of names.
type setSecrets []string

func (s setSecrets) Missing(_ context.Context, _, _ string, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if !slices.Contains(s, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

const declaring = `
on: {push: {}}
jobs:
  build:
    steps: [{run: make}]
  lint:
    steps: [{run: make lint}]
  ship:
    needs: [build]
    secrets: [DEPLOY_KEY, NPM_TOKEN]
    steps: [{run: ./ship}]
  notify:
    secrets: [DEPLOY_KEY]
    steps: [{run: ./notify}]
`

// TestUnsetSecretFailsTheRunAtCreation: a run one of whose jobs declares a
// secret that is not set fails when it is created, naming the secret and
// who declares it; no job is queued, so nothing upstream spends compute.
func TestUnsetSecretFailsTheRunAtCreation(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		s := New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{Secrets: setSecrets{"NPM_TOKEN"}}, nil, nil)
		run, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: compile(t, declaring), Event: trigger.PushEvent("main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.GetRun(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.RunFailure || got.FinishedAt == nil {
			t.Fatalf("run %s (finished %v), want failure and finished", got.Status, got.FinishedAt)
		}
		for _, want := range []string{"secret DEPLOY_KEY is not set", "declared by ship, notify", "kici-admin secrets set NAME --source src"} {
			if !strings.Contains(got.Error, want) {
				t.Errorf("run error %q does not say %q", got.Error, want)
			}
		}
		if strings.Contains(got.Error, "NPM_TOKEN") {
			t.Errorf("run error %q names NPM_TOKEN, which is set", got.Error)
		}
		status := map[string]store.JobStatus{}
		for _, j := range got.Jobs {
			status[j.Name] = j.Status
			if j.Name == "ship" && !strings.Contains(j.Error, "DEPLOY_KEY") {
				t.Errorf("ship's error %q does not name DEPLOY_KEY", j.Error)
			}
		}
		want := map[string]store.JobStatus{"build": store.JobSkipped, "lint": store.JobSkipped, "ship": store.JobFailure, "notify": store.JobFailure}
		if diff := cmp.Diff(want, status); diff != "" {
			t.Errorf("job statuses (-want +got):\n%s", diff)
		}
		queue, err := db.ListQueue(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(queue) != 0 {
			t.Errorf("%d jobs queued, want none", len(queue))
		}

		// With every secret set the same workflow runs.
		s = New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, Config{Secrets: setSecrets{"NPM_TOKEN", "DEPLOY_KEY"}}, nil, nil)
		ok, err := s.CreateRun(t.Context(), RunInput{Source: "src", Workflow: compile(t, declaring), Event: trigger.PushEvent("main", "abc")})
		if err != nil {
			t.Fatal(err)
		}
		if st, jobs := statuses(t, db, ok.ID); st != store.RunPending || jobs["build"] != store.JobQueued {
			t.Errorf("with the secrets set: run %s, build %s; want pending and queued", st, jobs["build"])
		}
	})
}
