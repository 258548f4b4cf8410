package e2e

import (
	"flag"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// measureRelay turns on TestMeasureWorkerRelay, a measurement for
// docs/benchmarks.md, not a check: go test ./internal/e2e/ -run
// TestMeasureWorkerRelay -measure-relay.
var measureRelay = flag.Bool("measure-relay", false, "measure the time to start of jobs on an agent behind a worker against a direct one")

// TestMeasureWorkerRelay measures, over 30 runs of two root jobs, each
// job's time from its run's creation to the coordinator applying its
// "running" report: one job on an agent connected to the coordinator, one
// on an agent behind a worker. It reports p50 and p90 and asserts no time.
func TestMeasureWorkerRelay(t *testing.T) {
	if !*measureRelay {
		t.Skip("a measurement: run with -measure-relay")
	}
	dbURL := testsvc.PostgresURL(t)
	c := startOrchestrator(t, dbURL, "KICI_CLUSTER_ROLE=coordinator")
	var created apiv1.JoinTokenCreated
	c.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	w := startWorker(t, t.TempDir(), created.Token, "http://"+c.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	c.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  direct:
    runs-on: [direct]
    steps:
      - run: "true"
  relayed:
    runs-on: [relayed]
    steps:
      - run: "true"
`})
	startAgent(t, c, "", "direct-agent", []string{"direct"})
	startAgent(t, c, "ws://"+w.addr+"/ws", "relayed-agent", []string{"relayed"})
	measureStarts(t, c, 30*time.Second, map[string]string{"direct": "direct agent", "relayed": "agent behind a worker"})
}

// measureStarts pushes 30 runs on c, one at a time, and logs p50 and p90
// of each job's time from its run's creation to its "running" report,
// under the name names gives its job.
func measureStarts(t *testing.T, c *orchestrator, timeout time.Duration, names map[string]string) {
	t.Helper()
	starts := map[string][]time.Duration{}
	for range 30 {
		id := c.push(t)
		r := c.waitRun(t, id, timeout, "the run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run %s: %s (%s)", id, r.Status, r.Error)
		}
		for _, j := range r.Jobs {
			starts[j.Name] = append(starts[j.Name], j.StartedAt.Sub(r.CreatedAt))
		}
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	for _, job := range slices.Sorted(maps.Keys(names)) {
		ds := starts[job]
		if len(ds) == 0 {
			t.Fatalf("no run had a job %q", job)
		}
		t.Logf("%s: run created → job running p50 %s, p90 %s (%d runs)", names[job],
			q(ds, 0.5).Round(100*time.Microsecond), q(ds, 0.9).Round(100*time.Microsecond), len(ds))
	}
}

// measureReroute turns on TestMeasureRerouteToWorkerScaler, a measurement
// for docs/benchmarks.md: go test ./internal/e2e/ -run
// TestMeasureRerouteToWorkerScaler -measure-reroute.
var measureReroute = flag.Bool("measure-reroute", false, "measure the time from a job's run to the job running on an agent a worker's scaler spawned for it")

// TestMeasureRerouteToWorkerScaler measures, over 30 runs of one job that
// only a worker's bare-metal scaler covers, the time from the run's
// creation to the coordinator applying the job's "running" report: the
// coordinator routes the job to the worker, the worker spawns a one-shot
// agent process, the agent dials the worker, is relayed to the
// coordinator, registers (its token checked by the worker) and takes the
// job. Same for a bare-metal scaler of the coordinator itself, for
// comparison. It reports p50 and p90 and asserts no time.
func TestMeasureRerouteToWorkerScaler(t *testing.T) {
	if !*measureReroute {
		t.Skip("a measurement: run with -measure-reroute")
	}
	dbURL := testsvc.PostgresURL(t)
	local := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: here
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [here]
        binaryPath: %s
`, agentBin()))
	c := startOrchestrator(t, dbURL, "KICI_CLUSTER_ROLE=coordinator", "KICI_SCALER_CONFIG_PATH="+local)
	var created apiv1.JoinTokenCreated
	c.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	remote := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: edge
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [edge]
        binaryPath: %s
`, agentBin()))
	w := startWorkerOn(t, nil, freeAddr(t), t.TempDir(), created.Token, []string{"KICI_SCALER_CONFIG_PATH=" + remote}, "http://"+c.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	waitFor(t, 30*time.Second, "the worker's scalers offered", func() bool {
		ws := c.workers(t)
		return len(ws) == 1 && ws[0].Connected
	})
	c.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  local:
    runs-on: [here]
    steps:
      - run: "true"
  routed:
    runs-on: [edge]
    steps:
      - run: "true"
`})
	measureStarts(t, c, 60*time.Second, map[string]string{"local": "coordinator's own scaler", "routed": "routed to a worker's scaler"})
}
