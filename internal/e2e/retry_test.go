package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestRetryAgentKilledJobSucceedsOnAnotherAgent: the agent running a job
// is killed with SIGKILL mid-step and does not come back. After the
// recovery window the attempt ends as agent-lost and, under the default
// retry policy, the job goes back to the queue as attempt 2, which a
// second agent runs to success. The API shows attempt 2 and the lost
// attempt, the job's timeline names the cause, and the step's log keeps
// both attempts' lines with a line between them.
func TestRetryAgentKilledJobSucceedsOnAnotherAgent(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const window = 1500 * time.Millisecond
		o := startOrchestrator(t, dbURL, fmt.Sprintf("KICI_AGENT_RECOVERY_WINDOW_MS=%d", window.Milliseconds()))
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    steps:
      - run: |
          echo try >> %[1]s/tries
          if [ "$(wc -l < %[1]s/tries)" -ge 2 ]; then echo "second attempt done"; exit 0; fi
          echo "first attempt started"
          echo $$ > %[1]s/shell
          exec sleep 30
`, marks)})
		doomed := startAgent(t, o, "", "doomed", nil)
		id := o.push(t)
		waitFor(t, 30*time.Second, "the step to start", func() bool { return len(readLines(t, filepath.Join(marks, "shell"))) > 0 })
		t.Cleanup(func() { killLine(readLines(t, filepath.Join(marks, "shell"))) })
		waitFor(t, 15*time.Second, "the first attempt's line stored", func() bool {
			return slices.Contains(o.logs(t, id, "long"), "first attempt started")
		})
		doomed.kill()
		killLine(readLines(t, filepath.Join(marks, "shell"))) // the orphaned step
		startAgent(t, o, "", "healthy", nil)

		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		j := job(t, r, "long")
		if r.Status != "success" || j.Status != "success" || j.AgentID != "healthy" || j.Attempt != 2 {
			t.Fatalf("run %s, job %s on %q at attempt %d (%q); want success on healthy at attempt 2", r.Status, j.Status, j.AgentID, j.Attempt, j.Error)
		}
		if len(j.PreviousAttempts) != 1 {
			t.Fatalf("previous attempts: %+v, want the lost one", j.PreviousAttempts)
		}
		if p := j.PreviousAttempts[0]; p.Attempt != 1 || p.Cause != "agent-lost" || p.AgentID != "doomed" || !strings.Contains(p.Error, "agent lost") {
			t.Errorf("previous attempt: %+v, want attempt 1 ended agent-lost on doomed", p)
		}
		if s := j.Steps[0]; s.Status != "success" || s.StartedAt == nil || s.FinishedAt == nil || s.FinishedAt.Before(*s.StartedAt) {
			t.Errorf("step of attempt 2: %+v, want success with its start and end", s)
		}
		if got := readLines(t, filepath.Join(marks, "tries")); len(got) != 2 {
			t.Errorf("the step ran %d times, want 2 (one per attempt)", len(got))
		}
		lines := o.logs(t, id, "long")
		timeline := slices.IndexFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "[attempt_ended] attempt 1 ended: agent lost (") && strings.Contains(l, "retrying as attempt 2 of 2") &&
				strings.HasSuffix(l, "(agent doomed)")
		})
		first := slices.Index(lines, "first attempt started")
		marker := slices.Index(lines, "[kici] attempt 1 ended here; attempt 2 follows")
		second := slices.Index(lines, "second attempt done")
		if timeline < 0 || first < 0 || marker < 0 || second < 0 || !(first < marker && marker < second) {
			t.Errorf("job log: %q; want the retry in the timeline, then the first attempt's line, the marker and the second attempt's line", lines)
		}
	})
}

// TestRerunFailedDoesNotRerunSuccessfulJobs: in a run where a succeeds, b
// fails, c (after a) succeeds and d (after a and b) is skipped, a rerun of
// the failed jobs copies a and c without running them, and runs b and d
// again; d sees a as succeeded. Each step appends to a file outside the
// workspace, so the files count the runs.
func TestRerunFailedDoesNotRerunSuccessfulJobs(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  a:
    steps: [{run: echo ran >> %[1]s/a}]
  b:
    steps: [{run: echo ran >> %[1]s/b; test -e %[1]s/fixed}]
  c:
    needs: [a]
    steps: [{run: echo ran >> %[1]s/c}]
  d:
    needs: [a, b]
    steps: [{run: echo ran >> %[1]s/d}]
`, marks)})
		startAgent(t, o, "", "worker", nil)
		parentID := o.push(t)
		parent := o.waitRun(t, parentID, 60*time.Second, "first run to end", ended)
		want := map[string]string{"a": "success", "b": "failure", "c": "success", "d": "skipped"}
		if got := jobStatusMap(parent); parent.Status != "failure" || !maps.Equal(got, want) {
			t.Fatalf("first run %s with jobs %v, want failure with %v", parent.Status, got, want)
		}
		if err := touch(filepath.Join(marks, "fixed")); err != nil {
			t.Fatal(err)
		}

		// From the dashboard: the ended run with a failed job offers the
		// second button, which posts failed=1.
		b := newBrowser(t, o)
		if p := b.login(o.token); p.status != http.StatusSeeOther {
			t.Fatalf("login: %d", p.status)
		}
		page := b.get("/runs/" + parentID)
		if !strings.Contains(page.body, `id="rerun"`) || !strings.Contains(page.body, `id="rerun-failed"`) {
			t.Fatalf("the failed run's page: want the Rerun and Rerun failed buttons")
		}
		p := b.do(http.MethodPost, "/runs/"+parentID+"/rerun", url.Values{"csrf": {page.csrf(t)}, "failed": {"1"}})
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/runs/") || p.location == "/runs/"+parentID {
			t.Fatalf("rerun failed: %d → %q, want 303 to the new run", p.status, p.location)
		}
		ref := apiv1.RunRef{ID: strings.TrimPrefix(p.location, "/runs/")}
		child := o.waitRun(t, ref.ID, 60*time.Second, "rerun to end", ended)
		want = map[string]string{"a": "success", "b": "success", "c": "success", "d": "success"}
		if got := jobStatusMap(child); child.Status != "success" || !maps.Equal(got, want) || child.ParentRun != parentID {
			t.Fatalf("rerun %s (parent %q) with jobs %v, want success (parent %s) with %v", child.Status, child.ParentRun, got, parentID, want)
		}
		for file, n := range map[string]int{"a": 1, "b": 2, "c": 1, "d": 1} {
			if got := readLines(t, filepath.Join(marks, file)); len(got) != n {
				t.Errorf("job %s ran %d times over both runs, want %d", file, len(got), n)
			}
		}
		a := job(t, child, "a")
		if pa := job(t, parent, "a"); a.AgentID != pa.AgentID || a.StartedAt == nil || !a.StartedAt.Equal(*pa.StartedAt) {
			t.Errorf("reused a: agent %q started %v, want the parent's %q at %v", a.AgentID, a.StartedAt, pa.AgentID, pa.StartedAt)
		}
		if !slices.ContainsFunc(o.logs(t, ref.ID, "a"), func(l string) bool { return strings.Contains(l, "reused from run "+parentID) }) {
			t.Errorf("timeline of reused a: %q, want it to say it is reused from %s", o.logs(t, ref.ID, "a"), parentID)
		}

		// Everything succeeded now: nothing to rerun, and no second button.
		if page := b.get("/runs/" + ref.ID); !strings.Contains(page.body, `id="rerun"`) || strings.Contains(page.body, `id="rerun-failed"`) {
			t.Errorf("the successful rerun's page: want the Rerun button only")
		}
		var e apiv1.Error
		o.api(t, "POST", "/api/v1/runs/"+ref.ID+"/rerun", apiv1.RerunRequest{Failed: true}, &e, http.StatusConflict)
		if !strings.Contains(e.Error, "nothing to rerun") {
			t.Errorf("rerun of the failed jobs of a run that succeeded: %q, want it to say there is nothing to rerun", e.Error)
		}
	})
}

func jobStatusMap(r apiv1.Run) map[string]string {
	out := map[string]string{}
	for _, j := range r.Jobs {
		out[j.Name] = j.Status
	}
	return out
}
