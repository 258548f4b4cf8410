package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestPushRunsMatrixAndNeeds: a push runs a workflow with a matrix and a
// job that needs it, spread over two agents, and every step's output is
// stored.
func TestPushRunsMatrixAndNeeds(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    matrix: {n: ["1", "2", "3"]}
    steps:
      - run: echo "build ${{ matrix.n }} on ${{ event.branch }}"
  test:
    needs: [build]
    steps:
      - name: check
        run: echo "test after builds"
      - run: echo second step
`})
		startAgent(t, o, "", "agent-a", []string{"linux"})
		startAgent(t, o, "", "agent-b", []string{"linux"})
		id := o.push(t)
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run status: got %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
		}
		agents := map[string]bool{}
		for _, n := range []string{"1", "2", "3"} {
			j := job(t, r, "build (n="+n+")")
			agents[j.AgentID] = true
			if j.Status != "success" || j.Steps[0].ExitCode == nil || *j.Steps[0].ExitCode != 0 {
				t.Errorf("job %s: got %s exit %v, want success exit 0", j.Name, j.Status, j.Steps[0].ExitCode)
			}
			if got := o.logs(t, id, j.Name); !slices.Contains(got, "build "+n+" on main") {
				t.Errorf("logs of %s: got %q, want a line %q", j.Name, got, "build "+n+" on main")
			}
		}
		test := job(t, r, "test")
		if test.Status != "success" || len(test.Steps) != 2 || test.Steps[1].Status != "success" {
			t.Errorf("job test: got %+v, want success with 2 successful steps", test)
		}
		if !test.StartedAt.After(*job(t, r, "build (n=3)").FinishedAt) && !test.StartedAt.Equal(*job(t, r, "build (n=3)").FinishedAt) {
			t.Errorf("test started %s before build (n=3) finished %s", test.StartedAt, job(t, r, "build (n=3)").FinishedAt)
		}
		t.Logf("build jobs ran on agents %v", agents)
	})
}

// TestFailingJobSkipsDependants: a failed job skips the jobs that need it
// to succeed (transitively), lets an `always` dependant run, and fails the
// run.
func TestFailingJobSkipsDependants(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  broken:
    steps:
      - run: echo about to fail; exit 3
      - name: never
        run: echo unreachable
      - name: cleanup
        if: always()
        run: echo cleaning up
  deploy:
    needs: [broken]
    steps: [{run: echo deploy}]
  after-deploy:
    needs: [deploy]
    steps: [{run: echo after}]
  report:
    needs: {broken: always}
    steps: [{run: echo report}]
`})
		startAgent(t, o, "", "agent-a", nil)
		id := o.push(t)
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "failure" {
			t.Fatalf("run: got %s, want failure", r.Status)
		}
		broken := job(t, r, "broken")
		want := []string{"failure", "skipped", "success"}
		for i, st := range broken.Steps {
			if st.Status != want[i] {
				t.Errorf("broken step %d: got %s, want %s", i, st.Status, want[i])
			}
		}
		if broken.Steps[0].ExitCode == nil || *broken.Steps[0].ExitCode != 3 {
			t.Errorf("broken step 0 exit code: got %v, want 3", broken.Steps[0].ExitCode)
		}
		for _, name := range []string{"deploy", "after-deploy"} {
			j := job(t, r, name)
			if j.Status != "skipped" || !strings.Contains(j.Error, "upstream_unmet") {
				t.Errorf("job %s: got %s (%q), want skipped with upstream_unmet", name, j.Status, j.Error)
			}
		}
		if j := job(t, r, "report"); j.Status != "success" {
			t.Errorf("job report: got %s, want success", j.Status)
		}
	})
}

// TestCancelMidStepKillsEveryProcess: cancelling a run while a step runs
// leaves no process of that step alive, grandchildren included.
func TestCancelMidStepKillsEveryProcess(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		pids := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    steps:
      - run: |
          sleep 300 &
          echo $! > %[1]s/grandchild
          (trap '' TERM; sleep 300) &
          echo $! > %[1]s/stubborn
          echo $$ > %[1]s/shell
          wait
`, pids)})
		startAgent(t, o, "", "agent-a", nil)
		id := o.push(t)
		var ps []int
		waitFor(t, 30*time.Second, "step processes to start", func() bool {
			ps = ps[:0]
			for _, f := range []string{"grandchild", "stubborn", "shell"} {
				lines := readLines(t, filepath.Join(pids, f))
				if len(lines) == 0 {
					return false
				}
				n, err := strconv.Atoi(lines[0])
				if err != nil {
					return false
				}
				ps = append(ps, n)
			}
			return true
		})
		t.Cleanup(func() {
			for _, p := range ps {
				if alive(p) {
					_ = killPid(p)
				}
			}
		})
		o.api(t, "POST", "/api/v1/runs/"+id+"/cancel", apiv1.CancelRequest{}, nil, http.StatusOK)
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if r.Status != "cancelled" || job(t, r, "long").Status != "cancelled" {
			t.Fatalf("run %s job %s, want both cancelled", r.Status, job(t, r, "long").Status)
		}
		// SIGKILL is delivered asynchronously: give the kernel a moment to
		// finish what the agent started, but no grace beyond that.
		waitFor(t, 3*time.Second, "every process of the cancelled step to be gone", func() bool {
			for _, p := range ps {
				if alive(p) {
					return false
				}
			}
			return true
		})
	})
}

func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
