package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// edgeNetwork is a network namespace joined to the host by a veth pair:
// the host's end has hostIP, the namespace's nsIP, on a /30 of their own.
// cut and heal take the host's end down and up again.
type edgeNetwork struct {
	ns       *netNS
	hostLink netlink.Link
	hostIP   string
	nsIP     string
}

func newEdgeNetwork(t *testing.T) *edgeNetwork {
	t.Helper()
	ns := newNetNS(t)
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "kp" + hex.EncodeToString(b[:])
	peerName := "kq" + hex.EncodeToString(b[:])
	// 10.202.x.y/30, x and y from the random bytes: parallel tests do not
	// collide in practice, and nothing else here uses 10.202/16.
	hostIP, nsIP := net.IPv4(10, 202, b[0], (b[1]&0xfc)+1), net.IPv4(10, 202, b[0], (b[1]&0xfc)+2)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peerName}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l) // takes its peer with it
		}
	})
	host, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := netlink.LinkByName(peerName)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(ns.handle)); err != nil {
		t.Fatalf("move veth end into the namespace: %v", err)
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: &net.IPNet{IP: hostIP, Mask: net.CIDRMask(30, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		t.Fatal(err)
	}
	err = ns.do(func() error {
		l, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: nsIP, Mask: net.CIDRMask(30, 32)}}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatalf("set up the namespace's end: %v", err)
	}
	return &edgeNetwork{ns: ns, hostLink: host, hostIP: hostIP.String(), nsIP: nsIP.String()}
}

func (e *edgeNetwork) cut(t *testing.T) {
	t.Helper()
	if err := netlink.LinkSetDown(e.hostLink); err != nil {
		t.Fatal(err)
	}
}

func (e *edgeNetwork) heal(t *testing.T) {
	t.Helper()
	if err := netlink.LinkSetUp(e.hostLink); err != nil {
		t.Fatal(err)
	}
}

// startAgentIn starts agent id in the edge namespace, dialling url.
func startAgentIn(t *testing.T, e *edgeNetwork, token, url, id string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kici-agent"))
	cmd.Env = append(minimalEnv(), "KICI_AGENT_ID="+id, "KICI_AGENT_WORKDIR="+t.TempDir(), "KICI_LOG_FORMAT=text",
		"KICI_ORCHESTRATOR_URL="+url, "KICI_AGENT_TOKEN="+token, "KICI_AGENT_CANCEL_GRACE_MS=2000")
	cmd = e.ns.command(cmd)
	out := &testWriter{t: t, prefix: "agent " + id + ": "}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// TestPartitionDrillWorkerCutFromItsCoordinator: a worker and its agent
// run in a network of their own, joined to the coordinator's host by one
// link. Cut that link while the agent runs a job, then heal it before the
// recovery window ends. Written outcome:
//   - while cut, the job keeps running on the agent; the worker is not
//     ready once it heard nothing for three heartbeats (15 s), and the
//     coordinator still shows the job running;
//   - after the heal the worker reconnects, relays the agent again, and
//     the agent reclaims its job on the coordinator;
//   - the job succeeds, its step ran once, its log holds the lines
//     written before, during and after the cut.
func TestPartitionDrillWorkerCutFromItsCoordinator(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a drill of about 30 s")
	}
	e := newEdgeNetwork(t)
	dbURL := testsvc.PostgresURL(t)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	c := startOrchestratorAt(t, net.JoinHostPort(e.hostIP, port), dbURL, "KICI_CLUSTER_ROLE=coordinator",
		"KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200", "KICI_AGENT_RECOVERY_WINDOW_MS=60000")
	var created apiv1.JoinTokenCreated
	c.api(t, "POST", "/api/v1/peers/join-tokens", apiv1.JoinTokenRequest{TTL: "1h"}, &created, http.StatusCreated)
	w := startWorkerIn(t, e.ns, t.TempDir(), created.Token, "http://"+c.addr)
	waitFor(t, 60*time.Second, "the worker to be ready", w.ready)

	marks := t.TempDir()
	// The step prints a line a second until it is released.
	c.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  work:
    steps:
      - run: echo ran >> %[1]s/ran; touch %[1]s/started; i=0; while [ ! -e %[1]s/go ]; do i=$((i+1)); echo "tick $i"; sleep 1; done; echo done
`, marks)})
	var tok apiv1.AgentToken
	c.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{}, &tok, http.StatusCreated)
	startAgentIn(t, e, tok.Token, "ws://"+w.addr+"/ws", "edge-1")
	waitFor(t, 20*time.Second, "the agent listed on the coordinator", func() bool { return slices.Contains(c.agentIDs(t), "edge-1") })
	id := c.push(t)
	waitFor(t, 30*time.Second, "the step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	// The coordinator has applied the agent's "running" and a first line
	// before the cut (under load they may lag the step itself).
	waitFor(t, 30*time.Second, "the job running with output on the coordinator", func() bool {
		r := c.run(t, id)
		return r.Jobs[0].Status == "running" && slices.Contains(c.logs(t, id, "work"), "tick 1")
	})

	e.cut(t)
	cut := time.Now()
	waitFor(t, 30*time.Second, "the worker to see the cut", func() bool { return !w.ready() })
	noticed := time.Since(cut)
	if r := c.run(t, id); r.Jobs[0].Status != "running" {
		t.Fatalf("job during the cut: %s (%s), want still running", r.Jobs[0].Status, r.Jobs[0].Error)
	}
	e.heal(t)
	healed := time.Now()
	waitFor(t, 30*time.Second, "the worker to reconnect", w.ready)
	waitFor(t, 30*time.Second, "the agent back on the coordinator", func() bool { return slices.Contains(c.agentIDs(t), "edge-1") })
	back := time.Since(healed)
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
	lines := c.logs(t, id, "work")
	ticks := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "tick ") {
			ticks++
		}
	}
	if !slices.Contains(lines, "done") || ticks < int(noticed/time.Second) {
		t.Errorf("log: %d ticks and done=%t; want every tick, those printed during the cut too (%s), and done",
			ticks, slices.Contains(lines, "done"), noticed)
	}
	t.Logf("outcome: the worker noticed the cut after %s; the agent was back on the coordinator %s after the heal; the job went on running throughout, succeeded, its step ran once, and its log holds %d ticks",
		noticed.Round(100*time.Millisecond), back.Round(100*time.Millisecond), ticks)
}
