package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Targets of the issue for the auto-scaler: the median time from the
// orchestrator's scale request to the spawned agent's registration.
const (
	bareMetalSpawnTarget = 50 * time.Millisecond
	containerSpawnTarget = 800 * time.Millisecond
)

// scalerWarmup is the unmeasured spawns before each sequential loop: the
// first spawns pay for cold caches (the agent binary, the image's layers,
// SQLite's first writes).
const scalerWarmup = 3

// Backend types, as the scaler names them in logs, labels and metrics.
const (
	backendBareMetal = "bare-metal"
	backendContainer = "container"
)

// benchScaler measures the auto-scaler with real processes on SQLite:
// scale request → agent registered for sequential one-job runs through a
// bare-metal scaler and through a container scaler, then a matrix of
// -scaler-jobs jobs through a bare-metal scaler capped at -scaler-agents.
func (h *harness) benchScaler(ctx context.Context) {
	for _, part := range []struct {
		name string
		fn   func(context.Context, *scope) error
	}{
		{backendBareMetal, h.scalerBareMetal},
		{backendContainer, h.scalerContainer},
		{"burst", h.scalerBurst},
	} {
		if ctx.Err() != nil {
			h.rep.fail("scaler "+part.name, engineSQLite, fmt.Errorf("not run: %w", context.Cause(ctx)))
			continue
		}
		func() {
			sc := &scope{}
			defer sc.close()
			pctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
			defer cancel()
			if err := part.fn(pctx, sc); err != nil {
				h.rep.fail("scaler "+part.name, engineSQLite, err)
			}
		}()
	}
}

// scalerYAML is a scalers.yaml of one scaler with one label set; more is
// added to the scaler's entry (orchestratorUrl, extraHosts) and label set
// (binaryPath or image) as YAML lines.
func scalerYAML(name, typ string, maxAgents int, label string, scalerLines, setLines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nscalers:\n  - name: %s\n    type: %s\n    maxAgents: %d\n", name, typ, maxAgents)
	for _, l := range scalerLines {
		b.WriteString("    " + l + "\n")
	}
	fmt.Fprintf(&b, "    labelSets:\n      - labels: [%s]\n", label)
	for _, l := range setLines {
		b.WriteString("        " + l + "\n")
	}
	// JSON logs from the agents, whose timestamps split the spawn.
	b.WriteString("        env: {KICI_LOG_FORMAT: json, KICI_LOG_LEVEL: info}\n")
	return b.String()
}

// scalerWorkflow is trivialWorkflow's job asking for label.
func scalerWorkflow(label string) string {
	return fmt.Sprintf(`name: spawn
on:
  push: {branches: [main]}
jobs:
  t:
    runs-on: [%s]
    steps:
      - run: "true"
`, label)
}

// scalerMatrixWorkflow is a matrix of n trivial jobs asking for label.
func scalerMatrixWorkflow(label string, n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = strconv.Itoa(i)
	}
	return fmt.Sprintf(`name: burst
on:
  push: {branches: [main]}
jobs:
  t:
    runs-on: [%s]
    matrix:
      i: [%s]
    steps:
      - run: "true"
`, label, strings.Join(vals, ", "))
}

// startScalerOrchestrator writes scalers.yaml and starts an orchestrator
// (SQLite) with it, at addr ("" for a free loopback port), with the
// source "spawn" holding workflows.
func (h *harness) startScalerOrchestrator(ctx context.Context, sc *scope, name, yaml, addr, logLevel string, workflows map[string]string) (*server, error) {
	dir := h.dir("scalers-" + name)
	path := filepath.Join(dir, "scalers.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	o, err := h.startOrchestratorWith(ctx, sc, "", orchOptions{addr: addr, logLevel: logLevel, env: []string{"KICI_SCALER_CONFIG_PATH=" + path}})
	if err != nil {
		return nil, err
	}
	repo, err := makeRepo(ctx, h.dir("repo-"+name), workflows)
	if err != nil {
		return nil, err
	}
	if err := o.addSource(ctx, "spawn", repo); err != nil {
		return nil, err
	}
	return o, nil
}

// scalerStatus is one scaler of GET /api/v1/scalers.
type scalerStatus struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	MaxAgents  int        `json:"max_agents"`
	Active     int        `json:"active"`
	Spawning   int        `json:"spawning"`
	DeferredTo *time.Time `json:"deferred_until"`
	LastError  string     `json:"last_error"`
}

func (c *client) scalers(ctx context.Context) ([]scalerStatus, error) {
	var out struct {
		Scalers []scalerStatus `json:"scalers"`
	}
	err := c.do(ctx, "GET", "/api/v1/scalers", nil, &out, http.StatusOK)
	return out.Scalers, err
}

// waitScalersIdle waits until no scaler has an agent spawning or alive:
// the last one-shot agent has exited and its compute is destroyed.
func (c *client) waitScalersIdle(ctx context.Context, timeout time.Duration) error {
	var last []scalerStatus
	err := poll(ctx, timeout, "scalers idle", func() bool {
		list, err := c.scalers(ctx)
		if err != nil {
			return false
		}
		last = list
		for _, s := range list {
			if s.Active > 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: %+v", err, last)
	}
	return nil
}

// provisioningSeconds reads the kici_orch_scaler_provisioning_seconds
// histogram's count and sum for a backend from GET /metrics.
func (c *client) provisioningSeconds(ctx context.Context, backend string) (count int, sum float64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	sel := `{backend="` + backend + `"} `
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "kici_orch_scaler_provisioning_seconds_count"+sel); ok {
			count, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if v, ok := strings.CutPrefix(line, "kici_orch_scaler_provisioning_seconds_sum"+sel); ok {
			sum, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return count, sum, nil
}

// spawnTimes is what the logs and the job's provisioning section say about
// one spawned agent; every time comes from the same wall clock.
type spawnTimes struct {
	// The orchestrator's log.
	jobID          string    // the job it was requested for
	requested      time.Time // "agent requested from scaler"
	dispatched     time.Time // "job dispatched" to it
	processStarted time.Time // "agent process started" (bare-metal)
	spawned        time.Time // "agent spawned": Spawn returned
	spawnTook      time.Duration
	registered     time.Time // "agent registered"
	exited         time.Time // "agent process exited" (bare-metal)
	// The agent's own log: its file (bare-metal) or its output, which the
	// container backend logs at debug level.
	agentStarting   time.Time // "agent starting"
	agentRegistered time.Time // "registered"
	// The job's provisioning section (scaler events, microseconds).
	provisioning, network, ready, connecting time.Time
}

// logRecord is the part of a JSON slog line the scaler benchmark reads.
type logRecord struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	AgentID string    `json:"agent_id"`
	JobID   string    `json:"job_id"`
	Took    int64     `json:"took"` // nanoseconds
	Line    string    `json:"line"` // "agent output"
}

// scanJSONLog calls fn for each JSON line of a log file.
func scanJSONLog(path string, fn func(logRecord)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			fn(r)
		}
	}
	return sc.Err()
}

// setFirst sets *t to v unless it is already set.
func setFirst(t *time.Time, v time.Time) {
	if t.IsZero() {
		*t = v
	}
}

// readSpawns reads the orchestrator's log into one spawnTimes per agent
// id, with the agents' own log lines: from their files under the data dir
// (bare-metal) or from the orchestrator's "agent output" lines
// (container, debug level).
func readSpawns(o *server, scalerName string) (map[string]*spawnTimes, error) {
	out := map[string]*spawnTimes{}
	get := func(id string) *spawnTimes {
		s := out[id]
		if s == nil {
			s = &spawnTimes{}
			out[id] = s
		}
		return s
	}
	agentLine := func(s *spawnTimes, r logRecord) {
		switch r.Msg {
		case "agent starting":
			setFirst(&s.agentStarting, r.Time)
		case "registered":
			setFirst(&s.agentRegistered, r.Time)
		}
	}
	err := scanJSONLog(o.proc.logPath, func(r logRecord) {
		if r.AgentID == "" {
			return
		}
		s := get(r.AgentID)
		switch r.Msg {
		case "agent requested from scaler":
			setFirst(&s.requested, r.Time)
			s.jobID = r.JobID
		case "job dispatched":
			setFirst(&s.dispatched, r.Time)
		case "agent process started":
			setFirst(&s.processStarted, r.Time)
		case "agent spawned":
			setFirst(&s.spawned, r.Time)
			s.spawnTook = time.Duration(r.Took)
		case "agent registered":
			setFirst(&s.registered, r.Time)
		case "agent process exited":
			setFirst(&s.exited, r.Time)
		case "agent output":
			var inner logRecord
			if json.Unmarshal([]byte(r.Line), &inner) == nil {
				agentLine(s, inner)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	logs := filepath.Join(o.dataDir, "scalers", scalerName, "logs")
	for id, s := range out {
		_ = scanJSONLog(filepath.Join(logs, id+".log"), func(r logRecord) { agentLine(s, r) })
	}
	return out, nil
}

// spawnSample is one measured run through a fresh scaler agent.
type spawnSample struct {
	sample
	agentID string
	times   *spawnTimes
}

// sequentialSpawns runs warmup unmeasured and then n measured one-job runs
// of source "spawn", one after another, each on a freshly spawned agent:
// after each run it waits until the scaler has destroyed the agent, so no
// spawn overlaps the previous agent's exit.
func (h *harness) sequentialSpawns(ctx context.Context, o *server, warmup, n int) ([]sample, error) {
	var out []sample
	for i := range warmup + n {
		s, err := spawnRun(ctx, o.client)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		if err := o.waitScalersIdle(ctx, 60*time.Second); err != nil {
			return nil, fmt.Errorf("after run %d: %w", i+1, err)
		}
		if i >= warmup {
			out = append(out, s)
		}
		h.logf("scaler: run %d of %d done", i+1, warmup+n)
	}
	return out, nil
}

func spawnRun(ctx context.Context, c *client) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s := sample{start: time.Now()}
	ids, err := c.trigger(ctx, "spawn", 1)
	if err != nil {
		return s, err
	}
	s.resp, s.runID = time.Now(), ids[0]
	status, end, _, err := c.waitRun(ctx, s.runID)
	if err != nil {
		return s, fmt.Errorf("run %s: %w", s.runID, err)
	}
	if status != "success" {
		r, _ := c.run(ctx, s.runID)
		lines, _ := c.jobLogs(ctx, s.runID, "t", apiv1.ProvisioningStep)
		return s, fmt.Errorf("run %s ended %s: %s %+v; provisioning %+v", s.runID, status, r.Error, r.Jobs, lines)
	}
	s.end = end
	return s, nil
}

// attachSpawns finds each sample's agent (the job's agent_id), its times
// in the logs and its job's provisioning events.
func attachSpawns(ctx context.Context, o *server, scalerName string, samples []sample) ([]spawnSample, error) {
	spawns, err := readSpawns(o, scalerName)
	if err != nil {
		return nil, err
	}
	out := make([]spawnSample, 0, len(samples))
	for _, s := range samples {
		r, err := o.run(ctx, s.runID)
		if err != nil {
			return nil, err
		}
		if len(r.Jobs) != 1 {
			return nil, fmt.Errorf("run %s: want one job, got %+v", s.runID, r.Jobs)
		}
		id := r.Jobs[0].AgentID
		t, ok := spawns[id]
		if !ok || t.requested.IsZero() || t.registered.IsZero() {
			return nil, fmt.Errorf("run %s: agent %q: no \"agent requested from scaler\" or \"agent registered\" line in %s", s.runID, id, o.proc.logPath)
		}
		lines, err := o.jobLogs(ctx, s.runID, r.Jobs[0].Name, apiv1.ProvisioningStep)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l.Text, "[scaler.provisioning] "):
				setFirst(&t.provisioning, l.TS)
			case strings.HasPrefix(l.Text, "[scaler.network] "):
				setFirst(&t.network, l.TS)
			case strings.HasPrefix(l.Text, "[scaler.ready] "):
				setFirst(&t.ready, l.TS)
			case strings.HasPrefix(l.Text, "[agent.connecting] "):
				setFirst(&t.connecting, l.TS)
			}
		}
		out = append(out, spawnSample{sample: s, agentID: id, times: t})
	}
	return out, nil
}

// spawnStage is one step of a spawn, from two of its times; a sample
// missing either is left out of the stage.
type spawnStage struct {
	name     string
	from, to func(spawnSample) time.Time
}

func spawnStages(bench string, samples []spawnSample, defs []spawnStage) []stage {
	names := make([]string, len(defs))
	d := make([]dist, len(defs))
	for i, def := range defs {
		names[i] = def.name
		for _, s := range samples {
			a, b := def.from(s), def.to(s)
			if a.IsZero() || b.IsZero() {
				continue
			}
			d[i] = append(d[i], b.Sub(a))
		}
	}
	out := stages(bench, engineSQLite, names, d)
	return slices.DeleteFunc(out, func(s stage) bool { return s.N == 0 })
}

// Accessors for spawnStage.
var (
	atStart          = func(s spawnSample) time.Time { return s.start }
	atEnd            = func(s spawnSample) time.Time { return s.end }
	atRequested      = func(s spawnSample) time.Time { return s.times.requested }
	atProvisioning   = func(s spawnSample) time.Time { return s.times.provisioning }
	atNetwork        = func(s spawnSample) time.Time { return s.times.network }
	atProcessStarted = func(s spawnSample) time.Time { return s.times.processStarted }
	atReady          = func(s spawnSample) time.Time { return s.times.ready }
	atConnecting     = func(s spawnSample) time.Time { return s.times.connecting }
	atSpawned        = func(s spawnSample) time.Time { return s.times.spawned }
	atAgentStarting  = func(s spawnSample) time.Time { return s.times.agentStarting }
	atRegistered     = func(s spawnSample) time.Time { return s.times.registered }
	atAgentReg       = func(s spawnSample) time.Time { return s.times.agentRegistered }
)

// spawnRows adds the rows of a sequential-spawn benchmark: scale request →
// agent registered (with its target), trigger → success, and the metric's
// mean as a cross-check.
func (h *harness) spawnRows(backend string, samples []spawnSample, target time.Duration, cpu cpuSnapshot, engine time.Duration, metricN int, metricSum float64, extra string) {
	prov := make(dist, len(samples))
	total := make(dist, len(samples))
	var sum time.Duration
	for i, s := range samples {
		prov[i] = s.times.registered.Sub(s.times.requested)
		total[i] = s.end.Sub(s.start)
		sum += prov[i]
	}
	res := distResult(result{
		Benchmark: "scaler", Name: fmt.Sprintf("scale request → agent registered, %s, sequential", backend), Engine: engineSQLite,
		Target: fmt.Sprintf("p50 ≤ %d ms", target.Milliseconds()),
	}, prov)
	res.Met = ptr(*res.P50 <= ms(target))
	notes := []string{}
	if extra != "" {
		notes = append(notes, extra)
	}
	if metricN > 0 {
		notes = append(notes, fmt.Sprintf("kici_orch_scaler_provisioning_seconds{backend=%q} over the same spawns: %d observations, mean %.1f ms (the logs' mean %.1f ms)",
			backend, metricN, 1000*metricSum/float64(metricN), ms(sum)/float64(len(samples))))
	}
	notes = append(notes, scalerCPU(cpu, len(samples), "spawned run", engine))
	res.Note = strings.Join(notes, "; ")
	h.rep.add(res)
	h.rep.add(distResult(result{Benchmark: "scaler", Name: fmt.Sprintf("  trigger → success on a fresh %s agent", backend), Engine: engineSQLite}, total))
}

// scalerBareMetal: sequential one-job runs, each on a fresh agent process
// of a bare-metal scaler (maxAgents 1).
func (h *harness) scalerBareMetal(ctx context.Context, sc *scope) error {
	const name, label = "bench-bm", "bench-bm"
	yaml := scalerYAML(name, backendBareMetal, 1, label, nil, []string{"binaryPath: " + filepath.Join(h.bin, "kici-agent")})
	o, err := h.startScalerOrchestrator(ctx, sc, name, yaml, "", "info", map[string]string{"spawn.yml": scalerWorkflow(label)})
	if err != nil {
		return err
	}
	if _, err := h.sequentialSpawns(ctx, o, scalerWarmup, 0); err != nil {
		return err
	}
	n0, s0, _ := o.provisioningSeconds(ctx, backendBareMetal)
	cpu0 := snapshotCPU(o.pid(), nil)
	samples, err := h.sequentialSpawns(ctx, o, 0, h.cfg.spawns)
	if err != nil {
		return err
	}
	cpu := snapshotCPU(o.pid(), nil).sub(cpu0)
	n1, s1, _ := o.provisioningSeconds(ctx, backendBareMetal)
	spawns, err := attachSpawns(ctx, o, name, samples)
	if err != nil {
		return err
	}
	h.spawnRows(backendBareMetal, spawns, bareMetalSpawnTarget, cpu, 0, n1-n0, s1-s0, "")
	h.rep.Breakdown = append(h.rep.Breakdown, spawnStages("scaler-"+backendBareMetal, spawns, []spawnStage{
		{"trigger sent → scale request logged (run created, dispatch finds no agent)", atStart, atRequested},
		{"scale request → scaler.provisioning event (spawn goroutine starts)", atRequested, atProvisioning},
		{"scaler.provisioning → agent process started (event written to the DB, work dir + log file, fork/exec)", atProvisioning, atProcessStarted},
		{"agent process started → scaler.ready event", atProcessStarted, atReady},
		{"scaler.ready → agent.connecting (one job event written)", atReady, atConnecting},
		{"agent.connecting → Spawn returned (\"agent spawned\"; the second event written)", atConnecting, atSpawned},
		{"agent process started → agent's \"agent starting\" (exec, Go runtime, config, work-dir lock)", atProcessStarted, atAgentStarting},
		{"agent's \"agent starting\" → agent registered (WebSocket dial, token check, register)", atAgentStarting, atRegistered},
		{"agent registered → the agent logs \"registered\" (reply on the wire)", atRegistered, atAgentReg},
		{"total: scale request → agent registered", atRequested, atRegistered},
		{"agent registered → run success read from SSE (dispatch, archive, step, report)", atRegistered, atEnd},
	})...)
	return nil
}

// dockerReady says why the container benchmark cannot run here, or
// returns the docker0 address, the busybox to put into the image and the
// engine's version.
func dockerReady(ctx context.Context) (gateway, busybox, version string, why string) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i > 0 {
			msg = msg[:i]
		}
		return "", "", "", fmt.Sprintf("no Docker engine is reachable (docker info: %v: %s)", err, msg)
	}
	version = strings.TrimSpace(string(out))
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return "", "", "", "no docker0 bridge: " + err.Error()
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			gateway = ipn.IP.String()
			break
		}
	}
	if gateway == "" {
		return "", "", "", "docker0 has no IPv4 address"
	}
	busybox = "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		if busybox, err = exec.LookPath("busybox"); err != nil {
			return "", "", "", "no busybox for the image's shell (install busybox-static)"
		}
	}
	return gateway, busybox, version, ""
}

// buildAgentImage builds an image FROM scratch holding the static
// kici-agent and busybox (the steps' shell), as internal/e2e does, and
// returns its tag; sc removes it.
func (h *harness) buildAgentImage(ctx context.Context, sc *scope, busybox string) (string, time.Duration, error) {
	dir := h.dir("image")
	for src, dst := range map[string]string{filepath.Join(h.bin, "kici-agent"): "kici-agent", busybox: "busybox"} {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o755); err != nil {
			return "", 0, err
		}
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nCOPY busybox /bin/sh\nCOPY kici-agent /kici-agent\n" +
		"ENV PATH=/bin\nENTRYPOINT [\"/kici-agent\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", 0, err
	}
	tag := "kici-bench-agent:" + randomHex(6)
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("docker build: %w: %s", err, out)
	}
	took := time.Since(start)
	sc.add(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag, took, nil
}

// scalerContainer: sequential one-job runs, each on a fresh agent
// container of a container scaler (maxAgents 1, a local image,
// imagePullPolicy Never), the orchestrator listening on docker0.
func (h *harness) scalerContainer(ctx context.Context, sc *scope) error {
	const name, label = "bench-box", "bench-box"
	rowName := fmt.Sprintf("scale request → agent registered, %s, sequential", backendContainer)
	gw, busybox, version, why := dockerReady(ctx)
	if why != "" {
		h.rep.add(result{Benchmark: "scaler", Name: rowName, Engine: engineSQLite, Skipped: why,
			Target: fmt.Sprintf("p50 ≤ %d ms", containerSpawnTarget.Milliseconds())})
		return nil
	}
	image, built, err := h.buildAgentImage(ctx, sc, busybox)
	if err != nil {
		return err
	}
	addr, err := freeAddrOn(gw)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	yaml := scalerYAML(name, backendContainer, 1, label,
		[]string{"orchestratorUrl: ws://host.docker.internal:" + port + "/ws", `extraHosts: ["host.docker.internal:host-gateway"]`},
		[]string{"image: " + image, "imagePullPolicy: Never"})
	// Containers the orchestrator leaves behind are removed after it
	// stopped (cleanups run last-added first).
	var instance string
	sc.add(func() {
		if instance == "" {
			return
		}
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=kici-instance="+instance).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
	// Debug level: the backend logs the agent's output lines, which carry
	// the agent's own timestamps.
	o, err := h.startScalerOrchestrator(ctx, sc, name, yaml, addr, "debug", map[string]string{"spawn.yml": scalerWorkflow(label)})
	if err != nil {
		return err
	}
	if data, err := os.ReadFile(filepath.Join(o.dataDir, "instance-id")); err == nil {
		instance = strings.TrimSpace(string(data))
	}
	if _, err := h.sequentialSpawns(ctx, o, scalerWarmup, 0); err != nil {
		return err
	}
	n0, s0, _ := o.provisioningSeconds(ctx, backendContainer)
	cpu0 := snapshotCPU(o.pid(), nil)
	engine0 := engineCPU()
	samples, err := h.sequentialSpawns(ctx, o, 0, h.cfg.containerSpawns)
	if err != nil {
		return err
	}
	cpu := snapshotCPU(o.pid(), nil).sub(cpu0)
	engineUsed := engineCPU() - engine0
	n1, s1, _ := o.provisioningSeconds(ctx, backendContainer)
	spawns, err := attachSpawns(ctx, o, name, samples)
	if err != nil {
		return err
	}
	extra := fmt.Sprintf("Docker %s; image %s built in %s; dockerd and containerd CPU %.1f ms per spawned run (the exited shims, runc and the agents in the containers not counted)",
		version, image, built.Round(time.Millisecond), ms(engineUsed)/float64(len(samples)))
	h.spawnRows(backendContainer, spawns, containerSpawnTarget, cpu, engineUsed, n1-n0, s1-s0, extra)
	h.rep.Breakdown = append(h.rep.Breakdown, spawnStages("scaler-"+backendContainer, spawns, []spawnStage{
		{"trigger sent → scale request logged (run created, dispatch finds no agent)", atStart, atRequested},
		{"scale request → scaler.provisioning event (spawn goroutine, image inspect)", atRequested, atProvisioning},
		{"scaler.provisioning → scaler.network (event written to the DB, ContainerCreate)", atProvisioning, atNetwork},
		{"scaler.network → scaler.ready (event written, ContainerStart)", atNetwork, atReady},
		{"scaler.ready → agent.connecting (event written, attach to the output, watch the exit)", atReady, atConnecting},
		{"agent.connecting → Spawn returned (\"agent spawned\"; the event written)", atConnecting, atSpawned},
		{"scaler.network → agent's \"agent starting\" (ContainerStart up to the agent's first line)", atNetwork, atAgentStarting},
		{"agent's \"agent starting\" → agent registered (WebSocket via host.docker.internal, token check, register)", atAgentStarting, atRegistered},
		{"total: scale request → agent registered", atRequested, atRegistered},
		{"agent registered → run success read from SSE (dispatch, archive, step, report)", atRegistered, atEnd},
	})...)
	return nil
}

// engineCPU is the CPU time of the container engine's long-lived
// processes.
func engineCPU() time.Duration { return commCPU("dockerd") + commCPU("containerd") }

// scalerBurst: one trigger of a matrix of cfg.scalerJobs trivial jobs
// through a bare-metal scaler with maxAgents cfg.scalerAgents. It reports
// the wall time to the last job's success, jobs/s, and the most agents
// alive at once: sampled (the scaler's own count, the connected agents,
// the agent processes), and exactly, from the orchestrator's log (each
// agent process's start and exit).
func (h *harness) scalerBurst(ctx context.Context, sc *scope) error {
	const name, label = "bench-burst", "bench-burst"
	maxAgents, jobs := h.cfg.scalerAgents, h.cfg.scalerJobs
	bin := filepath.Join(h.bin, "kici-agent")
	yaml := scalerYAML(name, backendBareMetal, maxAgents, label, nil, []string{"binaryPath: " + bin})
	o, err := h.startScalerOrchestrator(ctx, sc, name, yaml, "", "info", map[string]string{"burst.yml": scalerMatrixWorkflow(label, jobs)})
	if err != nil {
		return err
	}
	// Warm up on a second source holding the one-job workflow.
	warmRepo, err := makeRepo(ctx, h.dir("repo-burst-warm"), map[string]string{"spawn.yml": scalerWorkflow(label)})
	if err != nil {
		return err
	}
	if err := o.addSource(ctx, "warm", warmRepo); err != nil {
		return err
	}
	for range scalerWarmup {
		ids, err := o.trigger(ctx, "warm", 1)
		if err != nil {
			return err
		}
		if st, _, _, err := o.waitRun(ctx, ids[0]); err != nil || st != "success" {
			return fmt.Errorf("warm-up run %s: %s %v", ids[0], st, err)
		}
		if err := o.waitScalersIdle(ctx, 60*time.Second); err != nil {
			return err
		}
	}

	// Sample every 20 ms until the burst ends.
	var (
		mu                                   sync.Mutex
		maxActive, maxConnected, maxProcs, n int
	)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sctx.Err() == nil {
			a := -1
			if list, err := o.scalers(sctx); err == nil {
				a = 0
				for _, s := range list {
					a += s.Active
				}
			}
			c := -1
			if list, err := o.agents(sctx); err == nil {
				c = len(list)
			}
			p := countProcs(o.pid(), bin)
			mu.Lock()
			maxActive, maxConnected, maxProcs = max(maxActive, a), max(maxConnected, c), max(maxProcs, p)
			n++
			mu.Unlock()
			select {
			case <-sctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	cpu0 := snapshotCPU(o.pid(), nil)
	start := time.Now()
	ids, err := o.trigger(ctx, "spawn", 1)
	if err != nil {
		stopSampling()
		<-sampled
		return err
	}
	last, _, werr := o.waitJobs(ctx, ids[0], jobs)
	if werr != nil {
		werr = fmt.Errorf("run %s: %w; %s", ids[0], werr, h.diagnose(o, ids[0]))
	}
	cpu := snapshotCPU(o.pid(), nil).sub(cpu0)
	stopSampling()
	<-sampled
	if werr != nil {
		return werr
	}
	r, err := o.run(ctx, ids[0])
	if err != nil {
		return err
	}
	total := 0
	agents := map[string]bool{}
	for _, j := range r.Jobs {
		if j.Status != "success" {
			return fmt.Errorf("run %s job %s ended %s: %s", ids[0], j.Name, j.Status, j.Error)
		}
		total++
		agents[j.AgentID] = true
	}
	if total != jobs {
		return fmt.Errorf("run %s has %d jobs, want %d", ids[0], total, jobs)
	}
	// Every agent should go once its job is done. One spawned for a job
	// that another agent took stays registered and idle, holding its slot
	// (see docs/benchmarks.md): count those.
	idleErr := o.waitScalersIdle(ctx, 10*time.Second)
	spawns, err := readSpawns(o, name)
	if err != nil {
		return err
	}
	var stranded []string
	requested := 0
	for id, s := range spawns {
		if s.requested.Before(start) {
			continue // warm-up
		}
		requested++
		if !s.registered.IsZero() && s.dispatched.IsZero() {
			stranded = append(stranded, fmt.Sprintf("%s (spawned for job %s)", id, s.jobID))
		}
	}
	slices.Sort(stranded)
	if idleErr != nil && len(stranded) == 0 {
		return idleErr
	}
	if len(stranded) > 0 {
		still := "they left when the job's run ended"
		if idleErr != nil {
			still = "still registered and holding their slots 10 s after the run ended: " + idleErr.Error()
		}
		h.rep.Bugs = append(h.rep.Bugs, fmt.Sprintf("scaler burst: %d of %d spawned agents registered but got no job (extra agents were spawned for jobs whose agents were still registering, and took other jobs; see docs/benchmarks.md); %s; %s",
			len(stranded), requested, still, strings.Join(stranded, ", ")))
	}
	elapsed := last.Sub(start)
	h.rep.add(result{
		Benchmark: "scaler", Name: fmt.Sprintf("%d jobs through a bare-metal scaler, maxAgents %d", total, maxAgents), Engine: engineSQLite,
		N: total, Unit: "jobs/s", Value: ptr(float64(total) / elapsed.Seconds()),
		Note: fmt.Sprintf("one trigger of a %d-job matrix, trigger to the last job's success in %s; %d distinct agents ran them; %s",
			jobs, elapsed.Round(time.Millisecond), len(agents), scalerCPU(cpu, total, "job", 0)),
	})

	// Exactly, from the log: agent processes alive at once, and spawns in
	// flight or alive (request to exit); a stranded agent that has not
	// exited yet counts as alive to the end.
	endOfLog := time.Now()
	var alive, held [][2]time.Time
	var prov dist
	for _, s := range spawns {
		if s.requested.Before(start) {
			continue // warm-up
		}
		exited := s.exited
		if exited.IsZero() {
			exited = endOfLog
		}
		if !s.processStarted.IsZero() {
			alive = append(alive, [2]time.Time{s.processStarted, exited})
		}
		if !s.requested.IsZero() {
			held = append(held, [2]time.Time{s.requested, exited})
		}
		if !s.requested.IsZero() && !s.registered.IsZero() {
			prov = append(prov, s.registered.Sub(s.requested))
		}
	}
	mostAlive, mostHeld := maxOverlap(alive), maxOverlap(held)
	most := max(maxActive, maxConnected, maxProcs, mostAlive)
	h.rep.add(result{
		Benchmark: "scaler", Name: "  most agents alive at once", Engine: engineSQLite,
		Unit: "agents", Value: ptr(float64(most)), Target: fmt.Sprintf("≤ %d", maxAgents), Met: ptr(most <= maxAgents),
		Note: fmt.Sprintf("%d samples every 20 ms: scaler's active count %d, connected agents %d, agent processes %d; from the orchestrator's log: agent processes %d (process started to exited), scale request to process exit %d; %d agents spawned for %d jobs",
			n, maxActive, maxConnected, maxProcs, mostAlive, mostHeld, requested, total),
	})
	if len(prov) > 0 {
		h.rep.add(distResult(result{Benchmark: "scaler", Name: fmt.Sprintf("  scale request → agent registered, up to %d at once", maxAgents), Engine: engineSQLite}, prov))
	}
	return nil
}

// scalerCPU describes the CPU time per unit of n units. The agents are the
// orchestrator's children: their CPU (and their steps', which they wait
// for) is in its children's time once it has reaped them.
// engine is the container engine's CPU time (0 for bare-metal), which is
// not counted as other processes' work.
func scalerCPU(c cpuSnapshot, n int, unit string, engine time.Duration) string {
	each := func(d time.Duration) float64 { return ms(d) / float64(n) }
	busy, others := 0.0, c.neighbours(engineSQLite)
	if c.machineTotal > 0 {
		busy = 100 * float64(c.machineBusy) / float64(c.machineTotal)
		others = max(0, others-100*float64(engine)/float64(c.machineTotal))
	}
	children, other := "bare-metal agents and their steps, git", "other processes"
	if engine > 0 {
		children, other = "git", "other processes (the containers' agents, shims and runc among them)"
	}
	return fmt.Sprintf("CPU ms per %s: orchestrator %.2f, its reaped children (%s) %.2f, bench process %.2f; machine %.0f%% busy, %s %.0f%%",
		unit, each(c.orch), children, each(c.orchChildren), each(c.self), busy, other, others)
}

// maxOverlap returns the most intervals that hold at one instant.
func maxOverlap(iv [][2]time.Time) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for _, i := range iv {
		es = append(es, edge{i[0], 1}, edge{i[1], -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	cur, most := 0, 0
	for _, e := range es {
		cur += e.d
		most = max(most, cur)
	}
	return most
}

// countProcs counts the children of pid whose program is bin: the
// bare-metal scaler's agent processes (a zombie has no command line and
// is not counted).
func countProcs(pid int, bin string) int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	seen := map[string]bool{}
	n := 0
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(data)) {
			if seen[c] {
				continue
			}
			seen[c] = true
			cmd, err := os.ReadFile("/proc/" + c + "/cmdline")
			if err != nil {
				continue
			}
			if arg0, _, _ := strings.Cut(string(cmd), "\x00"); arg0 == bin {
				n++
			}
		}
	}
	return n
}
