package container

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupEngine()
	os.Exit(code)
}

// assertGone fails unless the container no longer exists.
func assertGone(t *testing.T, ref string) {
	t.Helper()
	_, err := testEngine(t).ContainerInspect(context.WithoutCancel(t.Context()), ref)
	if !cerrdefs.IsNotFound(err) {
		t.Errorf("inspect container %s: got %v, want not found", shortID(ref), err)
	}
}

func TestSpawnRegistersAndDestroy(t *testing.T) {
	t.Parallel()
	instance := newInstance()
	b := newTestBackend(t, instance)
	orch := newFakeOrchestrator(t)
	events := newEventLog()
	agentID := newAgentID()
	req := spawnRequest(t, agentID, orch.url, events)

	h, err := b.Spawn(t.Context(), req)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	reg := orch.waitRegister(t, agentID)
	b.MarkRegistered(agentID)
	if !reg.ScalerAgent || !reg.OneShot {
		t.Errorf("register: scaler_agent %v, one_shot %v; want both true", reg.ScalerAgent, reg.OneShot)
	}
	if !slices.Contains(reg.Labels, "container") {
		t.Errorf("register labels = %v, want them to include container", reg.Labels)
	}

	wantTypes := []string{scaler.EventProvisioning, scaler.EventNetwork, scaler.EventReady, scaler.EventConnecting}
	if diff := cmp.Diff(wantTypes, events.types()); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	for _, ev := range events.all() {
		if ev.AgentID != agentID || ev.Time.IsZero() {
			t.Errorf("event %s: agent %q, time %v; want agent %q and a time", ev.Type, ev.AgentID, ev.Time, agentID)
		}
	}
	if got, want := events.all()[2].Detail, "container "+shortID(h.Ref); got != want {
		t.Errorf("ready detail = %q, want %q", got, want)
	}

	if h.AgentID != agentID || h.Scaler != "ct-test" || h.Ref == "" || h.SpawnedAt.IsZero() {
		t.Errorf("handle = %+v, want agent %s, scaler ct-test, a container id and a time", h, agentID)
	}
	rec, err := decodeBlob(h.Blob)
	if err != nil || rec.ContainerID != h.Ref {
		t.Errorf("blob %s: container %q, %v; want %q", h.Blob, rec.ContainerID, err, h.Ref)
	}

	info, err := testEngine(t).ContainerInspect(t.Context(), h.Ref)
	if err != nil {
		t.Fatalf("inspect container: %v", err)
	}
	wantLabels := map[string]string{
		LabelManaged:    "true",
		LabelInstance:   instance,
		LabelScaler:     "ct-test",
		LabelAgentID:    agentID,
		LabelLabels:     "container,linux",
		LabelBoundJobID: req.BoundJobID,
		LabelRunID:      "run-1",
	}
	if diff := cmp.Diff(wantLabels, info.Config.Labels); diff != "" {
		t.Errorf("container labels (-want +got):\n%s", diff)
	}
	for _, kv := range []string{"KICI_LOG_LEVEL=debug", "KICI_AGENT_WORKDIR=/tmp/kici-agent", "KICI_AGENT_ID=" + agentID} {
		if !slices.Contains(info.Config.Env, kv) {
			t.Errorf("container env lacks %s: %v", kv, info.Config.Env)
		}
	}
	hc := info.HostConfig
	if hc.Memory != 256<<20 || hc.NanoCPUs != 500_000_000 || hc.PidsLimit == nil || *hc.PidsLimit != 4096 || hc.AutoRemove {
		t.Errorf("host config: memory %d, nano-CPUs %d, pids limit %v, auto-remove %v; want %d, 500000000, 4096, false",
			hc.Memory, hc.NanoCPUs, hc.PidsLimit, hc.AutoRemove, 256<<20)
	}
	if diff := cmp.Diff([]string{testHostAlias + ":host-gateway"}, hc.ExtraHosts); diff != "" {
		t.Errorf("extra hosts (-want +got):\n%s", diff)
	}

	list, err := b.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 1 || list[0].AgentID != agentID || list[0].Ref != h.Ref || list[0].Instance != instance {
		t.Errorf("List = %+v, want one compute of agent %s, container %s, instance %s", list, agentID, shortID(h.Ref), instance)
	}

	if err := b.Destroy(t.Context(), agentID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	assertGone(t, h.Ref)
	if err := b.Destroy(t.Context(), agentID); err != nil {
		t.Errorf("second Destroy = %v, want nil", err)
	}
	if err := b.Destroy(t.Context(), "scaler-container-unknown"); err != nil {
		t.Errorf("Destroy of an unknown agent = %v, want nil", err)
	}
	if slices.Contains(events.types(), scaler.EventFailed) {
		t.Errorf("events = %v, want no %s for a registered agent", events.types(), scaler.EventFailed)
	}
}

func TestSpawnRefusedImage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		image    string
		policy   string
		refused  bool
		wantPull bool // a "pulling image" event
	}{
		{name: "never, missing", image: "kici-test/no-such-image:never", policy: "Never", refused: true},
		// 127.0.0.1:1 is a registry that refuses connections at once.
		{name: "if-not-present, cannot pull", image: "127.0.0.1:1/kici-test/no-such-image:v1", policy: "IfNotPresent", refused: true, wantPull: true},
		{name: "always, registry unreachable", image: "127.0.0.1:1/kici-test/no-such-image:v1", policy: "Always", refused: false, wantPull: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBackend(t, newInstance())
			events := newEventLog()
			agentID := newAgentID()
			req := spawnRequest(t, agentID, "ws://127.0.0.1:1/ws", events)
			req.LabelSet.Image, req.LabelSet.PullPolicy = tt.image, tt.policy

			_, err := b.Spawn(t.Context(), req)
			if err == nil {
				t.Fatal("Spawn succeeded, want an error")
			}
			if got := scaler.IsDeterministic(err); got != tt.refused {
				t.Errorf("IsDeterministic(%v) = %v, want %v", err, got, tt.refused)
			}
			if !strings.Contains(err.Error(), tt.image) {
				t.Errorf("error %q does not name the image %s", err, tt.image)
			}
			pulled := slices.ContainsFunc(events.all(), func(ev scaler.Event) bool {
				return ev.Type == scaler.EventProvisioning && strings.HasPrefix(ev.Detail, "pulling image ")
			})
			if pulled != tt.wantPull {
				t.Errorf("pull event: %v, want %v (events %v)", pulled, tt.wantPull, events.all())
			}
			if slices.Contains(events.types(), scaler.EventFailed) {
				t.Errorf("events = %v: a spawn that failed before create leaves %s to the manager", events.types(), scaler.EventFailed)
			}
			if list, err := b.List(t.Context()); err != nil || len(list) != 0 {
				t.Errorf("List = %v, %v; want no containers", list, err)
			}
			if err := b.Destroy(t.Context(), agentID); err != nil {
				t.Errorf("Destroy after a failed spawn = %v, want nil", err)
			}
		})
	}
}

// agentOutput runs the test image's agent here with env and returns its
// last output line: what the container must report when it exits early.
func agentOutput(t *testing.T, env map[string]string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), engineState.agentBin)
	cmd.Env = []string{"KICI_AGENT_WORKDIR=" + t.TempDir()}
	for k, v := range env {
		if k != "KICI_AGENT_WORKDIR" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the agent with env %v exited 0, want a failure", env)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func TestEarlyExitReportsFailure(t *testing.T) {
	t.Parallel()
	b := newTestBackend(t, newInstance())
	events := newEventLog()
	agentID := newAgentID()
	req := spawnRequest(t, agentID, "bad://nowhere", events)
	wantLast := agentOutput(t, req.Env)

	h, err := b.Spawn(t.Context(), req)
	if err != nil {
		t.Fatalf("Spawn: %v, want nil (the container starts; the agent fails after)", err)
	}
	failed := events.waitFor(t, scaler.EventFailed)
	const wantMsg = "agent container exited with code 2 before it registered"
	if !strings.HasPrefix(failed.Detail, wantMsg+"\n--- captured output ---\n") {
		t.Errorf("failure detail = %q, want it to start with %q and the captured output", failed.Detail, wantMsg)
	}
	lines := strings.Split(failed.Detail, "\n")
	if got := lines[len(lines)-1]; got != wantLast {
		t.Errorf("last line of the failure detail = %q, want the agent's last line %q", got, wantLast)
	}
	wantTypes := []string{scaler.EventProvisioning, scaler.EventNetwork, scaler.EventReady, scaler.EventConnecting, scaler.EventFailed}
	if diff := cmp.Diff(wantTypes, events.types()); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	// The exited container stays (its output is read) until Destroy.
	if _, err := testEngine(t).ContainerInspect(t.Context(), h.Ref); err != nil {
		t.Errorf("inspect the exited container before Destroy: %v, want it there", err)
	}
	if err := b.Destroy(t.Context(), agentID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	assertGone(t, h.Ref)
	if n := strings.Count(strings.Join(events.types(), " "), scaler.EventFailed); n != 1 {
		t.Errorf("events = %v, want exactly one %s", events.types(), scaler.EventFailed)
	}
}

// abandon drops b as a crashed orchestrator would: it stops following
// its agents and closes its engine connection, leaving every container
// as it is.
func (b *Backend) abandon() {
	b.mu.Lock()
	b.closed = true
	for id, a := range b.agents {
		if a.stop != nil {
			a.stop()
		}
		delete(b.agents, id)
	}
	b.mu.Unlock()
	b.wg.Wait()
	_ = b.cli.Close()
}

func TestRecoverReattaches(t *testing.T) {
	t.Parallel()
	instance := newInstance()
	orch := newFakeOrchestrator(t)
	first, err := New(t.Context(), testLogger(t), testConfig(instance))
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	// Two registered agents; one of them then dies.
	cli := testEngine(t)
	spawn := func(agentID string) scaler.Handle {
		t.Helper()
		h, err := first.Spawn(t.Context(), spawnRequest(t, agentID, orch.url, newEventLog()))
		if err != nil {
			t.Fatalf("Spawn %s: %v", agentID, err)
		}
		t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), h.Ref, container.RemoveOptions{Force: true}) })
		orch.waitRegister(t, agentID)
		first.MarkRegistered(agentID)
		return h
	}
	liveID, deadID := newAgentID(), newAgentID()
	live, dead := spawn(liveID), spawn(deadID)
	if err := cli.ContainerKill(t.Context(), dead.Ref, "KILL"); err != nil {
		t.Fatalf("kill container %s: %v", shortID(dead.Ref), err)
	}
	waitC, errC := cli.ContainerWait(t.Context(), dead.Ref, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatalf("wait for container %s: %v", shortID(dead.Ref), err)
	}
	first.abandon()

	// The orchestrator restarts: a second backend gets the saved handles.
	second := newTestBackend(t, instance)
	gone := scaler.Handle{AgentID: newAgentID(), Scaler: "ct-test", Ref: "", Blob: encodeBlob(strings.Repeat("0", 64))}
	got, err := second.Recover(t.Context(), []scaler.Handle{live, dead, gone})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if diff := cmp.Diff([]scaler.Handle{live}, got); diff != "" {
		t.Errorf("recovered handles (-want +got):\n%s", diff)
	}
	assertGone(t, dead.Ref)

	// Re-attached: the output follower read the agent's earlier lines,
	// and the agent is tracked (List, Destroy).
	second.mu.Lock()
	a := second.agents[liveID]
	second.mu.Unlock()
	if a == nil {
		t.Fatalf("agent %s is not tracked after Recover", liveID)
	}
	deadline := time.Now().Add(waitTimeout)
	for !strings.Contains(a.tail.String(), `"msg":"registered"`) {
		if time.Now().After(deadline) {
			t.Fatalf("re-attached output = %q, want the agent's \"registered\" line", a.tail.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := second.List(t.Context())
	if err != nil || len(list) != 1 || list[0].AgentID != liveID {
		t.Errorf("List = %+v, %v; want agent %s only", list, err, liveID)
	}
	if err := second.Destroy(t.Context(), liveID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	assertGone(t, live.Ref)
}

func TestCloseDestroysTracked(t *testing.T) {
	t.Parallel()
	testEngine(t)
	b, err := New(t.Context(), testLogger(t), testConfig(newInstance()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	orch := newFakeOrchestrator(t)
	agentID := newAgentID()
	h, err := b.Spawn(t.Context(), spawnRequest(t, agentID, orch.url, newEventLog()))
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertGone(t, h.Ref)
	_, err = b.Spawn(t.Context(), spawnRequest(t, newAgentID(), orch.url, newEventLog()))
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Spawn after Close = %v, want ErrClosed", err)
	}
}

func TestSpawnCancelled(t *testing.T) {
	t.Parallel()
	b := newTestBackend(t, newInstance())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	agentID := newAgentID()
	_, err := b.Spawn(ctx, spawnRequest(t, agentID, "ws://127.0.0.1:1/ws", newEventLog()))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Spawn with a cancelled ctx = %v, want context.Canceled", err)
	}
	if list, err := b.List(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v; want no containers", list, err)
	}
}

func TestReapLeftoversSparesOtherInstance(t *testing.T) {
	t.Parallel()
	instance := newInstance()
	b := newTestBackend(t, instance)
	cli := testEngine(t)
	create := func(agentID string, labels map[string]string, run bool) string {
		t.Helper()
		return createLabelled(t, agentID, labels, run)
	}
	labels := agentLabels
	other := newInstance()
	kept := create("kept", labels(instance, "ct-test", "scaler-container-kept"), true)
	leftRunning := create("left-running", labels(instance, "ct-test", "scaler-container-left1"), true)
	leftStopped := create("left-stopped", labels(instance, "ct-test", "scaler-container-left2"), false)
	otherInstance := create("other-instance", labels(other, "ct-test", "scaler-container-other"), true)
	otherScaler := create("other-scaler", labels(instance, "another-scaler", "scaler-container-scaler2"), false)
	unmanagedLabels := labels(instance, "ct-test", "scaler-container-unmanaged")
	delete(unmanagedLabels, LabelManaged)
	unmanaged := create("unmanaged", unmanagedLabels, false)

	reaped, err := b.ReapLeftovers(t.Context(), []string{"scaler-container-kept"})
	if err != nil {
		t.Fatalf("ReapLeftovers: %v", err)
	}
	slices.Sort(reaped)
	if diff := cmp.Diff([]string{"scaler-container-left1", "scaler-container-left2"}, reaped); diff != "" {
		t.Errorf("reaped (-want +got):\n%s", diff)
	}
	assertGone(t, leftRunning)
	assertGone(t, leftStopped)
	for name, id := range map[string]string{"kept": kept, "other instance": otherInstance, "other scaler": otherScaler, "unmanaged": unmanaged} {
		info, err := cli.ContainerInspect(t.Context(), id)
		if err != nil {
			t.Errorf("%s container: %v, want it untouched", name, err)
			continue
		}
		if name == "kept" || name == "other instance" {
			if !info.State.Running {
				t.Errorf("%s container is %s, want it still running", name, info.State.Status)
			}
		}
	}
	list, err := b.List(t.Context())
	if err != nil || len(list) != 1 || list[0].AgentID != "scaler-container-kept" {
		t.Errorf("List = %+v, %v; want the kept container only", list, err)
	}
}

// hangingRegistry accepts connections on 127.0.0.1 and never answers, so
// that a pull from it hangs until it is aborted. It returns the image
// reference to pull.
func hangingRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String() + "/kici-test/hangs:v1"
}

func TestSpawnAborted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		abort func(t *testing.T, b *Backend, agentID string, cancel context.CancelFunc)
		want  error
	}{
		{
			name:  "ctx cancelled",
			abort: func(_ *testing.T, _ *Backend, _ string, cancel context.CancelFunc) { cancel() },
			want:  context.Canceled,
		},
		{
			name: "destroyed",
			abort: func(t *testing.T, b *Backend, agentID string, _ context.CancelFunc) {
				if err := b.Destroy(t.Context(), agentID); err != nil {
					t.Errorf("Destroy during the spawn = %v, want nil", err)
				}
			},
			want: errDestroyed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBackend(t, newInstance())
			events := newEventLog()
			agentID := newAgentID()
			req := spawnRequest(t, agentID, "ws://127.0.0.1:1/ws", events)
			req.LabelSet.Image, req.LabelSet.PullPolicy = hangingRegistry(t), "Always"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := b.Spawn(ctx, req)
				errc <- err
			}()
			events.waitFor(t, scaler.EventProvisioning) // "pulling image": the pull hangs
			tt.abort(t, b, agentID, cancel)
			timeout := time.NewTimer(waitTimeout)
			defer timeout.Stop()
			var err error
			select {
			case err = <-errc:
			case <-timeout.C:
				t.Fatalf("Spawn still runs %s after it was aborted", waitTimeout)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Spawn = %v, want %v", err, tt.want)
			}
			if scaler.IsDeterministic(err) {
				t.Errorf("IsDeterministic(%v) = true, want false for an aborted spawn", err)
			}
			if err := b.Destroy(t.Context(), agentID); err != nil {
				t.Errorf("Destroy after the aborted spawn = %v, want nil", err)
			}
			if list, err := b.List(t.Context()); err != nil || len(list) != 0 {
				t.Errorf("List = %v, %v; want no containers", list, err)
			}
		})
	}
}
