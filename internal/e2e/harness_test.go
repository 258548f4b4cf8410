// Package e2e holds kici's end-to-end tests: real kici-orchestrator and
// kici-agent processes, built from this tree, talking over loopback HTTP and
// WebSocket, on SQLite and on PostgreSQL. Nothing of kici is faked; the
// only fakes are of outside services that cannot run here, each named as
// one (the GitHub API: githubfake; an S3 server: s3fake).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// testSecretKey is the KICI_SECRET_KEY of every test orchestrator.
const testSecretKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// binDir holds the binaries built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	execInNetNS() // a copy of the test binary asked to start a program in a namespace does that
	dir, err := os.MkdirTemp("", "kici-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, b := range []string{"kici-orchestrator", "kici-agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "github.com/kici-dev/kici/cmd/"+b)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	closeBrowser() // the browser tests' shared Chromium, if one started (browser_test.go)
	os.RemoveAll(dir)
	os.Exit(code)
}

// engines runs fn once on SQLite and once on PostgreSQL.
func engines(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, testsvc.PostgresURL(t))
	})
}

// orchestrator is one kici-orchestrator process and its settings, which a
// restart reuses.
type orchestrator struct {
	t       *testing.T
	addr    string
	dataDir string
	dbURL   string
	token   string
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
	// output is everything the process wrote, across restarts.
	output syncBuffer
	// agentTokens holds the token of each agent id startAgent started, so
	// a restarted agent comes back with its own token, as on a real host
	// (an agent id belongs to the token that registered it).
	mu          sync.Mutex
	agentTokens map[string]string
	// ns, when set, is the network namespace the process runs in; client
	// then dials into it.
	ns     *netNS
	client *http.Client
}

// http is the client that reaches the orchestrator.
func (o *orchestrator) http() *http.Client {
	if o.client != nil {
		return o.client
	}
	return http.DefaultClient
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startOrchestrator starts an orchestrator with short timeouts; extra
// entries of env override them.
func startOrchestrator(t *testing.T, dbURL string, env ...string) *orchestrator {
	t.Helper()
	return startOrchestratorAt(t, freeAddr(t), dbURL, env...)
}

// startOrchestratorAt is startOrchestrator listening on addr.
func startOrchestratorAt(t *testing.T, addr, dbURL string, env ...string) *orchestrator {
	t.Helper()
	o := &orchestrator{t: t, addr: addr, dataDir: t.TempDir(), dbURL: dbURL, token: "admin-" + t.Name()}
	o.env = append([]string{
		"KICI_HTTP_ADDR=" + o.addr,
		"KICI_PUBLIC_URL=http://" + o.addr,
		"KICI_DATA_DIR=" + o.dataDir,
		"KICI_DATABASE_URL=" + dbURL,
		"KICI_BOOTSTRAP_ADMIN_TOKEN=" + o.token,
		"KICI_SECRET_KEY=" + testSecretKey,
		"KICI_LOG_FORMAT=text",
		"KICI_LOG_LEVEL=debug",
		"KICI_DISPATCH_ACK_TIMEOUT_MS=3000",
		"KICI_AGENT_RECOVERY_WINDOW_MS=10000",
		"KICI_QUEUE_SWEEP_INTERVAL_MS=200",
	}, env...)
	o.start()
	return o
}

func (o *orchestrator) start() {
	t := o.t
	t.Helper()
	o.cmd = exec.Command(filepath.Join(binDir, "kici-orchestrator"), "serve")
	o.cmd.Env = append(minimalEnv(), o.env...)
	if o.ns != nil {
		o.cmd = o.ns.command(o.cmd)
	}
	o.cmd.Stdout = io.MultiWriter(&testWriter{t: t, prefix: "orchestrator: "}, &o.output)
	o.cmd.Stderr = o.cmd.Stdout
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(o.cmd, o.done)
	t.Cleanup(o.stop)
	waitFor(t, 20*time.Second, "orchestrator ready", func() bool {
		resp, err := o.http().Get("http://" + o.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (o *orchestrator) stop() {
	if o.cmd == nil || o.cmd.Process == nil {
		return
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}

// kill ends the orchestrator with SIGKILL, as a crash would.
func (o *orchestrator) kill() {
	_ = o.cmd.Process.Kill()
	<-o.done
}

// minimalEnv is the environment every child starts from: enough to find
// git, bash and a home, and no KICI_ variable of the test's own.
func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// agent is one kici-agent process.
type agent struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startAgent starts an agent with the given id and labels against url (a
// ws:// URL; the orchestrator's /ws unless a proxy stands between).
func startAgent(t *testing.T, o *orchestrator, url, id string, labels []string, env ...string) *agent {
	t.Helper()
	o.mu.Lock()
	token, ok := o.agentTokens[id]
	o.mu.Unlock()
	if !ok {
		var tok apiv1.AgentToken
		o.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{Labels: labels}, &tok, http.StatusCreated)
		token = tok.Token
		o.mu.Lock()
		if o.agentTokens == nil {
			o.agentTokens = map[string]string{}
		}
		o.agentTokens[id] = token
		o.mu.Unlock()
	}
	if url == "" {
		url = "ws://" + o.addr + "/ws"
	}
	return o.launchAgent(t, id, append([]string{
		"KICI_ORCHESTRATOR_URL=" + url,
		"KICI_AGENT_TOKEN=" + token,
		"KICI_LABELS=" + strings.Join(labels, ","),
		"KICI_AGENT_CANCEL_GRACE_MS=2000",
	}, env...))
}

// launchAgent starts the kici-agent binary as agent id with env on top of
// the minimal environment, a work dir and text logs, stops it at the end
// of the test, and returns once the orchestrator lists it connected (or
// fails the test if the agent exits first).
func (o *orchestrator) launchAgent(t *testing.T, id string, env []string) *agent {
	t.Helper()
	a := &agent{cmd: exec.Command(filepath.Join(binDir, "kici-agent"))}
	a.cmd.Env = append(minimalEnv(), "KICI_AGENT_ID="+id, "KICI_AGENT_WORKDIR="+t.TempDir(), "KICI_LOG_FORMAT=text")
	a.cmd.Env = append(a.cmd.Env, env...)
	a.cmd.Stdout = &testWriter{t: t, prefix: "agent " + id + ": "}
	a.cmd.Stderr = a.cmd.Stdout
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.done = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.done
		}
	})
	waitFor(t, 20*time.Second, "agent "+id+" connected", func() bool {
		select {
		case <-a.done:
			t.Fatalf("agent %s exited before it connected", id)
		default:
		}
		var list apiv1.AgentList
		o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
		for _, ag := range list.Agents {
			if ag.ID == id {
				return true
			}
		}
		return false
	})
	return a
}

func (a *agent) kill() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

// api calls the orchestrator's API and decodes the answer into out,
// failing the test unless the status is want.
func (o *orchestrator) api(t *testing.T, method, path string, in, out any, want int) {
	t.Helper()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+o.addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := o.http().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: got status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// addRepo creates a git repository holding the given workflow files and
// registers it as local source "repo".
func (o *orchestrator) addRepo(t *testing.T, workflows map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range workflows {
		p := filepath.Join(dir, ".kici", "workflows", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "workflows"}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = minimalEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	o.api(t, "POST", "/api/v1/sources", apiv1.Source{Name: "repo", Kind: "local", Path: dir}, nil, http.StatusCreated)
	return dir
}

// push triggers a push to main and returns the one run it started.
func (o *orchestrator) push(t *testing.T) string {
	t.Helper()
	var tr apiv1.TriggerResponse
	o.api(t, "POST", "/api/v1/sources/repo/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, &tr, http.StatusOK)
	if len(tr.Runs) != 1 {
		t.Fatalf("push started %d runs, want 1: %+v", len(tr.Runs), tr.Decisions)
	}
	return tr.Runs[0].ID
}

func (o *orchestrator) run(t *testing.T, id string) apiv1.Run {
	t.Helper()
	var r apiv1.Run
	o.api(t, "GET", "/api/v1/runs/"+id, nil, &r, http.StatusOK)
	return r
}

// waitRun waits until the run satisfies ok and returns it.
func (o *orchestrator) waitRun(t *testing.T, id string, timeout time.Duration, what string, ok func(apiv1.Run) bool) apiv1.Run {
	t.Helper()
	var last apiv1.Run
	waitFor(t, timeout, what, func() bool {
		last = o.run(t, id)
		return ok(last)
	})
	return last
}

func ended(r apiv1.Run) bool {
	switch r.Status {
	case "success", "failure", "cancelled":
		return true
	}
	return false
}

func job(t *testing.T, r apiv1.Run, name string) apiv1.Job {
	t.Helper()
	for _, j := range r.Jobs {
		if j.Name == name {
			return j
		}
	}
	t.Fatalf("run %s has no job %q", r.ID, name)
	return apiv1.Job{}
}

// logs reads every stored line of a job.
func (o *orchestrator) logs(t *testing.T, runID, jobName string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for i := 0; i < 1000; i++ {
		var page apiv1.LogPage
		path := fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?cursor=%s", runID, jobName, cursor)
		o.api(t, "GET", path, nil, &page, http.StatusOK)
		for _, l := range page.Lines {
			out = append(out, l.Text)
		}
		if page.Done || (len(page.Lines) == 0 && page.Next == cursor) {
			return out
		}
		cursor = page.Next
	}
	t.Fatalf("logs of %s did not end", jobName)
	return nil
}

// waitFor polls cond every 25 ms until it holds or timeout passes. It is
// for state held by other processes, which cannot signal this one.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// testWriter sends a child's output to the test log, line by line.
type testWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		func() {
			defer func() { _ = recover() }() // the test may have ended
			w.t.Log(w.prefix + line)
		}()
	}
	return len(p), nil
}

// readLines returns the lines of a file, or nil if it does not exist.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// alive reports whether a process is still running: it exists and is not
// a zombie waiting for its new parent (init) to reap it.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	state := data[i+2]
	return state != 'Z' && state != 'X'
}

var _ = context.Background

// apiv1Run is a short name for the run type in test signatures.
type apiv1Run = apiv1.Run

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func touch(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// killLine kills the process whose pid is the first line, if any.
func killLine(lines []string) {
	if len(lines) == 0 {
		return
	}
	var pid int
	if _, err := fmt.Sscan(lines[0], &pid); err == nil && pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
