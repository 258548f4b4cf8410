package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

// invalidWorkflow has two problems: an unknown key and a need of a job that
// does not exist.
const invalidWorkflow = `name: ci
on: {push: {}}
jobs:
  build:
    runs-on: [linux]
    stepz:
      - run: echo build
  deploy:
    needs: [nope]
    steps:
      - run: ./deploy.sh
`

func TestTrigger(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		git(t, dir, "tag", "v1")
		git(t, dir, "branch", "other")
		h.addSource(t, "repo", dir, "")
		badDir, _ := gitRepo(t, map[string]string{".kici/workflows/ci.yml": invalidWorkflow})
		h.addSource(t, "invalid", badDir, "")
		emptyDir, _ := gitRepo(t, map[string]string{"README.md": "no workflows\n"})
		h.addSource(t, "empty", emptyDir, "")

		// The jobs of ciWorkflow right after a trigger: the roots queued,
		// test waiting for build.
		wantJobs := map[string]string{"build": "queued", "lint": "queued", "test": "waiting"}
		tests := []struct {
			name       string
			source     string
			in         apiv1.TriggerRequest
			wantStatus int
			// wantError is a part of the error message; empty for a 200.
			wantError string
			// wantRun is the run started, ignoring ids and times; nil for
			// none.
			wantRun *apiv1.Run
		}{
			{
				name: "push of main", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "main"},
				wantStatus: http.StatusOK,
				wantRun:    &apiv1.Run{Source: "repo", Workflow: "ci", Ref: "refs/heads/main", SHA: sha, Status: "pending"},
			},
			{
				name: "default event and ref", source: "repo", in: apiv1.TriggerRequest{},
				wantStatus: http.StatusOK,
				wantRun:    &apiv1.Run{Source: "repo", Workflow: "ci", Ref: "refs/heads/main", SHA: sha, Status: "pending"},
			},
			{
				name: "push of a full ref at a pinned sha", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "refs/heads/main", SHA: sha},
				wantStatus: http.StatusOK,
				wantRun:    &apiv1.Run{Source: "repo", Workflow: "ci", Ref: "refs/heads/main", SHA: sha, Status: "pending"},
			},
			{
				name: "tag", source: "repo", in: apiv1.TriggerRequest{Event: "tag", Ref: "v1"},
				wantStatus: http.StatusOK,
				wantRun:    &apiv1.Run{Source: "repo", Workflow: "ci", Ref: "refs/tags/v1", SHA: sha, Status: "pending"},
			},
			{
				name: "manual", source: "repo", in: apiv1.TriggerRequest{Event: "manual", Ref: "main"},
				wantStatus: http.StatusOK,
				wantRun:    &apiv1.Run{Source: "repo", Workflow: "ci", Ref: "refs/heads/main", SHA: sha, Status: "pending"},
			},
			{
				name: "push of a branch no workflow matches", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "other"},
				wantStatus: http.StatusOK,
			},
			{
				name: "unknown event", source: "repo", in: apiv1.TriggerRequest{Event: "pull_request"},
				wantStatus: http.StatusBadRequest, wantError: `event "pull_request": want push, tag or manual`,
			},
			{
				name: "tag without ref", source: "repo", in: apiv1.TriggerRequest{Event: "tag"},
				wantStatus: http.StatusBadRequest, wantError: `a tag event needs "ref"`,
			},
			{
				name: "inputs on a push", source: "repo", in: apiv1.TriggerRequest{Event: "push", Inputs: map[string]string{"a": "b"}},
				wantStatus: http.StatusBadRequest, wantError: "inputs are only for manual events",
			},
			{
				name: "unknown source", source: "no-such-source", in: apiv1.TriggerRequest{Event: "push"},
				wantStatus: http.StatusNotFound, wantError: `source "no-such-source": not found`,
			},
			{
				name: "branch that does not exist", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "no-such-branch"},
				wantStatus: http.StatusUnprocessableEntity, wantError: "no-such-branch",
			},
			{
				name: "tag that does not exist", source: "repo", in: apiv1.TriggerRequest{Event: "tag", Ref: "v9"},
				wantStatus: http.StatusUnprocessableEntity, wantError: "v9",
			},
			{
				name: "commit that does not exist", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "main", SHA: strings.Repeat("ab", 20)},
				wantStatus: http.StatusUnprocessableEntity, wantError: strings.Repeat("ab", 6),
			},
			{
				name: "commit that is not a sha", source: "repo", in: apiv1.TriggerRequest{Event: "push", Ref: "main", SHA: "--output=/tmp/x"},
				wantStatus: http.StatusBadRequest, wantError: "sha",
			},
			{
				name: "no workflows", source: "empty", in: apiv1.TriggerRequest{Event: "push"},
				wantStatus: http.StatusUnprocessableEntity, wantError: "no workflows",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := h.admin(t, http.MethodPost, "/api/v1/sources/"+tt.source+"/trigger", tt.in)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantError != "" {
					if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
						t.Errorf("got error %q, want it to contain %q", got, tt.wantError)
					}
					return
				}
				var out apiv1.TriggerResponse
				resp.decode(t, &out)
				if len(out.Decisions) != 1 || out.Decisions[0].Reason == "" {
					t.Errorf("got decisions %+v, want one, with a reason", out.Decisions)
				}
				if tt.wantRun == nil {
					if len(out.Runs) != 0 || out.Decisions[0].Matched {
						t.Errorf("got runs %v, want none", out.Runs)
					}
					return
				}
				if len(out.Runs) != 1 {
					t.Fatalf("got runs %v, want one", out.Runs)
				}
				run := h.getRun(t, out.Runs[0].ID)
				got := apiv1.Run{Source: run.Source, Workflow: run.Workflow, Ref: run.Ref, SHA: run.SHA, Status: run.Status}
				if diff := cmp.Diff(*tt.wantRun, got); diff != "" {
					t.Errorf("run mismatch (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantJobs, jobStatuses(run)); diff != "" {
					t.Errorf("job statuses mismatch (-want +got):\n%s", diff)
				}
				var ev struct {
					Kind string `json:"kind"`
				}
				if err := json.Unmarshal(run.Event, &ev); err != nil || ev.Kind != tt.in.Event && tt.in.Event != "" {
					t.Errorf("got event %s, want kind %q", run.Event, tt.in.Event)
				}
			})
		}

		t.Run("invalid workflows", func(t *testing.T) {
			t.Parallel()
			resp := h.admin(t, http.MethodPost, "/api/v1/sources/invalid/trigger", apiv1.TriggerRequest{Event: "push"})
			if resp.status != http.StatusUnprocessableEntity {
				t.Fatalf("got status %d (%s), want 422", resp.status, resp.body)
			}
			e := resp.apiError(t)
			if !strings.Contains(e.Error, "invalid") || strings.Contains(e.Error, "\n") {
				t.Errorf("got error %q, want one line saying the workflows are invalid", e.Error)
			}
			if len(e.Details) < 2 {
				t.Fatalf("got details %q, want one per problem (2)", e.Details)
			}
			problem := regexp.MustCompile(`^\.kici/workflows/ci\.yml:\d+:\d+: \S.*$`)
			for _, d := range e.Details {
				if !problem.MatchString(d) {
					t.Errorf("got detail %q, want FILE:LINE:COL: message", d)
				}
			}
			joined := strings.Join(e.Details, "\n")
			for _, want := range []string{"stepz", "nope"} {
				if !strings.Contains(joined, want) {
					t.Errorf("got details %q, want one naming %q", e.Details, want)
				}
			}
			if got := len(h.runs(t, "invalid")); got != 0 {
				t.Errorf("got %d runs, want 0", got)
			}
		})
	})
}
