package container

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/testsvc"
)

// This file holds what the tests that need a real engine share: the
// engine, the test image (kici-agent and busybox on scratch), a fake
// orchestrator the agents register with, and an event recorder.

// testHostAlias is the name agents dial to reach the test's fake
// orchestrator; ExtraHosts maps it to the engine's gateway.
const testHostAlias = "host.docker.internal"

// waitTimeout bounds every wait for something a container does.
const waitTimeout = 30 * time.Second

var engineState struct {
	once sync.Once
	cli  *client.Client
	err  error

	imageOnce sync.Once
	image     string // tag of the built test image
	agentBin  string // the kici-agent binary in it
	imageErr  error
	tmpDir    string
}

// testEngine returns a client of the engine the tests run against
// (DOCKER_HOST, else the default socket). Without a reachable engine the
// test is skipped, or fails under KICI_TEST_REQUIRE_SERVICES=1.
func testEngine(t *testing.T) *client.Client {
	t.Helper()
	engineState.once.Do(func() {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			engineState.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Ping(ctx); err != nil {
			_ = cli.Close()
			engineState.err = err
			return
		}
		engineState.cli = cli
	})
	if engineState.err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("no Docker engine reachable (%v), and %s=1 requires one", engineState.err, testsvc.EnvRequireServices)
		}
		t.Skipf("no Docker engine reachable (%v): skipping the test that needs one (start dockerd, or set %s=1 to fail instead)",
			engineState.err, testsvc.EnvRequireServices)
	}
	return engineState.cli
}

// testImage returns the tag of the test image, building it on first use:
// FROM scratch with /kici-agent (built here, CGO_ENABLED=0) as the
// entrypoint and busybox as /bin/busybox and /bin/sh.
func testImage(t *testing.T) string {
	t.Helper()
	cli := testEngine(t)
	engineState.imageOnce.Do(func() {
		engineState.image, engineState.imageErr = buildTestImage(cli)
	})
	if engineState.imageErr != nil {
		t.Fatalf("build the test image: %v", engineState.imageErr)
	}
	return engineState.image
}

func buildTestImage(cli *client.Client) (string, error) {
	dir, err := os.MkdirTemp("", "kici-container-test-")
	if err != nil {
		return "", err
	}
	engineState.tmpDir = dir
	agentBin := filepath.Join(dir, "kici-agent")
	cmd := exec.Command("go", "build", "-o", agentBin, "github.com/kici-dev/kici/cmd/kici-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build kici-agent: %v\n%s", err, out)
	}
	engineState.agentBin = agentBin
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return "", err
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("read busybox (install busybox-static): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"Dockerfile", 0o644, []byte("FROM scratch\nCOPY kici-agent /kici-agent\nCOPY bin/ /bin/\nENTRYPOINT [\"/kici-agent\"]\n")},
		{"kici-agent", 0o755, agent},
		{"bin/busybox", 0o755, busybox},
		{"bin/sh", 0o755, busybox},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	tag := "kici-test/scaler-container-agent:" + randomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("read image build output: %w", err)
		}
		if m.Error != "" {
			return "", fmt.Errorf("image build: %s", m.Error)
		}
	}
	return tag, nil
}

// cleanupEngine removes the test image; TestMain calls it.
func cleanupEngine() {
	if engineState.tmpDir != "" {
		_ = os.RemoveAll(engineState.tmpDir)
	}
	if engineState.cli == nil {
		return
	}
	if engineState.image != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = engineState.cli.ImageRemove(ctx, engineState.image, image.RemoveOptions{Force: true, PruneChildren: true})
	}
	_ = engineState.cli.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testLogger sends a component's log to t.Log, until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// newTestBackend builds a backend on the test engine for scaler "ct-test"
// of the given instance, closed when the test ends.
func newTestBackend(t *testing.T, instance string) *Backend {
	t.Helper()
	testEngine(t)
	log := testLogger(t)
	b, err := New(t.Context(), log, testConfig(instance))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func testConfig(instance string) Config {
	return Config{
		Name:       "ct-test",
		Instance:   instance,
		Host:       os.Getenv("DOCKER_HOST"), // empty: auto-detect the socket
		ExtraHosts: []string{testHostAlias + ":host-gateway"},
		StopGrace:  2 * time.Second,
	}
}

// newInstance returns a fresh orchestrator instance id, so that parallel
// tests never see each other's containers.
func newInstance() string { return "test-" + randomHex(6) }

// newAgentID returns an agent id as the manager makes them.
func newAgentID() string { return "scaler-container-" + randomHex(4) }

// spawnRequest is a request for an agent that dials url, on the test
// image.
func spawnRequest(t *testing.T, agentID, url string, events *eventLog) scaler.SpawnRequest {
	return scaler.SpawnRequest{
		AgentID: agentID,
		Scaler:  "ct-test",
		LabelSet: scaler.LabelSet{
			Labels: []string{"container", "linux"},
			Image:  testImage(t),
			Env:    map[string]string{"KICI_LOG_LEVEL": "debug"},
			Limits: scaler.Spec{CPUs: 0.5, MemoryBytes: 256 << 20},
		},
		Env: map[string]string{
			"KICI_ORCHESTRATOR_URL": url,
			"KICI_AGENT_ID":         agentID,
			"KICI_AGENT_TOKEN":      "kat_test",
			"KICI_LABELS":           "container,linux",
			"KICI_AGENT_ONE_SHOT":   "1",
			"KICI_AGENT_SCALER":     "1",
			"KICI_LOG_LEVEL":        "info",
		},
		BoundJobID: "job-" + agentID,
		RunID:      "run-1",
		OnEvent:    events.add,
	}
}

// eventLog records a spawn's events.
type eventLog struct {
	mu      sync.Mutex
	events  []scaler.Event
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(ev scaler.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *eventLog) all() []scaler.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *eventLog) types() []string {
	var out []string
	for _, ev := range l.all() {
		out = append(out, ev.Type)
	}
	return out
}

// waitFor returns the first event of type typ, waiting for it.
func (l *eventLog) waitFor(t *testing.T, typ string) scaler.Event {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		ch := l.changed
		for _, ev := range l.events {
			if ev.Type == typ {
				l.mu.Unlock()
				return ev
			}
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("waited %s for event %s; got %v", waitTimeout, typ, l.types())
		}
	}
}

// fakeOrchestrator is the orchestrator's side of the agent protocol, as
// far as registration: it answers register with registered and keeps the
// connection open. It listens on the engine's default bridge gateway
// (reachable from containers, and only from this host and its
// containers); agents dial it as host.docker.internal.
type fakeOrchestrator struct {
	t   *testing.T
	url string // as agents dial it

	mu        sync.Mutex
	registers []*protocol.Register
	changed   chan struct{}
}

func newFakeOrchestrator(t *testing.T) *fakeOrchestrator {
	t.Helper()
	gw := bridgeGateway(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway %s: %v", gw, err)
	}
	f := &fakeOrchestrator{t: t, changed: make(chan struct{})}
	port := ln.Addr().(*net.TCPAddr).Port
	f.url = "ws://" + net.JoinHostPort(testHostAlias, strconv.Itoa(port)) + "/ws"
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", f.serveWS)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// bridgeGateway is the gateway address of the engine's default bridge
// network: the host's side of docker0, where host-gateway points. The
// network's IPAM config names it, or (Docker 20.10 leaves it out) the
// bridge interface on this host holds it.
func bridgeGateway(t *testing.T) string {
	t.Helper()
	nw, err := testEngine(t).NetworkInspect(t.Context(), "bridge", network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect the engine's bridge network: %v", err)
	}
	for _, c := range nw.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway
		}
	}
	name := nw.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("the engine's bridge network names no gateway, and its interface %s is not on this host: %v", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatalf("addresses of %s: %v", name, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatalf("interface %s has no IPv4 address", name)
	return ""
}

func (f *fakeOrchestrator) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(protocol.MaxMessageBytes)
	ctx := r.Context()
	_, data, err := c.Read(ctx)
	if err != nil {
		return
	}
	m, err := protocol.Decode(data)
	if err != nil {
		f.t.Errorf("fake orchestrator: agent sent an invalid message: %v", err)
		return
	}
	reg, ok := m.(*protocol.Register)
	if !ok {
		f.t.Errorf("fake orchestrator: first message is %s, want register", m.Type())
		return
	}
	answer, err := protocol.Encode(&protocol.Registered{AgentID: reg.AgentID, HeartbeatIntervalMS: 30_000, ServerVersion: "fake"})
	if err != nil {
		f.t.Errorf("fake orchestrator: encode registered: %v", err)
		return
	}
	if err := c.Write(ctx, websocket.MessageText, answer); err != nil {
		return
	}
	f.mu.Lock()
	f.registers = append(f.registers, reg)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
	}
}

// waitRegister returns the register message of agentID, waiting for it.
func (f *fakeOrchestrator) waitRegister(t *testing.T, agentID string) *protocol.Register {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		ch := f.changed
		for _, r := range f.registers {
			if r.AgentID == agentID {
				f.mu.Unlock()
				return r
			}
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("waited %s for agent %s to register", waitTimeout, agentID)
		}
	}
}
