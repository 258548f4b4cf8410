package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
)

// selectFiles are the workflows of the repository of the trigger
// selection tests: two manual workflows, and two push workflows of main
// filtered by paths.
var selectFiles = map[string]string{
	".kici/workflows/deploy.yml":  "name: deploy\non: {manual: {}}\njobs:\n  go: {runs-on: [linux], steps: [{run: echo deploy}]}\n",
	".kici/workflows/release.yml": "name: release\non: {manual: {}}\njobs:\n  go: {runs-on: [linux], steps: [{run: echo release}]}\n",
	".kici/workflows/docs.yml":    "name: docs\non: {push: {branches: [main], paths: [\"docs/**\"]}}\njobs:\n  go: {runs-on: [linux], steps: [{run: echo docs}]}\n",
	".kici/workflows/src.yml":     "name: src\non: {push: {branches: [main], paths: [\"src/**\"]}}\njobs:\n  go: {runs-on: [linux], steps: [{run: echo src}]}\n",
	"README.md":                   "hello\n",
}

// runWorkflows names the workflows of the runs a trigger started, sorted.
func runWorkflows(runs []apiv1.RunRef) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.Workflow)
	}
	slices.Sort(out)
	return out
}

// TestTriggerWorkflowsAndChangedFiles checks the "workflows" and
// "changed_files" of a trigger request (CONTRACT.md § Triggers): a named
// workflow runs and the other manual one does not; an unknown name is a
// 422 listing the commit's workflows and starts nothing; changed files
// make paths: filters match (or not); bad lists are refused with a 400
// naming what was wrong.
func TestTriggerWorkflowsAndChangedFiles(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := gitRepo(t, selectFiles)
		tests := []struct {
			name       string
			in         apiv1.TriggerRequest
			wantStatus int
			wantError  string   // part of the error message, for a status other than 200
			wantRuns   []string // workflows of the runs started, sorted
		}{
			{name: "every manual workflow", in: apiv1.TriggerRequest{Event: "manual"}, wantStatus: http.StatusOK, wantRuns: []string{"deploy", "release"}},
			{name: "one named", in: apiv1.TriggerRequest{Event: "manual", Workflows: []string{"deploy"}}, wantStatus: http.StatusOK, wantRuns: []string{"deploy"}},
			{name: "named twice runs once", in: apiv1.TriggerRequest{Event: "manual", Workflows: []string{"release", "release"}}, wantStatus: http.StatusOK, wantRuns: []string{"release"}},
			{name: "named but not matching", in: apiv1.TriggerRequest{Event: "manual", Workflows: []string{"docs"}}, wantStatus: http.StatusOK, wantRuns: []string{}},
			{
				name: "unknown name", in: apiv1.TriggerRequest{Event: "manual", Workflows: []string{"deploy", "nope"}},
				wantStatus: http.StatusUnprocessableEntity,
				wantError:  `no workflow named "nope" at commit `,
			},
			{name: "changed file under docs", in: apiv1.TriggerRequest{Event: "push", Ref: "main", ChangedFiles: []string{"docs/a.md"}}, wantStatus: http.StatusOK, wantRuns: []string{"docs"}},
			{name: "changed files under both", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"src/x.go", "docs/a.md", "src/x.go"}}, wantStatus: http.StatusOK, wantRuns: []string{"docs", "src"}},
			{name: "changed file under neither", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"README.md"}}, wantStatus: http.StatusOK, wantRuns: []string{}},
			{name: "changed files unknown", in: apiv1.TriggerRequest{Event: "push"}, wantStatus: http.StatusOK, wantRuns: []string{}},
			{name: "changed files and a named workflow", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"src/x.go", "docs/a.md"}, Workflows: []string{"src"}}, wantStatus: http.StatusOK, wantRuns: []string{"src"}},
			{name: "changed files of a tag", in: apiv1.TriggerRequest{Event: "tag", Ref: "v1", ChangedFiles: []string{"a"}}, wantStatus: http.StatusBadRequest, wantError: "changed_files are only for push events"},
			{name: "changed files of a manual run", in: apiv1.TriggerRequest{Event: "manual", ChangedFiles: []string{"a"}}, wantStatus: http.StatusBadRequest, wantError: "changed_files are only for push events"},
			{name: "absolute path", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"docs/a.md", "/etc/passwd"}}, wantStatus: http.StatusBadRequest, wantError: `changed_files[1] "/etc/passwd": absolute path`},
			{name: "dot-dot path", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"docs/../src/x.go"}}, wantStatus: http.StatusBadRequest, wantError: `".." segment`},
			{name: "NUL in path", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"docs/a\x00.md"}}, wantStatus: http.StatusBadRequest, wantError: "NUL"},
			{name: "empty path", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{""}}, wantStatus: http.StatusBadRequest, wantError: "changed_files[0]"},
			{name: "trailing slash", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{"docs/"}}, wantStatus: http.StatusBadRequest, wantError: "empty segment"},
			{name: "path too long", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: []string{strings.Repeat("a", 4097)}}, wantStatus: http.StatusBadRequest, wantError: "path of 4097 bytes, at most 4096"},
			{name: "too many paths", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: manyFiles(3001)}, wantStatus: http.StatusBadRequest, wantError: "changed_files: 3001 paths, at most 3000"},
			{name: "as many paths as allowed", in: apiv1.TriggerRequest{Event: "push", ChangedFiles: manyFiles(3000)}, wantStatus: http.StatusOK, wantRuns: []string{"docs"}},
			{name: "empty workflow name", in: apiv1.TriggerRequest{Event: "manual", Workflows: []string{"deploy", " "}}, wantStatus: http.StatusBadRequest, wantError: "workflows[1]: empty name"},
			{name: "too many workflow names", in: apiv1.TriggerRequest{Event: "manual", Workflows: manyFiles(101)}, wantStatus: http.StatusBadRequest, wantError: "workflows: 101 names, at most 100"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				src := fmt.Sprintf("select-%d", i)
				h.addSource(t, src, dir, "")
				resp := h.admin(t, http.MethodPost, "/api/v1/sources/"+src+"/trigger", tt.in)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantStatus != http.StatusOK {
					if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
						t.Errorf("got error %q, want it to contain %q", got, tt.wantError)
					}
					if got := len(h.runs(t, src)); got != 0 {
						t.Errorf("got %d runs after a refused trigger, want 0", got)
					}
					return
				}
				var out apiv1.TriggerResponse
				resp.decode(t, &out)
				if diff := cmp.Diff(tt.wantRuns, runWorkflows(out.Runs)); diff != "" {
					t.Errorf("workflows run (-want +got):\n%s", diff)
				}
				if len(tt.in.Workflows) > 0 {
					for _, d := range out.Decisions {
						if !slices.Contains(tt.in.Workflows, d.Workflow) {
							t.Errorf("got a decision on %q, want decisions on the named workflows %q only", d.Workflow, tt.in.Workflows)
						}
					}
				}
			})
		}

		t.Run("unknown name lists the valid ones", func(t *testing.T) {
			t.Parallel()
			h.addSource(t, "select-unknown", dir, "")
			resp := h.admin(t, http.MethodPost, "/api/v1/sources/select-unknown/trigger", apiv1.TriggerRequest{Event: "manual", Workflows: []string{"nope", "deploy", "gone"}})
			if resp.status != http.StatusUnprocessableEntity {
				t.Fatalf("got status %d (%s), want 422", resp.status, resp.body)
			}
			got := resp.apiError(t).Error
			for _, want := range []string{`"nope", "gone"`, "the workflows there are: deploy, docs, release, src"} {
				if !strings.Contains(got, want) {
					t.Errorf("got error %q, want it to contain %q", got, want)
				}
			}
		})
	})
}

// manyFiles returns n distinct paths, the first under docs/.
func manyFiles(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("docs/f%04d.md", i)
	}
	return out
}

// TestTriggerRecordsActor checks that a run started through the API
// records the admin token's name as its actor, in the run (actor) and in
// its event (event.actor), in the run list too; with the bootstrap token
// the actor is "bootstrap".
func TestTriggerRecordsActor(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := gitRepo(t, selectFiles)
		h.addSource(t, "actor", dir, "")
		tok := h.newAdminToken(t, "release-bot", auth.Admin)
		resp := h.call(t, tok.Token, http.MethodPost, "/api/v1/sources/actor/trigger", `{"event": "manual", "workflows": ["deploy"]}`)
		if resp.status != http.StatusOK {
			t.Fatalf("trigger: got status %d (%s), want 200", resp.status, resp.body)
		}
		var out apiv1.TriggerResponse
		resp.decode(t, &out)
		if len(out.Runs) != 1 {
			t.Fatalf("got runs %v, want one", out.Runs)
		}
		run := h.getRun(t, out.Runs[0].ID)
		if run.Actor != "release-bot" {
			t.Errorf("got actor %q, want %q (the token's name)", run.Actor, "release-bot")
		}
		var ev struct {
			Actor string `json:"actor"`
		}
		if err := json.Unmarshal(run.Event, &ev); err != nil || ev.Actor != "release-bot" {
			t.Errorf("got event %s (%v), want its actor to be release-bot", run.Event, err)
		}
		listed := h.runs(t, "actor")
		if len(listed) != 1 || listed[0].Actor != "release-bot" {
			t.Errorf("got listed runs %+v, want one with actor release-bot", listed)
		}

		var boot apiv1.TriggerResponse
		h.mustAdmin(t, http.MethodPost, "/api/v1/sources/actor/trigger", apiv1.TriggerRequest{Event: "manual", Workflows: []string{"release"}}, http.StatusOK, &boot)
		if len(boot.Runs) != 1 {
			t.Fatalf("got runs %v, want one", boot.Runs)
		}
		if got := h.getRun(t, boot.Runs[0].ID).Actor; got != auth.BootstrapID {
			t.Errorf("got actor %q, want %q", got, auth.BootstrapID)
		}
	})
}
