package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestQueueWhyConcurrencyGroup: a job whose job-level concurrency group
// has another job in progress stays queued, and the queue says for whom
// it waits.
func TestQueueWhyConcurrencyGroup(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := gitRepo(t, map[string]string{".kici/workflows/deploy.yml": `
on: {push: {}}
jobs:
  deploy:
    concurrency: "deploy-${{ event.branch }}"
    steps: [{run: ./deploy}]
`})
		h.addSource(t, "conc", dir, "")
		first := h.trigger(t, "conc")[0].ID
		// No agent connects here: an agent's claim of the first deploy is
		// made in the store.
		db := h.openStore(t)
		deploy := h.getRun(t, first).Jobs[0].ID
		if _, ok, err := db.ClaimJob(t.Context(), "elsewhere", deploy, "agent-1", time.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("claim the first deploy: %v %v", ok, err)
		}
		second := h.trigger(t, "conc")[0].ID
		if _, ok, err := db.ClaimJob(t.Context(), "elsewhere", h.getRun(t, second).Jobs[0].ID, "agent-2", time.Now().Add(time.Hour)); err != nil || ok {
			t.Fatalf("claim the second deploy: got %v %v, want it held back", ok, err)
		}
		var q apiv1.Queue
		h.mustAdmin(t, http.MethodGet, "/api/v1/queue", nil, http.StatusOK, &q)
		want := fmt.Sprintf(`waiting for concurrency group "deploy-main" (run %s job deploy is in it)`, first)
		found := false
		for _, e := range q.Jobs {
			if e.RunID == second {
				found = true
				if e.Status != "queued" || e.WhyPending != want {
					t.Errorf("second deploy: got %s %q, want queued %q", e.Status, e.WhyPending, want)
				}
			}
		}
		if !found {
			t.Errorf("queue %+v: want the second deploy in it", q.Jobs)
		}
	})
}
