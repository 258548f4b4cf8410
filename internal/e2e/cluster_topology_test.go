package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// TestThreeCoordinatorsTwoWorkers: three coordinators on one PostgreSQL,
// two workers that list them all, an agent behind each worker with labels
// only it has, and one agent connected to a coordinator directly. A run
// whose three jobs need each of those agents (two of them after the
// first) succeeds, each job on its agent, and is followed to its end on
// every coordinator, each with every job's log.
func TestThreeCoordinatorsTwoWorkers(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200"}
	var coords []*orchestrator
	var urls []string
	for range 3 {
		o := startOrchestrator(t, dbURL, cluster...)
		coords = append(coords, o)
		urls = append(urls, "http://"+o.addr)
	}
	a := coords[0]
	var workers []*workerProc
	for range 2 {
		var created apiv1.JoinTokenCreated
		a.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
		w := startWorker(t, t.TempDir(), created.Token, urls...)
		workers = append(workers, w)
	}
	for _, w := range workers {
		waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	}
	for _, o := range coords {
		waitFor(t, 15*time.Second, "both workers listed on "+o.addr, func() bool {
			n := 0
			for _, p := range o.workers(t) {
				if p.Connected {
					n++
				}
			}
			return n == 2
		})
	}
	marks := t.TempDir()
	step := func(name string) string {
		return fmt.Sprintf("echo %[2]s on $(cat /proc/sys/kernel/hostname) >> %[1]s/%[2]s; echo %[2]s ran", marks, name)
	}
	a.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  direct:
    runs-on: [direct]
    steps:
      - run: %s
  east:
    runs-on: [east]
    needs: [direct]
    steps:
      - run: %s
  west:
    runs-on: [west]
    needs: [direct]
    steps:
      - run: %s
`, step("direct"), step("east"), step("west"))})
	// Each agent reaches the cluster its own way; each is listed on the
	// coordinator the worker relays it to (the first in its list).
	startAgent(t, coords[2], "", "direct-agent", []string{"direct"})
	startAgent(t, a, "ws://"+workers[0].addr+"/ws", "east-agent", []string{"east"})
	startAgent(t, a, "ws://"+workers[1].addr+"/ws", "west-agent", []string{"west"})
	id := a.push(t)
	follows := make([]*stream, len(coords))
	for i, o := range coords {
		follows[i] = o.follow(t, id)
	}
	for i, f := range follows {
		f.waitFor(t, fmt.Sprintf("the run's end on coordinator %d's stream", i), func(ev apiv1.Event) bool {
			return ev.Kind == "run" && ended(apiv1.Run{Status: ev.Status})
		})
	}
	for _, o := range coords {
		r := o.run(t, id)
		if r.Status != "success" {
			t.Fatalf("run on %s: %s (%s), want success; jobs %+v", o.addr, r.Status, r.Error, r.Jobs)
		}
		for _, name := range []string{"direct", "east", "west"} {
			j := job(t, r, name)
			if j.AgentID != name+"-agent" {
				t.Errorf("job %s ran on %q, want %s-agent", name, j.AgentID, name)
			}
			if got := o.logs(t, id, name); !slices.Contains(got, name+" ran") {
				t.Errorf("job %s's log on %s: %q, want its line", name, o.addr, got)
			}
		}
	}
	for _, name := range []string{"direct", "east", "west"} {
		data, err := os.ReadFile(filepath.Join(marks, name))
		if err != nil || strings.Count(string(data), "\n") != 1 {
			t.Errorf("job %s: step ran %q (%v), want once", name, data, err)
		}
	}
}

// TestWorkerKilledMidJobAndRestarted: SIGKILL the worker an agent runs a
// job through, and start it again from its data dir (no token): the agent
// comes back through it with the job in flight, the job succeeds, its step
// ran once and the output the agent buffered meanwhile reaches the log
// once (no line twice).
func TestWorkerKilledMidJobAndRestarted(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	c := startOrchestrator(t, dbURL, "KICI_CLUSTER_ROLE=coordinator", "KICI_AGENT_RECOVERY_WINDOW_MS=60000")
	var created apiv1.JoinTokenCreated
	c.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	dataDir := t.TempDir()
	w := startWorker(t, dataDir, created.Token, "http://"+c.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	marks := t.TempDir()
	c.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  work:
    steps:
      - run: echo ran >> %[1]s/ran; touch %[1]s/started; i=0; while [ ! -e %[1]s/go ]; do i=$((i+1)); echo "tick $i"; sleep 0.2; done; echo done
`, marks)})
	// The agent dials the worker's fixed address, so it finds the restarted
	// worker there.
	startAgent(t, c, "ws://"+w.addr+"/ws", "behind", nil)
	id := c.push(t)
	waitFor(t, 30*time.Second, "the step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	_ = w.cmd.Process.Kill()
	<-w.done
	again := startWorkerAt(t, w.addr, dataDir, "", "http://"+c.addr)
	waitFor(t, 60*time.Second, "the restarted worker to be ready", again.ready)
	waitFor(t, 30*time.Second, "the agent back through the restarted worker", func() bool {
		var list apiv1.AgentList
		c.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
		for _, ag := range list.Agents {
			if ag.ID == "behind" && len(ag.BusyJobs) == 1 {
				return true
			}
		}
		return false
	})
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	r := c.waitRun(t, id, 60*time.Second, "the run to end", ended)
	if r.Status != "success" {
		t.Fatalf("run: %s (%s), want success", r.Status, r.Error)
	}
	if got := readLines(t, filepath.Join(marks, "ran")); len(got) != 1 {
		t.Errorf("the step ran %d times, want once", len(got))
	}
	seen := map[string]int{}
	var ticks int
	for _, l := range c.logs(t, id, "work") {
		if strings.HasPrefix(l, "tick ") {
			seen[l]++
			ticks++
		}
	}
	for l, n := range seen {
		if n != 1 {
			t.Errorf("log line %q stored %d times, want once", l, n)
		}
	}
	if ticks == 0 || len(seen) != ticks {
		t.Errorf("%d tick lines, %d distinct", ticks, len(seen))
	}
	t.Logf("outcome: %d tick lines, each once; the step ran once", ticks)
}
