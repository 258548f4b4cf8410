package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/workflow"
)

// TestTriggerRefusesOversizedWorkflows triggers sources whose workflows
// break a limit: more jobs than KICI_MAX_JOBS_PER_RUN (compiled from YAML,
// and from a committed lock file), an alias bomb, and too many files. Each
// is a 422 naming the problem, and no run is created.
func TestTriggerRefusesOversizedWorkflows(t *testing.T) {
	t.Parallel()
	// ciWorkflow has 3 jobs; the limit lets 2 through.
	forEachEngineWith(t, func(c *orchestrator.Config) { c.MaxJobsPerRun = 2 }, func(t *testing.T, h *harness) {
		plan, err := workflow.Compile([]workflow.File{{Path: ".kici/workflows/ci.yml", Data: []byte(ciWorkflow)}})
		if err != nil {
			t.Fatal(err)
		}
		lock, err := plan.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var bomb strings.Builder
		bomb.WriteString("name: bomb\non: {push: {}}\nenv: &e\n")
		for i := range 2000 {
			fmt.Fprintf(&bomb, "  KEY_%04d: value-%04d\n", i, i)
		}
		bomb.WriteString("jobs:\n")
		for i := range 5000 {
			fmt.Fprintf(&bomb, "  job%04d:\n    env: *e\n    steps: [{run: x}]\n", i)
		}
		many := map[string]string{}
		for i := range workflow.MaxFiles + 1 {
			many[fmt.Sprintf(".kici/workflows/w%03d.yml", i)] = fmt.Sprintf("name: w%d\non: {push: {}}\njobs: {a: {steps: [{run: x}]}}\n", i)
		}
		tests := []struct {
			name  string
			files map[string]string
			want  string
		}{
			{name: "jobs over the limit", files: map[string]string{".kici/workflows/ci.yml": ciWorkflow},
				want: `.kici/workflows/ci.yml:7:3: workflow "ci" has 3 jobs, over the limit of 2 jobs per run`},
			{name: "lock over the limit", files: map[string]string{".kici/workflows/ci.yml": ciWorkflow, workflow.LockPath: string(lock)},
				want: workflow.LockPath + `: workflow "ci" has 3 jobs, over the limit of 2 jobs per run`},
			{name: "alias bomb", files: map[string]string{".kici/workflows/bomb.yml": bomb.String()},
				want: "alias *e: YAML aliases expand this file by more than"},
			{name: "too many files", files: many,
				want: fmt.Sprintf("101 files: more than %d workflow files in .kici/workflows", workflow.MaxFiles)},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				dir, _ := gitRepo(t, tt.files)
				name := fmt.Sprintf("limits%d", i)
				h.addSource(t, name, dir, "")
				resp := h.admin(t, http.MethodPost, "/api/v1/sources/"+name+"/trigger", apiv1.TriggerRequest{Event: "push"})
				if resp.status != http.StatusUnprocessableEntity {
					t.Fatalf("got status %d (%s), want 422", resp.status, resp.body)
				}
				e := resp.apiError(t)
				if !strings.Contains(strings.Join(e.Details, "\n"), tt.want) {
					t.Errorf("got error %q details %q, want a detail containing %q", e.Error, e.Details, tt.want)
				}
				if got := len(h.runs(t, name)); got != 0 {
					t.Errorf("got %d runs, want none", got)
				}
			})
		}
	})
}
