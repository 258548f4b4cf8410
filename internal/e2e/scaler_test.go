package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// writeScalers writes a scalers.yaml into a new directory and returns its
// path.
func writeScalers(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scalers.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func agentBin() string { return filepath.Join(binDir, "kici-agent") }

// agentProcesses returns the pids of live processes whose environment
// says they are the given kici agent.
func agentProcesses(t *testing.T, agentID string) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "KICI_AGENT_ID="+agentID && alive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// metric returns the value of one sample of the orchestrator's metrics,
// or 0 when it is absent.
func (o *orchestrator) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + o.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == sample {
			v, _ := strconv.ParseFloat(value, 64)
			return v
		}
	}
	return 0
}

// TestBareMetalScalerRunsJobInSpawnedProcess: a job no static agent can
// take runs on a one-shot agent process the bare-metal scaler spawns, the
// provisioning steps are in the job's logs, and the process is gone after.
func TestBareMetalScalerRunsJobInSpawnedProcess(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 2
    labelSets:
      - labels: [linux, bare-metal]
        binaryPath: %s
`, agentBin()))
		o := startOrchestrator(t, dbURL, "KICI_SCALER_CONFIG_PATH="+cfg)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  metal:
    runs-on: [linux, bare-metal]
    steps: [{run: echo "on $KICI_JOB_NAME"}]
`})
		id := o.push(t)
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		j := job(t, r, "metal")
		if r.Status != "success" || !strings.HasPrefix(j.AgentID, "scaler-bare-metal-") {
			t.Fatalf("run %s, job on agent %q (%s): want success on a scaler-bare-metal agent", r.Status, j.AgentID, j.Error)
		}
		logs := o.logs(t, id, "metal")
		for _, want := range []string{"[scaler.provisioning]", "[scaler.ready]", "[agent.connecting]", "on metal"} {
			if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, want) }) {
				t.Errorf("job logs lack %q: %q", want, logs)
			}
		}
		waitFor(t, 15*time.Second, "the spawned agent process to be gone", func() bool { return len(agentProcesses(t, j.AgentID)) == 0 })
		for sample, min := range map[string]float64{
			`kici_orch_scaler_provisioning_seconds_count{backend="bare-metal"}`: 1,
			`kici_orch_scaler_max_agents{backend="bare-metal",scaler="metal"}`:  2,
		} {
			if got := o.metric(t, sample); got < min {
				t.Errorf("metric %s: got %v, want at least %v", sample, got, min)
			}
		}
	})
}

// hasMetric reports whether a line of the metrics output is exactly line.
func (o *orchestrator) hasMetric(t *testing.T, line string) bool {
	t.Helper()
	resp, err := http.Get("http://" + o.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == line {
			return true
		}
	}
	return false
}

// TestWrongBinaryPathFailsJobWithSpawnError: a scaler whose binary does
// not exist fails the job within the queue timeout with the spawn error
// as its error and in its log, counts a bound spawn failure, and defers
// the scaler instead of retrying at once.
func TestWrongBinaryPathFailsJobWithSpawnError(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		cfg := writeScalers(t, `
version: 1
scalers:
  - name: broken
    type: bare-metal
    maxAgents: 4
    labelSets:
      - labels: [linux, bare-metal]
        binaryPath: /nonexistent/kici-agent
`)
		o := startOrchestrator(t, dbURL, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_QUEUE_TIMEOUT_MS=4000", "KICI_QUEUE_SWEEP_INTERVAL_MS=100")
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  one:
    runs-on: [linux, bare-metal]
    steps: [{run: "true"}]
  two:
    runs-on: [linux, bare-metal]
    steps: [{run: "true"}]
`})
		id := o.push(t)
		var q apiv1.Queue
		waitFor(t, 10*time.Second, "the scaler to be deferred", func() bool {
			o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
			return slices.ContainsFunc(q.Jobs, func(e apiv1.QueueEntry) bool { return strings.Contains(e.WhyPending, "deferred until") })
		})
		if !o.hasMetric(t, `kici_orch_dispatch_queue_depth_by_label{label="bare-metal"} 2`) {
			t.Errorf("queue depth of label bare-metal while both jobs wait: not 2")
		}
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		// The drained label is still reported, at zero.
		if !o.hasMetric(t, `kici_orch_dispatch_queue_depth_by_label{label="bare-metal"} 0`) {
			t.Errorf("the drained label bare-metal is not reported at 0 in the queue depth")
		}
		// A job a spawn was attempted for fails with the spawn's error; one
		// that was only ever offered to the deferred scaler has no
		// provisioning error, and fails with the generic queue timeout.
		var failedLines, named int
		for _, name := range []string{"one", "two"} {
			spawned := false
			for _, l := range o.logs(t, id, name) {
				if strings.Contains(l, "[scaler.failed]") && strings.Contains(l, "/nonexistent/kici-agent") {
					failedLines++
					spawned = true
				}
			}
			j := job(t, r, name)
			want := "queue timeout: no agent with labels"
			if spawned {
				want = "/nonexistent/kici-agent"
				named++
			}
			if j.Status != "failure" || !strings.Contains(j.Error, want) {
				t.Errorf("job %s (spawned for: %t): got %s (%q), want failure containing %q", name, spawned, j.Status, j.Error, want)
			}
		}
		if named == 0 {
			t.Errorf("no job failed naming the binary, want at least the first")
		}
		bound := o.metric(t, `kici_orch_scaler_spawn_failures_total{backend="bare-metal",bound="true"}`)
		if bound < 1 {
			t.Errorf("spawn failures with bound=true: got %v, want at least 1", bound)
		}
		// Deferred after the first refusal: at most one attempt per job
		// queued at that moment (both may be requested before the first
		// refusal comes back), never one per sweep of the 4 s wait.
		if bound > 2 || float64(failedLines) != bound {
			t.Errorf("spawn attempts: %v failures counted, %d failure lines; want at most 2, one line each", bound, failedLines)
		}
	})
}

// TestAgentExitingBeforeRegisteringReportsItsLastLine: an agent that dies
// before it registers yields scaler.failed carrying its last output line.
func TestAgentExitingBeforeRegisteringReportsItsLastLine(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: flaky
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, flaky]
        binaryPath: %s
        env: {KICI_ORCHESTRATOR_URL: "http://127.0.0.1:1/ws"}
`, agentBin()))
		o := startOrchestrator(t, dbURL, "KICI_SCALER_CONFIG_PATH="+cfg)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  flaky:
    runs-on: [flaky]
    steps: [{run: "true"}]
`})
		id := o.push(t)
		var line string
		waitFor(t, 30*time.Second, "a scaler.failed line", func() bool {
			for _, l := range o.logs(t, id, "flaky") {
				if strings.Contains(l, "[scaler.failed]") {
					line = l
					return true
				}
			}
			return false
		})
		// kici-agent refuses the URL with this message before exiting.
		if !strings.Contains(line, "want a ws:// or wss:// URL") {
			t.Errorf("scaler.failed detail: got %q, want the agent's last output line", line)
		}
		var q apiv1.Queue
		waitFor(t, 10*time.Second, "why_pending to carry the provisioning error", func() bool {
			o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
			return len(q.Jobs) == 1 && strings.Contains(q.Jobs[0].WhyPending, "want a ws:// or wss:// URL")
		})
	})
}

// TestMaxAgentsBoundsLiveAgents: 50 jobs against a scaler with maxAgents 4
// never see more than 4 live scaler agents, and all finish.
func TestMaxAgentsBoundsLiveAgents(t *testing.T) {
	t.Parallel()
	cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: pool
    type: bare-metal
    maxAgents: 4
    labelSets:
      - labels: [linux, pool]
        binaryPath: %s
`, agentBin()))
	o := startOrchestrator(t, "", "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_LOG_LEVEL=info")
	var shards []string
	for i := 1; i <= 50; i++ {
		shards = append(shards, fmt.Sprintf(`"%d"`, i))
	}
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  many:
    runs-on: [pool]
    matrix: {n: [%s]}
    steps: [{run: "sleep 0.05"}]
`, strings.Join(shards, ", "))})
	id := o.push(t)
	var mu sync.Mutex
	most := 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n := liveAgentProcesses(t, "scaler-bare-metal-", "ws://"+o.addr+"/ws")
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}
	}()
	r := o.waitRun(t, id, 180*time.Second, "50 jobs to end", ended)
	close(stop)
	<-sampled
	if r.Status != "success" {
		t.Fatalf("run: got %s (%s), want success", r.Status, r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 4 || most == 0 {
		t.Errorf("at most %d live scaler agents were sampled, want between 1 and 4", most)
	}
	t.Logf("most live scaler agents sampled: %d", most)
}

// liveAgentProcesses counts live kici-agent processes whose agent id
// starts with prefix and that dial url (other tests run agents too). A child the agent has forked but not yet exec'd
// shares its executable and environment, so a process whose parent is
// itself a kici-agent is not counted.
func liveAgentProcesses(t *testing.T, prefix, url string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isAgentExe(pid) || !alive(pid) || isAgentExe(parentOf(pid)) {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		env, _ := io.ReadAll(f)
		f.Close()
		if strings.Contains(string(env), "KICI_AGENT_ID="+prefix) && strings.Contains(string(env), "KICI_ORCHESTRATOR_URL="+url+"\x00") {
			n++
		}
	}
	return n
}

func isAgentExe(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && exe == agentBin()
}

func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data)[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// TestOrchestratorRestartAdoptsBareMetalAgent: the orchestrator dies with
// SIGKILL while a spawned bare-metal agent runs a job; after the restart
// the agent reconnects, is adopted, and finishes the job.
func TestOrchestratorRestartAdoptsBareMetalAgent(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, adopt]
        binaryPath: %s
`, agentBin()))
		marks := t.TempDir()
		// A generous recovery window: under load the agent's reconnect
		// backoff (1 s growing by half each try) can pass 10 s.
		o := startOrchestrator(t, dbURL, "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_AGENT_RECOVERY_WINDOW_MS=30000")
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  held:
    runs-on: [adopt]
    steps: [{run: "touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.02; done; echo finished"}]
`, marks)})
		id := o.push(t)
		waitFor(t, 30*time.Second, "the job to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
		o.kill()
		o.start()
		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		j := job(t, r, "held")
		if r.Status != "success" || !strings.HasPrefix(j.AgentID, "scaler-bare-metal-") {
			t.Fatalf("run %s, job %s on %q (%s): want success on the adopted agent", r.Status, j.Status, j.AgentID, j.Error)
		}
		waitFor(t, 15*time.Second, "the adopted agent's process to be gone", func() bool { return len(agentProcesses(t, j.AgentID)) == 0 })
	})
}

// TestScalerAgentLostMidJobFailsAtOnce: a scaler agent dies mid-job. Its
// compute is destroyed when it disconnects, so it cannot come back: the
// job fails at once, saying so, instead of after the (here 10-minute)
// recovery window.
func TestScalerAgentLostMidJobFailsAtOnce(t *testing.T) {
	t.Parallel()
	cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, doomed]
        binaryPath: %s
`, agentBin()))
	marks := t.TempDir()
	o := startOrchestrator(t, "", "KICI_SCALER_CONFIG_PATH="+cfg, "KICI_AGENT_RECOVERY_WINDOW_MS=600000")
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  held:
    runs-on: [doomed]
    retry: 0 # a lost attempt ends the job here (retry_test.go retries one)
    steps: [{run: "touch %[1]s/started; for i in $(seq 1 1200); do sleep 0.05; done"}]
`, marks)})
	id := o.push(t)
	waitFor(t, 30*time.Second, "the job to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	agentID := job(t, o.run(t, id), "held").AgentID
	pids := agentProcesses(t, agentID)
	if len(pids) == 0 {
		t.Fatalf("no process of agent %q", agentID)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
	if j := job(t, r, "held"); j.Status != "failure" || !strings.Contains(j.Error, "scaler agents are single-use") {
		t.Fatalf("job %s (%q): want failure saying the scaler agent was lost", j.Status, j.Error)
	}
}
