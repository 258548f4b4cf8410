package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestDrainedAgentTakesNoNewJob: an operator drains the only agent that
// fits a job; the job waits, saying the agent is drained, through the
// orchestrator's restart and the agent's reconnect; once undrained, the
// same agent runs it.
func TestDrainedAgentTakesNoNewJob(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  build:
    runs-on: [maint]
    steps: [{run: "echo built"}]
`})
		var d apiv1.AgentDrain
		o.api(t, "POST", "/api/v1/agents/host-1/drain", apiv1.AgentDrainRequest{Reason: "kernel update"}, &d, http.StatusOK)
		if d.AgentID != "host-1" || d.Reason != "kernel update" || d.DrainedAt.IsZero() {
			t.Fatalf("drain: got %+v", d)
		}
		startAgent(t, o, "", "host-1", []string{"maint"})
		waitFor(t, 20*time.Second, "host-1 connected and draining", func() bool {
			var list apiv1.AgentList
			o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
			return len(list.Agents) == 1 && list.Agents[0].Draining && len(list.Drains) == 1
		})
		id := o.push(t)
		whyPending := func() string {
			var q apiv1.Queue
			o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
			if len(q.Jobs) != 1 {
				return ""
			}
			return q.Jobs[0].WhyPending
		}
		waitFor(t, 20*time.Second, "the job to wait for the drained agent", func() bool {
			return strings.Contains(whyPending(), "is drained (host-1")
		})

		// The drain is stored: a restarted orchestrator keeps it, and the
		// agent that reconnects to it is still drained.
		o.kill()
		o.start()
		waitFor(t, 30*time.Second, "the reconnected agent to be drained still", func() bool {
			return strings.Contains(whyPending(), "is drained (host-1")
		})
		if r := o.run(t, id); job(t, r, "build").Status != "queued" {
			t.Fatalf("job while drained: %s, want queued", job(t, r, "build").Status)
		}

		o.api(t, "DELETE", "/api/v1/agents/host-1/drain", nil, nil, http.StatusNoContent)
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "build"); r.Status != "success" || j.AgentID != "host-1" {
			t.Fatalf("after undrain: run %s, job on %q, want success on host-1", r.Status, j.AgentID)
		}
		o.api(t, "DELETE", "/api/v1/agents/host-1/drain", nil, nil, http.StatusNotFound)
	})
}

// TestDrainedAgentNamedWithAScaler: with an auto-scaler configured, a job
// that only a drained agent fits is offered to the scaler, and why_pending
// still names the drained agent beside the scaler's answer.
func TestDrainedAgentNamedWithAScaler(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		cfg := writeScalers(t, `
version: 1
scalers:
  - name: elsewhere
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, other]
        binaryPath: /nonexistent/kici-agent
`)
		o := startOrchestrator(t, dbURL, "KICI_SCALER_CONFIG_PATH="+cfg)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  build:
    runs-on: [maint]
    steps: [{run: "echo built"}]
`})
		o.api(t, "POST", "/api/v1/agents/host-1/drain", apiv1.AgentDrainRequest{Reason: "kernel update"}, nil, http.StatusOK)
		startAgent(t, o, "", "host-1", []string{"maint"})
		waitFor(t, 20*time.Second, "host-1 connected and draining", func() bool {
			var list apiv1.AgentList
			o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
			return len(list.Agents) == 1 && list.Agents[0].Draining
		})
		o.push(t)
		var why string
		waitFor(t, 20*time.Second, "the scaler's answer for the job", func() bool {
			var q apiv1.Queue
			o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
			if len(q.Jobs) != 1 {
				return false
			}
			why = q.Jobs[0].WhyPending
			return strings.Contains(why, "no scaler matches")
		})
		if !strings.Contains(why, "drained: host-1") {
			t.Errorf("got why_pending %q, want it to name the drained agent host-1", why)
		}
	})
}
