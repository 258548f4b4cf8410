package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// workerProc is a kici-orchestrator process in the worker role.
type workerProc struct {
	client  *http.Client // reaches addr (inside the worker's namespace, if any)
	addr    string
	cmd     *exec.Cmd
	done    chan struct{}
	output  syncBuffer
	dataDir string
}

// startWorker starts a worker of the coordinators at urls with data dir
// dataDir (its credential lives there) and, when token is not empty, the
// join token; it does not wait for it to be ready.
func startWorker(t *testing.T, dataDir, token string, urls ...string) *workerProc {
	t.Helper()
	return startWorkerIn(t, nil, dataDir, token, urls...)
}

// startWorkerAt is startWorker listening on addr.
func startWorkerAt(t *testing.T, addr, dataDir, token string, urls ...string) *workerProc {
	t.Helper()
	return startWorkerOn(t, nil, addr, dataDir, token, nil, urls...)
}

// startWorkerIn is startWorker inside network namespace ns (nil: the
// host's).
func startWorkerIn(t *testing.T, ns *netNS, dataDir, token string, urls ...string) *workerProc {
	t.Helper()
	return startWorkerOn(t, ns, freeAddr(t), dataDir, token, nil, urls...)
}

// startWorkerOn is startWorkerIn listening on addr, with env added to the
// worker's environment.
func startWorkerOn(t *testing.T, ns *netNS, addr, dataDir, token string, env []string, urls ...string) *workerProc {
	t.Helper()
	w := &workerProc{addr: addr, dataDir: dataDir, done: make(chan struct{}), client: http.DefaultClient}
	w.cmd = exec.Command(filepath.Join(binDir, "kici-orchestrator"), "serve")
	w.cmd.Env = append(minimalEnv(), "KICI_CLUSTER_ROLE=worker", "KICI_HTTP_ADDR="+w.addr, "KICI_DATA_DIR="+dataDir,
		"KICI_CLUSTER_COORDINATOR_URLS="+strings.Join(urls, ","), "KICI_LOG_FORMAT=text", "KICI_LOG_LEVEL=debug")
	if token != "" {
		w.cmd.Env = append(w.cmd.Env, "KICI_CLUSTER_JOIN_TOKEN="+token)
	}
	w.cmd.Env = append(w.cmd.Env, env...)
	if ns != nil {
		w.cmd = ns.command(w.cmd)
		w.client = ns.client
	}
	w.cmd.Stdout = &w.output
	w.cmd.Stderr = &w.output
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", w.output.String())
		}
	})
	return w
}

func (w *workerProc) ready() bool {
	resp, err := w.client.Get("http://" + w.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (w *workerProc) stop(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not stop on SIGTERM")
	}
}

// workers returns the worker rows of o's peer list.
func (o *orchestrator) workers(t *testing.T) []apiv1.Peer {
	t.Helper()
	var pl apiv1.PeerList
	o.api(t, "GET", "/api/v1/peers", nil, &pl, http.StatusOK)
	var out []apiv1.Peer
	for _, p := range pl.Peers {
		if p.Role == "worker" {
			out = append(out, p)
		}
	}
	return out
}

// TestWorkerJoinsOnceAndStaysListed: a worker given a token whose CA hash
// is not the cluster's refuses to join and never spends the token; with
// the right token it joins, is ready, and is listed connected on every
// coordinator; restarted without a token it comes back with its
// credential under the same node id; a connected worker cannot be
// forgotten.
func TestWorkerJoinsOnceAndStaysListed(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200"}
	a := startOrchestrator(t, dbURL, cluster...)
	b := startOrchestrator(t, dbURL, cluster...)
	var created apiv1.JoinTokenCreated
	a.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	urls := []string{"http://" + a.addr, "http://" + b.addr}

	// The same id and secret, pinning another CA: a coordinator that
	// served this cluster's CA would be an impostor to this worker.
	parts := strings.Split(created.Token, ".")
	parts[1] = strings.Repeat("0", 64)
	wrong := startWorker(t, t.TempDir(), strings.Join(parts, "."), urls...)
	select {
	case <-wrong.done:
	case <-time.After(20 * time.Second):
		t.Fatal("a worker with a token pinning another CA did not give up")
	}
	if code := wrong.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(wrong.output.String(), "does not match the join token") {
		t.Fatalf("worker with the wrong CA hash: exit %d, output:\n%s\nwant a non-zero exit naming the CA mismatch", code, wrong.output.String())
	}
	var tokens apiv1.JoinTokenList
	a.api(t, "GET", "/api/v1/peers/join-tokens", nil, &tokens, http.StatusOK)
	if len(tokens.Tokens) != 1 || tokens.Tokens[0].State != apiv1.JoinTokenActive {
		t.Fatalf("tokens after the refused join: %+v, want the token still active (its secret never sent)", tokens.Tokens)
	}

	dataDir := t.TempDir()
	w := startWorker(t, dataDir, created.Token, urls...)
	waitFor(t, 20*time.Second, "the worker to be ready", w.ready)
	var nodeID string
	for _, o := range []*orchestrator{a, b} {
		waitFor(t, 15*time.Second, "the worker listed connected on "+o.addr, func() bool {
			ws := o.workers(t)
			if len(ws) == 1 && ws[0].Connected && strings.HasPrefix(ws[0].Address, "127.0.0.1:") {
				nodeID = ws[0].ID
				return true
			}
			return false
		})
	}
	// The secret went inside the TLS channel, not over plain http.
	if !strings.Contains(a.output.String()+b.output.String(), "worker joined over the cluster channel") {
		t.Error("no coordinator logged a join over the cluster channel")
	}
	a.api(t, "GET", "/api/v1/peers/join-tokens", nil, &tokens, http.StatusOK)
	if tokens.Tokens[0].State != apiv1.JoinTokenUsed || tokens.Tokens[0].UsedBy != nodeID {
		t.Errorf("token after the join: %+v, want used by %s", tokens.Tokens[0], nodeID)
	}
	a.api(t, "DELETE", "/api/v1/peers/"+nodeID, nil, nil, http.StatusConflict)

	// Restarted without a token: the credential in its data dir suffices.
	w.stop(t)
	again := startWorker(t, dataDir, "", urls...)
	waitFor(t, 20*time.Second, "the restarted worker to be ready", again.ready)
	if ws := b.workers(t); len(ws) != 1 || ws[0].ID != nodeID {
		t.Errorf("workers after the restart: %+v, want the one node %s", ws, nodeID)
	}
	// Without a reachable coordinator it is not ready.
	lonely := startWorker(t, t.TempDir(), created.Token, "http://"+freeAddr(t))
	waitFor(t, 10*time.Second, "the lonely worker to answer", func() bool {
		resp, err := http.Get("http://" + lonely.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
}

// TestAgentBehindWorkerFinishesItsJobWhenItsCoordinatorDies: an agent that
// reaches the cluster only through a worker runs a job dispatched by the
// coordinator the worker relays it to (the source archive fetched through
// the worker). SIGKILL that coordinator mid-step: the worker moves the
// agent to the other coordinator, which takes the job over; the job
// succeeds with its step run once, and its log reads whole there.
func TestAgentBehindWorkerFinishesItsJobWhenItsCoordinatorDies(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200",
		"KICI_INSTANCE_HEARTBEAT_MS=200"}
	a := startOrchestrator(t, dbURL, cluster...)
	waitFor(t, 10*time.Second, "the first coordinator to lead", func() bool { return a.metricValue(t, "kici_orch_cluster_leader") == 1 })
	b := startOrchestrator(t, dbURL, cluster...)
	var created apiv1.JoinTokenCreated
	a.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	w := startWorker(t, t.TempDir(), created.Token, "http://"+a.addr, "http://"+b.addr)
	waitFor(t, 20*time.Second, "the worker to be ready", w.ready)
	marks := t.TempDir()
	a.addRepo(t, map[string]string{"ci.yml": strings.Replace(matrixWorkflow(marks, 1, 1), "run: echo ran >>", "run: echo before; echo ran >>", 1)})
	// An agent token the coordinators do not know is refused by the worker
	// with the coordinator's 401, before the upgrade.
	dctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	_, resp, err := websocket.Dial(dctx, "ws://"+w.addr+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer kat_bogus"}}})
	cancel()
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("agent with an unknown token through the worker: %v (%v), want HTTP 401", err, resp)
	}
	startAgent(t, a, "ws://"+w.addr+"/ws", "edge-agent", []string{"edge"}) // listed on a: the worker relays it there
	id := a.push(t)
	waitFor(t, 30*time.Second, "the job to start", func() bool { return countGlob(t, filepath.Join(marks, "started-*")) == 1 })
	jobName := a.run(t, id).Jobs[0].Name
	waitFor(t, 15*time.Second, "the first line stored", func() bool { return slices.Contains(a.logs(t, id, jobName), "before") })
	a.kill()
	waitFor(t, 20*time.Second, "the agent relayed to the other coordinator", func() bool {
		return slices.Contains(b.agentIDs(t), "edge-agent")
	})
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	r := b.waitRun(t, id, 60*time.Second, "the run to end on the other coordinator", ended)
	if r.Status != "success" {
		t.Fatalf("run: %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
	}
	assertRanOnce(t, marks, 1, 1)
	if got := b.logs(t, id, jobName); !slices.Contains(got, "before") || !slices.Contains(got, "done") {
		t.Errorf("log on the other coordinator: %q, want the lines from before and after the kill", got)
	}
	if !strings.Contains(w.output.String(), "connected to coordinator") {
		t.Error("the worker did not log its coordinator connections")
	}
}

// TestRevokedWorkerIsCutOff: a worker revoked on one coordinator loses
// its channel to every coordinator within a heartbeat or so, cannot come
// back with its credential (its restarts are refused), and leaves the
// peer list; a coordinator's id cannot be revoked.
func TestRevokedWorkerIsCutOff(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator"}
	a := startOrchestrator(t, dbURL, cluster...)
	b := startOrchestrator(t, dbURL, cluster...)
	var created apiv1.JoinTokenCreated
	a.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	dataDir := t.TempDir()
	w := startWorker(t, dataDir, created.Token, "http://"+a.addr, "http://"+b.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)
	var node string
	waitFor(t, 30*time.Second, "the worker listed", func() bool {
		ws := b.workers(t)
		if len(ws) == 1 {
			node = ws[0].ID
		}
		return len(ws) == 1
	})
	a.api(t, "POST", "/api/v1/peers/"+node+"/revoke", nil, nil, http.StatusOK)
	waitFor(t, 30*time.Second, "the revoked worker cut off from both coordinators", func() bool { return !w.ready() })
	w.stop(t)
	again := startWorker(t, dataDir, "", "http://"+a.addr, "http://"+b.addr)
	waitFor(t, 30*time.Second, "the restarted worker refused", func() bool {
		return strings.Contains(again.output.String(), "coordinator channel ended") || strings.Contains(again.output.String(), "not reachable")
	})
	if again.ready() {
		t.Fatal("a revoked worker came back with its credential")
	}
	for _, o := range []*orchestrator{a, b} {
		if ws := o.workers(t); len(ws) != 0 {
			t.Errorf("peers of %s after the revoke: %+v, want no worker", o.addr, ws)
		}
	}
	a.api(t, "POST", "/api/v1/peers/"+node+"/revoke", nil, nil, http.StatusOK)
	var pl apiv1.PeerList
	a.api(t, "GET", "/api/v1/peers", nil, &pl, http.StatusOK)
	a.api(t, "POST", "/api/v1/peers/"+pl.Self+"/revoke", nil, nil, http.StatusConflict)
}
