package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// TestLeaderKilledMidJobAgentsFinishOnAnotherCoordinator: three
// coordinators share PostgreSQL; agents that list them all are connected
// to the leader and run 4 jobs while 2 wait in the queue, and a follower
// watches the run on the third coordinator. SIGKILL the leader: another
// coordinator leads within 15 s under a new term, the agents move with
// their jobs in flight, every job succeeds (the 2 queued ones dispatched
// by a survivor), every step ran exactly once, the follower sees the run
// end, and each job's log reads whole on both survivors.
func TestLeaderKilledMidJobAgentsFinishOnAnotherCoordinator(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200",
		"KICI_INSTANCE_HEARTBEAT_MS=200"}
	lead := startOrchestrator(t, dbURL, cluster...)
	waitFor(t, 10*time.Second, "the first coordinator to lead", func() bool {
		return lead.metricValue(t, "kici_orch_cluster_leader") == 1
	})
	survivors := []*orchestrator{startOrchestrator(t, dbURL, cluster...), startOrchestrator(t, dbURL, cluster...)}
	const as, bs = 1, 6
	marks := t.TempDir()
	// Each step prints a line before it waits, so that part of its log is
	// stored by the coordinator that dies.
	lead.addRepo(t, map[string]string{"ci.yml": strings.Replace(matrixWorkflow(marks, as, bs), "run: echo ran >>", "run: echo before; echo ran >>", 1)})
	urls := fmt.Sprintf("ws://%s/ws,ws://%s/ws,ws://%s/ws", lead.addr, survivors[0].addr, survivors[1].addr)
	for i := range 2 {
		startAgent(t, lead, urls, fmt.Sprintf("mover-%d", i), nil, "KICI_AGENT_CONCURRENCY=2")
	}
	id := lead.push(t)
	follower := survivors[1].follow(t, id)
	waitFor(t, 30*time.Second, "4 jobs to start", func() bool {
		return countGlob(t, filepath.Join(marks, "started-*")) >= 4
	})
	waitFor(t, 15*time.Second, "the running jobs' first lines stored by the leader", func() bool {
		n := 0
		for _, j := range lead.run(t, id).Jobs {
			if j.Status == "running" && slices.Contains(lead.logs(t, id, j.Name), "before") {
				n++
			}
		}
		return n == 4
	})
	oldTerm := lead.metricValue(t, "kici_orch_cluster_leader_term")
	lead.kill()
	killed := time.Now()
	var next *orchestrator
	waitFor(t, 15*time.Second, "a surviving coordinator to lead", func() bool {
		l0, l1 := survivors[0].metricValue(t, "kici_orch_cluster_leader"), survivors[1].metricValue(t, "kici_orch_cluster_leader")
		if l0 == 1 && l1 == 1 {
			t.Fatal("two coordinators lead")
		}
		switch {
		case l0 == 1:
			next = survivors[0]
		case l1 == 1:
			next = survivors[1]
		}
		return next != nil
	})
	t.Logf("a survivor leads %s after the kill", time.Since(killed).Round(time.Millisecond))
	if term := next.metricValue(t, "kici_orch_cluster_leader_term"); oldTerm < 1 || term <= oldTerm {
		t.Errorf("leader term: %v after the failover, %v before; want it to grow", term, oldTerm)
	}
	// The agents reach a survivor with their jobs before the steps end.
	waitFor(t, 15*time.Second, "both agents on the survivors", func() bool {
		return len(survivors[0].agentIDs(t))+len(survivors[1].agentIDs(t)) == 2
	})
	if n := countGlob(t, filepath.Join(marks, "started-*")); n != 4 {
		t.Fatalf("%d jobs started before the steps were released, want 4", n)
	}
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	follower.waitFor(t, "the run's end on the third coordinator's stream", func(ev apiv1.Event) bool {
		return ev.Kind == "run" && ev.Status == "success"
	})
	for _, o := range survivors {
		r := o.waitRun(t, id, 60*time.Second, "the run to end", ended)
		for _, j := range r.Jobs {
			if j.Status != "success" {
				t.Errorf("job %s: %s (%s), want success", j.Name, j.Status, j.Error)
			}
			// The log reads whole, the lines stored by the dead
			// coordinator before the kill included.
			got := o.logs(t, id, j.Name)
			if !slices.Contains(got, "before") || !slices.Contains(got, "done") {
				t.Errorf("job %s: log on %s %q, want its step's lines from before and after the kill", j.Name, o.addr, got)
			}
		}
		if r.Status != "success" {
			t.Errorf("run: %s (%s), want success", r.Status, r.Error)
		}
	}
	assertRanOnce(t, marks, as, bs)
	_ = os.Remove(filepath.Join(marks, "go"))
}

// agentIDs lists the ids of the agents connected to o.
func (o *orchestrator) agentIDs(t *testing.T) []string {
	t.Helper()
	var list apiv1.AgentList
	o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
	var ids []string
	for _, a := range list.Agents {
		ids = append(ids, a.ID)
	}
	return ids
}

// TestRunFollowableOnEveryCoordinator: a follower of a run on one
// coordinator sees the status changes another coordinator makes (its
// agent runs the job there), live, and a cancel asked for on the
// follower's coordinator stops the step running on the other's agent.
func TestRunFollowableOnEveryCoordinator(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200"}
	a := startOrchestrator(t, dbURL, cluster...)
	b := startOrchestrator(t, dbURL, cluster...)
	marks := t.TempDir()
	a.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  first:
    steps:
      - run: while [ ! -e %[1]s/go ]; do sleep 0.1; done; echo first done
  second:
    needs: [first]
    steps:
      - run: trap 'touch %[1]s/second-stopped; exit 1' TERM; touch %[1]s/second-started; sleep 60 & wait; touch %[1]s/second-finished
`, marks)})
	startAgent(t, a, "", "only-on-a", nil)
	id := a.push(t)
	seen := b.follow(t, id)
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	// Every change below is made on a, whose agent runs the jobs.
	seen.waitFor(t, "first's success on b's stream", func(ev apiv1.Event) bool {
		return ev.Kind == "job" && ev.Job == "first" && ev.Status == "success"
	})
	seen.waitFor(t, "first's log line live on b's stream", func(ev apiv1.Event) bool {
		for _, l := range ev.Lines {
			if ev.Kind == "log" && l.Text == "first done" {
				return true
			}
		}
		return false
	})
	if got := b.logs(t, id, "first"); !slices.Contains(got, "first done") {
		t.Errorf("first's log read on b: %q, want its line", got)
	}
	seen.waitFor(t, "second running on b's stream", func(ev apiv1.Event) bool {
		return ev.Kind == "job" && ev.Job == "second" && ev.Status == "running"
	})
	waitFor(t, 15*time.Second, "second's step to start", func() bool { return fileExists(filepath.Join(marks, "second-started")) })
	b.api(t, "POST", "/api/v1/runs/"+id+"/cancel", nil, nil, http.StatusOK)
	seen.waitFor(t, "the run cancelled on b's stream", func(ev apiv1.Event) bool {
		return ev.Kind == "run" && ev.Status == "cancelled"
	})
	r := a.run(t, id)
	if j := job(t, r, "second"); j.Status != "cancelled" {
		t.Errorf("second: %s (%s), want cancelled by its agent", j.Status, j.Error)
	}
	for _, o := range []*orchestrator{a, b} {
		if v := o.metricValue(t, "kici_orch_cluster_events_dropped_total"); v != 0 {
			t.Errorf("%s: kici_orch_cluster_events_dropped_total = %v, want 0 (exposed, nothing dropped)", o.addr, v)
		}
	}
	// The agent on a stopped the step: its process group got SIGTERM.
	waitFor(t, 15*time.Second, "the step to be stopped by its agent", func() bool {
		return fileExists(filepath.Join(marks, "second-stopped"))
	})
	if fileExists(filepath.Join(marks, "second-finished")) {
		t.Error("the cancelled step ran to its end")
	}
}

// stream is the events a follower of a run received so far.
type stream struct {
	mu     sync.Mutex
	events []apiv1.Event
	more   chan struct{}
}

// follow opens the run's event stream on o and collects its events until
// the test ends.
func (o *orchestrator) follow(t *testing.T, runID string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+o.addr+"/api/v1/runs/"+runID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow run %s: status %d", runID, resp.StatusCode)
	}
	s := &stream{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { resp.Body.Close(); <-done })
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev apiv1.Event
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Kind == "" {
				continue
			}
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// waitFor waits up to 30 s for an event that satisfies ok.
func (s *stream) waitFor(t *testing.T, what string, ok func(apiv1.Event) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		for _, ev := range s.events {
			if ok(ev) {
				s.mu.Unlock()
				return
			}
		}
		n := len(s.events)
		s.mu.Unlock()
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("waited 30 s for %s; %d events seen", what, n)
		}
	}
}

// TestPausedLeaderIsDeposedAndTakesBackItsJob: SIGSTOP the leader past
// its lease and instance TTLs while its agent runs a job. The other
// coordinator leads and takes the job's dispatch over (waiting for the
// agent); after SIGCONT the old leader knows it is deposed (acts no more),
// takes back the dispatch of its still connected agent, and the job
// succeeds with its step run once.
func TestPausedLeaderIsDeposedAndTakesBackItsJob(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200",
		"KICI_INSTANCE_HEARTBEAT_MS=200", "KICI_AGENT_RECOVERY_WINDOW_MS=30000"}
	old := startOrchestrator(t, dbURL, cluster...)
	waitFor(t, 10*time.Second, "the first coordinator to lead", func() bool {
		return old.metricValue(t, "kici_orch_cluster_leader") == 1
	})
	next := startOrchestrator(t, dbURL, cluster...)
	marks := t.TempDir()
	old.addRepo(t, map[string]string{"ci.yml": matrixWorkflow(marks, 1, 1)})
	startAgent(t, old, "", "stays", nil) // connected to the old leader only
	id := old.push(t)
	waitFor(t, 30*time.Second, "the job to start", func() bool {
		return countGlob(t, filepath.Join(marks, "started-*")) == 1
	})
	why := func() string {
		var q apiv1.Queue
		next.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		if len(q.Jobs) != 1 {
			return fmt.Sprintf("%d queue rows", len(q.Jobs))
		}
		return q.Jobs[0].WhyPending
	}
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = old.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // never leave it stopped: its stop would wait 10 s
	waitFor(t, 15*time.Second, "the other coordinator to lead", func() bool {
		return next.metricValue(t, "kici_orch_cluster_leader") == 1
	})
	t.Logf("the other coordinator leads %s after the SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "the new leader to take the dispatch over", func() bool {
		return strings.HasPrefix(why(), "waiting for agent stays to reconnect")
	})
	resume()
	waitFor(t, 10*time.Second, "the old leader to know it is deposed", func() bool {
		return old.metricValue(t, "kici_orch_cluster_leader") == 0
	})
	waitFor(t, 10*time.Second, "the old leader to log that it no longer leads", func() bool {
		return strings.Contains(old.output.String(), "no longer the leader")
	})
	if next.metricValue(t, "kici_orch_cluster_leader") != 1 {
		t.Error("the new leader stopped leading when the old one came back")
	}
	waitFor(t, 10*time.Second, "the old leader to take back its agent's job", func() bool {
		return why() == "running on agent stays"
	})
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	r := next.waitRun(t, id, 30*time.Second, "the run to end", ended)
	if r.Status != "success" {
		t.Errorf("run: %s (%s), want success", r.Status, r.Error)
	}
	assertRanOnce(t, marks, 1, 1)
}
