package e2e

import (
	"flag"
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
	var direct, relayed []time.Duration
	for range 30 {
		id := c.push(t)
		r := c.waitRun(t, id, 30*time.Second, "the run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run %s: %s (%s)", id, r.Status, r.Error)
		}
		for _, j := range r.Jobs {
			d := j.StartedAt.Sub(r.CreatedAt)
			if j.Name == "direct" {
				direct = append(direct, d)
			} else {
				relayed = append(relayed, d)
			}
		}
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"direct agent", direct}, {"agent behind a worker", relayed}} {
		t.Logf("%s: run created → job running p50 %s, p90 %s (%d runs)", m.name,
			q(m.ds, 0.5).Round(100*time.Microsecond), q(m.ds, 0.9).Round(100*time.Microsecond), len(m.ds))
	}
}
