package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConcurrencyGroupCancelInProgress: two runs of one concurrency group
// with cancel-in-progress. The second push cancels the first run, whose
// step blocks on a gate file, through the agent; the second run starts
// once the first has ended, and succeeds when the gate opens.
func TestConcurrencyGroupCancelInProgress(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		started, gate := filepath.Join(marks, "started"), filepath.Join(marks, "gate")
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
concurrency: {group: "ci-${{ event.branch }}", cancel-in-progress: true}
jobs:
  block:
    steps:
      - run: echo "$KICI_RUN_ID" >> %s; while [ ! -f %s ]; do sleep 0.05; done
`, started, gate)})
		// Two slots: nothing but the group keeps the second run from
		// starting beside the first.
		startAgent(t, o, "", "worker", nil, "KICI_AGENT_CONCURRENCY=2")
		runStarted := func(id string) func() bool {
			return func() bool { return slices.Contains(readLines(t, started), id) }
		}

		first := o.push(t)
		waitFor(t, 30*time.Second, "the first run's step to start", runStarted(first))
		second := o.push(t)

		r1 := o.waitRun(t, first, 30*time.Second, "the first run to end", ended)
		if r1.Status != "cancelled" || !strings.Contains(r1.Error, second) || !strings.Contains(r1.Error, `"ci-main"`) {
			t.Fatalf("first run: got %s %q, want cancelled with an error naming run %s and the group", r1.Status, r1.Error, second)
		}
		if j := job(t, r1, "block"); j.Status != "cancelled" || !strings.Contains(j.Error, second) {
			t.Errorf("first run's job: got %s %q, want cancelled naming run %s", j.Status, j.Error, second)
		}

		waitFor(t, 30*time.Second, "the second run's step to start", runStarted(second))
		r2 := o.waitRun(t, second, 30*time.Second, "the second run's job to be running", func(r apiv1Run) bool {
			return job(t, r, "block").StartedAt != nil
		})
		if s := job(t, r2, "block").StartedAt; r1.FinishedAt == nil || s.Before(*r1.FinishedAt) {
			t.Errorf("second run's job started at %v, want after the first run ended (%v)", s, r1.FinishedAt)
		}
		if err := touch(gate); err != nil {
			t.Fatal(err)
		}
		r2 = o.waitRun(t, second, 30*time.Second, "the second run to end", ended)
		if r2.Status != "success" {
			t.Fatalf("second run: got %s (%s), want success", r2.Status, r2.Error)
		}
		if got := readLines(t, started); !slices.Equal(got, []string{first, second}) {
			t.Errorf("steps started by runs %v, want the first then the second, once each", got)
		}
	})
}
