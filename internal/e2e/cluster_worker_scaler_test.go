package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/testsvc"
)

// nodeOrphans is a per-node answer of GET /api/v1/scalers/orphans?node=.
type nodeOrphans struct {
	Node     string               `json:"node"`
	OK       bool                 `json:"ok"`
	Error    string               `json:"error"`
	Compute  []scaler.Orphan      `json:"compute"`
	Outcomes []scaler.StopOutcome `json:"outcomes"`
}

// TestWorkerScalersServeRoutedJobs: two coordinators and a worker that
// runs bare-metal scalers. A job only the worker's scalers cover is routed
// there and runs on the agent it spawns (relayed through the worker); a
// spawn that fails on the worker shows its provisioning error on the
// queued job on both coordinators; the worker's compute is listed per
// node, with the job's binding read from the coordinators' queue, and a
// stop of tracked compute is refused. Then the worker is killed mid-job
// and restarted: it adopts its agent, which reclaims the job; the step ran
// once and every scaler event reached the job's timeline once.
func TestWorkerScalersServeRoutedJobs(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_AGENT_RECOVERY_WINDOW_MS=60000"}
	a := startOrchestrator(t, dbURL, cluster...)
	b := startOrchestrator(t, dbURL, cluster...)
	var created apiv1.JoinTokenCreated
	a.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)

	notAgent := filepath.Join(t.TempDir(), "not-an-agent")
	if err := os.WriteFile(notAgent, []byte("#!/bin/sh\n"), 0o644); err != nil { // not executable
		t.Fatal(err)
	}
	cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: edge
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [linux, edge]
        binaryPath: %s
  - name: broken
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, broken]
        binaryPath: %s
`, agentBin(), notAgent))
	dataDir, addr := t.TempDir(), freeAddr(t)
	env := []string{"KICI_SCALER_CONFIG_PATH=" + cfg}
	urls := []string{"http://" + a.addr, "http://" + b.addr}
	w := startWorkerOn(t, nil, addr, dataDir, created.Token, env, urls...)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	var node string
	waitFor(t, 30*time.Second, "the worker listed", func() bool {
		if ws := a.workers(t); len(ws) == 1 {
			node = ws[0].ID
			return true
		}
		return false
	})

	marks := t.TempDir()
	a.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  edge:
    runs-on: [linux, edge]
    steps:
      - run: echo ran >> %[1]s/ran; touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.1; done; echo "edge done"
  broken:
    runs-on: [linux, broken]
    steps: [{run: echo never}]
`, marks)})
	id := a.push(t)

	// The worker-side spawn failure is the queued job's provisioning
	// error, on every coordinator.
	for _, o := range []*orchestrator{a, b} {
		waitFor(t, 60*time.Second, "the broken job's provisioning error on "+o.addr, func() bool {
			var q apiv1.Queue
			o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
			for _, e := range q.Jobs {
				if e.Job == "broken" && strings.Contains(e.WhyPending, "agent binary") {
					return true
				}
			}
			return false
		})
	}

	waitFor(t, 60*time.Second, "the edge step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	agentID := job(t, a.run(t, id), "edge").AgentID
	if !strings.HasPrefix(agentID, "scaler-bare-metal-") {
		t.Fatalf("edge job runs on agent %q, want a scaler-bare-metal agent of the worker", agentID)
	}

	// Orphans per node: the worker lists its agent, tracked because the
	// shared queue binds it to the job.
	var on nodeOrphans
	b.api(t, "GET", "/api/v1/scalers/orphans?node="+node, nil, &on, http.StatusOK)
	i := slices.IndexFunc(on.Compute, func(o scaler.Orphan) bool { return o.ID == agentID })
	if !on.OK || on.Node != node || i < 0 || on.Compute[i].Status != scaler.ComputeTracked || !slices.Contains(on.Compute[i].TrackedBy, scaler.TrackedByBoundJob) {
		t.Fatalf("orphans of node %s: got %+v, want %s tracked by bound-job", node, on, agentID)
	}
	var all struct {
		Nodes []nodeOrphans `json:"nodes"`
	}
	b.api(t, "GET", "/api/v1/scalers/orphans?node=all", nil, &all, http.StatusOK)
	if len(all.Nodes) != 2 || !all.Nodes[0].OK || len(all.Nodes[0].Compute) != 0 || all.Nodes[1].Node != node || !all.Nodes[1].OK {
		t.Fatalf("orphans of every node: got %+v, want the coordinator (no scalers: empty) then the worker", all.Nodes)
	}
	var stop nodeOrphans
	b.api(t, "POST", "/api/v1/scalers/orphans/stop", map[string]any{"node": node, "ids": []string{agentID}}, &stop, http.StatusOK)
	if !stop.OK || len(stop.Outcomes) != 1 || stop.Outcomes[0].Outcome != scaler.OutcomeTracked {
		t.Fatalf("stop of the working agent: got %+v, want refused as tracked", stop)
	}

	// Kill the worker mid-job and start it again from its data dir.
	_ = w.cmd.Process.Kill()
	<-w.done
	again := startWorkerOn(t, nil, addr, dataDir, "", env, urls...)
	waitFor(t, 60*time.Second, "the restarted worker to be ready", again.ready)
	waitFor(t, 60*time.Second, "the scaler agent back with its job", func() bool {
		for _, o := range []*orchestrator{a, b} {
			var list apiv1.AgentList
			o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
			for _, ag := range list.Agents {
				if ag.ID == agentID && len(ag.BusyJobs) == 1 {
					return true
				}
			}
		}
		return false
	})
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	r := b.waitRun(t, id, 60*time.Second, "the edge job to end", func(r apiv1.Run) bool {
		for _, j := range r.Jobs {
			if j.Name == "edge" {
				return j.FinishedAt != nil
			}
		}
		return false
	})
	if j := job(t, r, "edge"); j.Status != "success" || j.AgentID != agentID {
		t.Fatalf("edge job: %s on %q (%s), want success on %s", j.Status, j.AgentID, j.Error, agentID)
	}
	if got := readLines(t, filepath.Join(marks, "ran")); len(got) != 1 {
		t.Errorf("the step ran %d times, want once", len(got))
	}
	// Every scaler event the worker relayed is in the timeline once, on
	// the coordinator that did not route the job too.
	logs := b.logs(t, id, "edge")
	seen := map[string]int{}
	for _, l := range logs {
		if strings.HasPrefix(l, "[scaler.") {
			seen[l]++
		}
	}
	if !slices.ContainsFunc(logs, func(l string) bool { return strings.HasPrefix(l, "[scaler.provisioning]") }) ||
		!slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "edge done") }) {
		t.Errorf("edge job's logs on b lack the worker's provisioning events or the step's output: %q", logs)
	}
	for l, n := range seen {
		if n != 1 {
			t.Errorf("scaler event %q in the timeline %d times, want once", l, n)
		}
	}
	applied := a.metric(t, `kici_orch_cluster_outbox_entries_total{verdict="applied"}`) + b.metric(t, `kici_orch_cluster_outbox_entries_total{verdict="applied"}`)
	dups := a.metric(t, `kici_orch_cluster_outbox_entries_total{verdict="duplicate"}`) + b.metric(t, `kici_orch_cluster_outbox_entries_total{verdict="duplicate"}`)
	failures := a.metric(t, `kici_orch_scaler_spawn_failures_total{backend="bare-metal",bound="true"}`) + b.metric(t, `kici_orch_scaler_spawn_failures_total{backend="bare-metal",bound="true"}`)
	if applied < float64(len(seen)) || failures < 1 {
		t.Errorf("outbox entries applied %v (want at least the %d events of the edge job), spawn failures counted %v (want at least 1)", applied, len(seen), failures)
	}
	b.api(t, "POST", "/api/v1/runs/"+id+"/cancel", nil, nil, http.StatusOK)
	t.Logf("outcome: %d scaler events of the edge job, each once; outbox entries applied %v, duplicates skipped %v", len(seen), applied, dups)
}

// TestWorkerScalerReloadOnSIGHUP: a worker re-reads its scaler
// configuration on SIGHUP (it used to die of the signal); a job no scaler
// covered waits, and runs once the reloaded worker offers a scaler for it.
func TestWorkerScalerReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	c := startOrchestrator(t, dbURL, "KICI_CLUSTER_ROLE=coordinator")
	var created apiv1.JoinTokenCreated
	c.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	metal := func(name, label string) string {
		return fmt.Sprintf("  - name: %s\n    type: bare-metal\n    maxAgents: 1\n    labelSets:\n      - labels: [linux, %s]\n        binaryPath: %s\n", name, label, agentBin())
	}
	cfg := writeScalers(t, "version: 1\nscalers:\n"+metal("first", "first"))
	w := startWorkerOn(t, nil, freeAddr(t), t.TempDir(), created.Token, []string{"KICI_SCALER_CONFIG_PATH=" + cfg}, "http://"+c.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	c.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  late:
    runs-on: [linux, late]
    steps: [{run: echo late ran}]
`})
	id := c.push(t)
	waitFor(t, 30*time.Second, "the job waiting with no scaler for it", func() bool {
		var q apiv1.Queue
		c.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		return len(q.Jobs) == 1 && strings.Contains(q.Jobs[0].WhyPending, "no scaler")
	})
	if err := os.WriteFile(cfg, []byte("version: 1\nscalers:\n"+metal("first", "first")+metal("late", "late")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := c.waitRun(t, id, 60*time.Second, "the run to end", ended)
	if j := job(t, r, "late"); r.Status != "success" || !strings.HasPrefix(j.AgentID, "scaler-bare-metal-") {
		t.Fatalf("run %s, job on %q (%s): want success on the reloaded scaler's agent", r.Status, j.AgentID, j.Error)
	}
	select {
	case <-w.done:
		t.Fatalf("the worker exited on SIGHUP:\n%s", w.output.String())
	default:
	}
	if !strings.Contains(w.output.String(), "scaler config reloaded") {
		t.Errorf("worker log lacks the reload:\n%s", w.output.String())
	}
}
