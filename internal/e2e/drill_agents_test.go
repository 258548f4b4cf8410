package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDrillAgentKilledAndRestartedInWindow: an agent is killed with
// SIGKILL mid-job and restarted at once with the same id and work dir,
// within the recovery window. A SIGKILLed agent keeps no job state, so it
// cannot reclaim the job: the job ends "agent lost" and the run fails. The
// restarted agent then runs the next job.
func TestDrillAgentKilledAndRestartedInWindow(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const window = 3 * time.Second
		o := startOrchestrator(t, dbURL, fmt.Sprintf("KICI_AGENT_RECOVERY_WINDOW_MS=%d", window.Milliseconds()))
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    retry: 0 # the end of a lost attempt, not its retry (retry_test.go)
    steps:
      - run: if [ -e %[1]s/second ]; then echo second run; else echo $$ > %[1]s/shell; exec sleep 30; fi
`, marks)})
		workdir := t.TempDir()
		env := []string{"KICI_AGENT_WORKDIR=" + workdir}
		a := startAgent(t, o, "", "phoenix", nil, env...)
		id := o.push(t)
		waitFor(t, 30*time.Second, "the step to start", func() bool { return len(readLines(t, filepath.Join(marks, "shell"))) > 0 })
		t.Cleanup(func() { killLine(readLines(t, filepath.Join(marks, "shell"))) })
		a.kill()
		killLine(readLines(t, filepath.Join(marks, "shell"))) // the orphaned step
		startAgent(t, o, "", "phoenix", nil, env...)
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		j := job(t, r, "long")
		if r.Status != "failure" || j.Status != "failure" || !strings.Contains(j.Error, "agent lost") {
			t.Fatalf("run %s, job %s (%q): want failure with \"agent lost\"", r.Status, j.Status, j.Error)
		}

		if err := touch(filepath.Join(marks, "second")); err != nil {
			t.Fatal(err)
		}
		id2 := o.push(t)
		r2 := o.waitRun(t, id2, 30*time.Second, "second run to end", ended)
		j2 := job(t, r2, "long")
		if r2.Status != "success" || j2.AgentID != "phoenix" {
			t.Fatalf("second run %s, job %s on %q (%q): want success on the restarted agent", r2.Status, j2.Status, j2.AgentID, j2.Error)
		}
	})
}

// TestDrillAgentsKilledMidJob: two of three agents running jobs are killed
// with SIGKILL and not restarted; their jobs end "agent lost" after the
// recovery window, the survivor's job succeeds, and the run fails.
func TestDrillAgentsKilledMidJob(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const window = 1500 * time.Millisecond
		o := startOrchestrator(t, dbURL, fmt.Sprintf("KICI_AGENT_RECOVERY_WINDOW_MS=%d", window.Milliseconds()))
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  work:
    retry: 0 # the end of a lost attempt, not its retry (retry_test.go)
    matrix:
      n: [0, 1, 2]
    steps:
      - run: echo ${{ matrix.n }} >> %[1]s/ran; echo $$ > %[1]s/shell-${{ matrix.n }}; while [ ! -e %[1]s/go ]; do sleep 0.1; done
`, marks)})
		agents := map[string]*agent{}
		for _, name := range []string{"a0", "a1", "a2"} {
			agents[name] = startAgent(t, o, "", name, nil)
		}
		id := o.push(t)
		waitFor(t, 30*time.Second, "3 jobs to start", func() bool { return countGlob(t, filepath.Join(marks, "shell-*")) == 3 })
		t.Cleanup(func() {
			for n := range 3 {
				killLine(readLines(t, filepath.Join(marks, fmt.Sprintf("shell-%d", n))))
			}
		})
		r := o.run(t, id)
		byAgent := map[string]string{}
		for _, j := range r.Jobs {
			byAgent[j.AgentID] = j.Name
		}
		killed := time.Now() // before the kills: kill returns once the agent's reaper is done too
		agents["a0"].kill()
		agents["a1"].kill()
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r = o.waitRun(t, id, 30*time.Second, "run to end", ended)
		elapsed := time.Since(killed)
		if r.Status != "failure" {
			t.Fatalf("run: got %s, want failure", r.Status)
		}
		for _, j := range r.Jobs {
			switch j.AgentID {
			case "a0", "a1":
				if j.Status != "failure" || !strings.Contains(j.Error, "agent lost") {
					t.Errorf("job %s on killed agent %s: %s (%q), want failure with \"agent lost\"", j.Name, j.AgentID, j.Status, j.Error)
				}
			case "a2":
				if j.Status != "success" {
					t.Errorf("job %s on surviving agent: %s (%q), want success", j.Name, j.Status, j.Error)
				}
			default:
				t.Errorf("job %s ran on %q, want one of a0, a1, a2", j.Name, j.AgentID)
			}
		}
		if elapsed < window {
			t.Errorf("run ended %s after the kills, before the %s recovery window", elapsed, window)
		}
		if got := readLines(t, filepath.Join(marks, "ran")); len(got) != 3 {
			t.Errorf("steps ran %q, want 3 lines (none retried)", got)
		}
	})
}
