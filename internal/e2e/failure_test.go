package e2e

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAgentKilledJobEndsAgentLost: an agent killed with SIGKILL mid-job
// does not come back, so after the recovery window its job fails as
// "agent lost" and the run fails.
func TestAgentKilledJobEndsAgentLost(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		const window = 1500 * time.Millisecond
		o := startOrchestrator(t, dbURL, fmt.Sprintf("KICI_AGENT_RECOVERY_WINDOW_MS=%d", window.Milliseconds()))
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    retry: 0 # the end of a lost attempt, not its retry (retry_test.go)
    steps:
      - run: echo $$ > %s/shell; exec sleep 30
`, marks)})
		a := startAgent(t, o, "", "doomed", nil)
		id := o.push(t)
		waitFor(t, 30*time.Second, "the step to start", func() bool { return len(readLines(t, filepath.Join(marks, "shell"))) > 0 })
		t.Cleanup(func() { killLine(readLines(t, filepath.Join(marks, "shell"))) })
		killed := time.Now() // before the kill: kill returns once the agent's reaper is done too
		a.kill()
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		elapsed := time.Since(killed)
		j := job(t, r, "long")
		if r.Status != "failure" || j.Status != "failure" || !strings.Contains(j.Error, "agent lost") {
			t.Fatalf("run %s, job %s (%q): want failure with \"agent lost\"", r.Status, j.Status, j.Error)
		}
		if elapsed < window {
			t.Errorf("job failed %s after the kill, before the %s recovery window ended", elapsed, window)
		}
	})
}

// TestAgentReconnectMidJobStoresEveryLineOnce: the agent's connection
// drops while a step prints; the agent reconnects, replays what was not
// acknowledged, and the job finishes with every line stored exactly once.
func TestAgentReconnectMidJobStoresEveryLineOnce(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  chatty:
    steps:
      - run: for i in $(seq 1 300); do echo "line $i"; sleep 0.005; done
`})
		p := newProxy(t, o.addr)
		startAgent(t, o, "ws://"+p.addr()+"/ws", "flaky", nil)
		id := o.push(t)
		waitFor(t, 30*time.Second, "some output", func() bool { return len(o.logs(t, id, "chatty")) >= 20 })
		p.cut()
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run: got %s (%s), want success", r.Status, r.Error)
		}
		if p.connections() < 2 {
			t.Fatalf("agent connected %d time(s), want a reconnect", p.connections())
		}
		var got []string
		for _, l := range o.logs(t, id, "chatty") {
			if strings.HasPrefix(l, "line ") {
				got = append(got, l)
			}
		}
		var want []string
		for i := 1; i <= 300; i++ {
			want = append(want, fmt.Sprintf("line %d", i))
		}
		if !slices.Equal(got, want) {
			t.Errorf("stored %d lines, want lines 1..300 once each in order; first difference at %d", len(got), firstDiff(got, want))
		}
	})
}

// TestOrchestratorKilledMidJob: the orchestrator dies with SIGKILL while
// one job runs and others wait; after a restart the agent reconnects and
// reclaims the running job, which finishes, the waiting jobs run, and no
// step runs twice.
func TestOrchestratorKilledMidJob(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  first:
    steps:
      - run: echo first >> %[1]s/ran; touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.02; done; echo first done
  second:
    steps: [{run: echo second >> %[1]s/ran}]
  third:
    steps: [{run: echo third >> %[1]s/ran}]
  last:
    needs: [first, second, third]
    steps: [{run: echo last >> %[1]s/ran}]
`, marks)})
		startAgent(t, o, "", "steady", nil)
		id := o.push(t)
		waitFor(t, 30*time.Second, "the first job to start", func() bool {
			return len(readLines(t, filepath.Join(marks, "started"))) == 0 && fileExists(filepath.Join(marks, "started"))
		})
		o.kill()
		o.start()
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run: got %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
		}
		ran := readLines(t, filepath.Join(marks, "ran"))
		slices.Sort(ran)
		if want := []string{"first", "last", "second", "third"}; !slices.Equal(ran, want) {
			t.Errorf("steps ran %q, want each of %q exactly once", ran, want)
		}
		if got := o.logs(t, id, "first"); !slices.Contains(got, "first done") {
			t.Errorf("logs of first: got %q, want the line written after the restart", got)
		}
	})
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// proxy forwards TCP connections to an address and can cut them all,
// as a network failure would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	count  int
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.count++
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// cut closes every open connection; new ones are still accepted.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}
