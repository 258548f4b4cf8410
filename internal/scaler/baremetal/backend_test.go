//go:build unix

package baremetal_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/baremetal"
)

func TestSpawnRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		binary  string
		wantErr string
	}{
		{name: "missing binary", binary: filepath.Join(dir, "missing"), wantErr: `agent binary "` + filepath.Join(dir, "missing") + `": no such file or directory`},
		{name: "directory", binary: dir, wantErr: `agent binary "` + dir + `": not a regular file`},
		{name: "not executable", binary: notExec, wantErr: `agent binary "` + notExec + `": not executable (mode -rw-r--r--)`},
		{name: "empty binaryPath", binary: "", wantErr: `agent binary "": binaryPath is empty`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, cfg := newBackend(t, nil)
			req, ev := request(t, tc.binary, nil)
			h, err := b.Spawn(t.Context(), req)
			if err == nil || !scaler.IsDeterministic(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Spawn: got handle %+v, error %v; want a DeterministicSpawnError with %q", h, err, tc.wantErr)
			}
			if diff := cmp.Diff([]string{scaler.EventProvisioning, scaler.EventFailed}, ev.types()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if failed, _ := ev.failed(); failed.Detail != err.Error() {
				t.Errorf("%s detail: got %q, want the error %q", scaler.EventFailed, failed.Detail, err)
			}
			if _, err := os.Stat(filepath.Join(cfg.WorkDir, "agents", req.AgentID)); !os.IsNotExist(err) {
				t.Errorf("work dir after a refused spawn: got stat error %v, want it absent", err)
			}
			if err := b.Destroy(t.Context(), req.AgentID); err != nil {
				t.Errorf("Destroy after a refused spawn: got %v, want nil", err)
			}
		})
	}
}

func TestSpawnConfigInvalid(t *testing.T) {
	t.Parallel()
	b := baremetal.New(testLogger(t), baremetal.Config{Name: "test", KillGrace: -time.Second})
	req, ev := request(t, agentBinary, nil)
	_, err := b.Spawn(t.Context(), req)
	if !scaler.IsDeterministic(err) || !strings.Contains(err.Error(), "WorkDir is required") {
		t.Errorf("Spawn: got %v, want a DeterministicSpawnError naming WorkDir", err)
	}
	if diff := cmp.Diff([]string{scaler.EventFailed}, ev.types()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestExitBeforeRegister checks the failure of an agent that exits on its
// own before it registered: its exit code and its last 50 lines, the last
// one unterminated.
func TestExitBeforeRegister(t *testing.T) {
	t.Parallel()
	b, cfg := newBackend(t, nil)
	req, ev := request(t, testBinary, map[string]string{childEnv: "lines"})
	if _, err := b.Spawn(t.Context(), req); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	eventually(t, "the agent's failure", func() bool { _, ok := ev.failed(); return ok })
	var lines []string
	for i := 11; i <= 60; i++ {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	want := "agent process exited with code 3 before it registered\n--- last output ---\n" + strings.Join(lines, "\n")
	failed, _ := ev.failed()
	if diff := cmp.Diff(want, failed.Detail); diff != "" {
		t.Errorf("%s detail (-want +got):\n%s", scaler.EventFailed, diff)
	}
	if diff := cmp.Diff([]string{scaler.EventProvisioning, scaler.EventReady, scaler.EventConnecting, scaler.EventFailed}, ev.types()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if err := b.Destroy(t.Context(), req.AgentID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	logPath := filepath.Join(cfg.WorkDir, "logs", req.AgentID+".log")
	if data, err := os.ReadFile(logPath); err != nil || !bytes.HasPrefix(data, []byte("line 1\n")) {
		t.Errorf("log file kept after Destroy: got %q, %v; want the agent's output", data, err)
	}
}

// TestNoFailureAfterRegisterOrDestroy: an agent that dies after it
// registered, or because it was destroyed, did not fail to spawn.
func TestNoFailureAfterRegisterOrDestroy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(t *testing.T, b *baremetal.Backend, h scaler.Handle)
	}{
		{name: "killed after it registered", end: func(t *testing.T, b *baremetal.Backend, h scaler.Handle) {
			b.MarkRegistered(h.AgentID)
			pid, _ := strconv.Atoi(h.Ref)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the agent to be gone", func() bool { return !listed(t, b, h.AgentID) })
		}},
		{name: "destroyed before it registered", end: func(t *testing.T, b *baremetal.Backend, h scaler.Handle) {
			if err := b.Destroy(t.Context(), h.AgentID); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _ := newBackend(t, nil)
			req, ev := request(t, testBinary, map[string]string{childEnv: "sleep"})
			h, err := b.Spawn(t.Context(), req)
			if err != nil {
				t.Fatalf("Spawn: %v", err)
			}
			tc.end(t, b, h)
			// Close waits for the watcher, which would have emitted it.
			if err := b.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if failed, ok := ev.failed(); ok {
				t.Errorf("got %s %q, want none", failed.Type, failed.Detail)
			}
		})
	}
}

// TestDestroyEscalates: an agent that ignores SIGTERM is killed after the
// grace period.
func TestDestroyEscalates(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	b, cfg := newBackend(t, func(c *baremetal.Config) { c.KillGrace = grace })
	req, ev := request(t, testBinary, map[string]string{childEnv: "ignore-term"})
	h, err := b.Spawn(t.Context(), req)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	waitOutput(t, cfg, req.AgentID, regexp.MustCompile("ignoring SIGTERM"))
	start := time.Now()
	if err := b.Destroy(t.Context(), req.AgentID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if took := time.Since(start); took < grace {
		t.Errorf("Destroy took %s, want at least the grace period %s", took, grace)
	}
	pid, _ := strconv.Atoi(h.Ref)
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists after Destroy", pid)
	}
	if _, err := os.Stat(filepath.Join(cfg.WorkDir, "agents", req.AgentID)); !os.IsNotExist(err) {
		t.Errorf("work dir after Destroy: got stat error %v, want it removed", err)
	}
	if failed, ok := ev.failed(); ok {
		t.Errorf("got %s %q, want none for a destroyed agent", failed.Type, failed.Detail)
	}
}

// TestAgentEnvironment: the agent's environment holds only the allow-listed
// host variables, the request's, KICI_AGENT_WORKDIR and the label set's,
// which win.
func TestAgentEnvironment(t *testing.T) {
	t.Parallel()
	b, cfg := newBackend(t, nil)
	req, ev := request(t, testBinary, map[string]string{childEnv: "env", "KICI_LABELS": "from-label-set", "EXTRA": "1"})
	if _, err := b.Spawn(t.Context(), req); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	eventually(t, "the agent to exit", func() bool { _, ok := ev.failed(); return ok })
	data, err := os.ReadFile(filepath.Join(cfg.WorkDir, "logs", req.AgentID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		got[k] = v
	}
	want := map[string]string{
		childEnv: "env", "EXTRA": "1", "KICI_LABELS": "from-label-set",
		"KICI_AGENT_WORKDIR": filepath.Join(cfg.WorkDir, "agents", req.AgentID),
	}
	for k, v := range req.Env {
		if k != "KICI_LABELS" {
			want[k] = v
		}
	}
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			want[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent environment (-want +got):\n%s", diff)
	}
}

// TestSpawnCancelledDuringSpawn: a ctx that ends during Spawn (here: from
// OnEvent, at provisioning) leaves nothing behind. internal_test.go covers a
// ctx that ends after the process started.
func TestSpawnCancelledDuringSpawn(t *testing.T) {
	t.Parallel()
	b, cfg := newBackend(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	req, ev := request(t, testBinary, map[string]string{childEnv: "sleep"})
	req.OnEvent = func(e scaler.Event) {
		ev.add(e)
		cancel()
	}
	if _, err := b.Spawn(ctx, req); err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Spawn: got %v, want context.Canceled", err)
	}
	for _, p := range []string{filepath.Join("agents", req.AgentID), filepath.Join("logs", req.AgentID+".log")} {
		if _, err := os.Stat(filepath.Join(cfg.WorkDir, p)); !os.IsNotExist(err) {
			t.Errorf("%s after a cancelled spawn: got stat error %v, want it absent", p, err)
		}
	}
	if cs, _ := b.List(t.Context()); len(cs) != 0 {
		t.Errorf("List after a cancelled spawn: got %v, want none", cs)
	}
	if failed, ok := ev.failed(); ok {
		t.Errorf("got %s %q, want none (the manager reports the ctx's cause)", failed.Type, failed.Detail)
	}
}

// waitOutput waits until the agent's log matches re and returns the match.
func waitOutput(t *testing.T, cfg baremetal.Config, agentID string, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	eventually(t, "output matching "+re.String(), func() bool {
		data, _ := os.ReadFile(filepath.Join(cfg.WorkDir, "logs", agentID+".log"))
		m = re.FindStringSubmatch(string(data))
		return m != nil
	})
	return m
}

func listed(t *testing.T, b *baremetal.Backend, agentID string) bool {
	cs, err := b.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return slices.ContainsFunc(cs, func(c scaler.Compute) bool { return c.AgentID == agentID })
}
