package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/source/githubfake"
)

// TestRunIsReportedAsAGitHubCheckRun: an orchestrator whose
// KICI_GITHUB_API_URL is the GitHub fake reports a run of a local source
// tied to a GitHub repository (github_repo) as one check run, created
// while the run is queued, in_progress while its job runs, completed with
// success at the end, with details_url at the run's page; the fake's first
// two answers are 502, and still exactly one check run is created.
func TestRunIsReportedAsAGitHubCheckRun(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const token, repo = "ghs_e2e-token", "kici-dev/mirrored"
		gh := githubfake.New(token)
		t.Cleanup(gh.Close)
		gh.AddRepo(repo)
		gh.FailCheckRuns(2, http.StatusBadGateway, nil)

		o := startOrchestrator(t, dbURL, "KICI_GITHUB_API_URL="+gh.URL, "KICI_GITHUB_TOKEN="+token)
		marks := t.TempDir()
		dir := o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    steps:
      - run: |
          while [ ! -e %s/go ]; do sleep 0.05; done
          echo built
`, marks)})
		o.api(t, "POST", "/api/v1/sources", apiv1.Source{Name: "mirror", Kind: "local", Path: dir, GitHubRepo: repo}, nil, http.StatusCreated)
		var tr apiv1.TriggerResponse
		o.api(t, "POST", "/api/v1/sources/mirror/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, &tr, http.StatusOK)
		if len(tr.Runs) != 1 {
			t.Fatalf("push started %d runs, want 1: %+v", len(tr.Runs), tr.Decisions)
		}
		id := tr.Runs[0].ID
		state := func() string {
			runs := gh.CheckRuns(repo)
			if len(runs) == 0 {
				return ""
			}
			return runs[len(runs)-1].History[len(runs[len(runs)-1].History)-1]
		}
		// No agent yet: the run waits, and its check run is queued once
		// the two 502s are retried past (5 s, then 10 s of back-off).
		waitFor(t, 90*time.Second, "a queued check run", func() bool { return state() == "queued" })
		startAgent(t, o, "", "agent-checks", []string{"linux"})
		waitFor(t, 60*time.Second, "the check run in_progress", func() bool { return state() == "in_progress" })
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run status: got %s (%s), want success", r.Status, r.Error)
		}
		waitFor(t, 60*time.Second, "the check run completed", func() bool { return state() == "completed/success" })

		runs := gh.CheckRuns(repo)
		if len(runs) != 1 {
			t.Fatalf("got %d check runs, want exactly 1: %+v", len(runs), runs)
		}
		c := runs[0]
		if diff := cmp.Diff([]string{"queued", "in_progress", "completed/success"}, c.History); diff != "" {
			t.Errorf("check run states (-want +got):\n%s", diff)
		}
		if c.ExternalID != id || c.HeadSHA != r.SHA || c.Name != "kici/"+r.Workflow {
			t.Errorf("check run: got %q on %s for %q, want kici/%s on %s for run %s", c.Name, c.HeadSHA, c.ExternalID, r.Workflow, r.SHA, id)
		}
		if want := "http://" + o.addr + "/runs/" + id; c.DetailsURL != want {
			t.Errorf("details_url: got %q, want %q", c.DetailsURL, want)
		}
		posts := slices.DeleteFunc(gh.Requests(), func(s string) bool { return s != "POST /repos/"+repo+"/check-runs" })
		if len(posts) != 1 {
			t.Errorf("got %d check run creations, want 1 (the two 502s were answered to the lookups before it)", len(posts))
		}
	})
}
