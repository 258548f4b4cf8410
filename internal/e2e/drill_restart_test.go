package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// matrixWorkflow is a workflow of one job "work" over an a×b matrix. Each
// job appends one line to <marks>/ran-<a>-<b>, touches <marks>/started-<a>-<b>,
// then waits for <marks>/go before it ends.
func matrixWorkflow(marks string, as, bs int) string {
	dim := func(n int) string {
		var v []string
		for i := range n {
			v = append(v, fmt.Sprint(i))
		}
		return "[" + strings.Join(v, ", ") + "]"
	}
	return fmt.Sprintf(`
on: {push: {}}
jobs:
  work:
    matrix:
      a: %[2]s
      b: %[3]s
    steps:
      - run: echo ran >> %[1]s/ran-${{ matrix.a }}-${{ matrix.b }}; touch %[1]s/started-${{ matrix.a }}-${{ matrix.b }}; while [ ! -e %[1]s/go ]; do sleep 0.1; done; echo done
`, marks, dim(as), dim(bs))
}

// countGlob counts the files matching pattern.
func countGlob(t *testing.T, pattern string) int {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// assertRanOnce checks that each of the n jobs of matrixWorkflow ran its
// step exactly once.
func assertRanOnce(t *testing.T, marks string, as, bs int) {
	t.Helper()
	for a := range as {
		for b := range bs {
			if got := readLines(t, filepath.Join(marks, fmt.Sprintf("ran-%d-%d", a, b))); len(got) != 1 {
				t.Errorf("job a=%d b=%d: step ran %d times, want exactly once", a, b, len(got))
			}
		}
	}
}

// TestDrillOrchestratorKilledWith20Running20Waiting: SIGKILL the
// orchestrator while 20 jobs run (4 agents × 5 slots) and 20 wait; after
// a restart every job succeeds and every step ran exactly once.
func TestDrillOrchestratorKilledWith20Running20Waiting(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const as, bs = 4, 10
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": matrixWorkflow(marks, as, bs)})
		for i := range 4 {
			startAgent(t, o, "", fmt.Sprintf("drill-%d", i), nil, "KICI_AGENT_CONCURRENCY=5")
		}
		id := o.push(t)
		waitFor(t, 30*time.Second, "20 jobs to start", func() bool {
			return countGlob(t, filepath.Join(marks, "started-*")) >= 20
		})
		// Let a dispatch that would exceed the capacity show itself.
		time.Sleep(200 * time.Millisecond)
		if n := countGlob(t, filepath.Join(marks, "started-*")); n != 20 {
			t.Fatalf("%d jobs started before the kill, want 20 (4 agents × 5)", n)
		}
		if r := o.run(t, id); len(r.Jobs) != as*bs {
			t.Fatalf("run has %d jobs, want %d", len(r.Jobs), as*bs)
		}
		o.kill()
		o.start()
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := o.waitRun(t, id, 90*time.Second, "run to end", ended)
		if r.Status != "success" {
			var bad []string
			for _, j := range r.Jobs {
				if j.Status != "success" {
					bad = append(bad, fmt.Sprintf("%s: %s (%s)", j.Name, j.Status, j.Error))
				}
			}
			t.Fatalf("run: got %s (%s), want success; jobs not successful: %q", r.Status, r.Error, bad)
		}
		for _, j := range r.Jobs {
			if j.Status != "success" {
				t.Errorf("job %s: %s (%s), want success", j.Name, j.Status, j.Error)
			}
		}
		assertRanOnce(t, marks, as, bs)
		if n := countGlob(t, filepath.Join(marks, "ran-*")); n != as*bs {
			t.Errorf("%d jobs ran, want %d", n, as*bs)
		}
		_ = os.Remove(filepath.Join(marks, "go"))
	})
}
