package e2e

import (
	"path/filepath"
	"testing"
	"time"
)

// TestOrchestratorGracefulRestartMidJob: SIGTERM (a planned restart)
// while two jobs run and two wait. The orchestrator exits cleanly (status
// 0: its agent connections closed and its goroutines done before the
// database closes); after the restart the agent reclaims its running
// jobs, the waiting ones run, and every step ran exactly once.
func TestOrchestratorGracefulRestartMidJob(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const as, bs = 2, 2
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": matrixWorkflow(marks, as, bs)})
		startAgent(t, o, "", "graceful", nil, "KICI_AGENT_CONCURRENCY=2")
		id := o.push(t)
		waitFor(t, 30*time.Second, "2 jobs to start", func() bool {
			return countGlob(t, filepath.Join(marks, "started-*")) >= 2
		})
		o.stop()
		if st := o.cmd.ProcessState; st == nil || !st.Success() {
			t.Fatalf("orchestrator after SIGTERM: %v, want exit status 0", st)
		}
		o.start()
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run: got %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
		}
		assertRanOnce(t, marks, as, bs)
	})
}
