package orchestrator

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestDiagnose runs the checks of an orchestrator on SQLite in a temp data
// dir, whose one bare-metal scaler points at an agent binary that does
// not exist and whose other label set points at one that does: every
// check but that one passes, and the failed one says how to fix it.
func TestDiagnose(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	agent := filepath.Join(t.TempDir(), "kici-agent")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	scalers := filepath.Join(t.TempDir(), "scalers.yaml")
	cfg := `version: 1
scalers:
  - name: metal
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [linux, missing]
        binaryPath: /nonexistent/kici-agent
      - labels: [linux, present]
        binaryPath: ` + agent + `
`
	if err := os.WriteFile(scalers, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := New(t.Context(), slog.New(slog.DiscardHandler), Config{
		HTTPAddr: "127.0.0.1:0", PublicURL: "http://127.0.0.1:4000", DataDir: dataDir,
		AgentAuth: "token", ScalerConfigPath: scalers,
		QueueSweepInterval: time.Hour, DispatchAckTimeout: time.Minute, AgentRecoveryWindow: time.Minute,
	})
	if err != nil {
		t.Fatalf("start orchestrator: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	checks := srv.Diagnose(t.Context())
	byName := map[string]apiv1.DiagnoseCheck{}
	var names []string
	for _, c := range checks {
		byName[c.Name] = c
		names = append(names, c.Name)
		t.Logf("%+v", c)
	}
	want := []string{"database", "migrations", "data dir free space", "secret key", "job-token key",
		"scaler metal: spawn failures", "scaler metal: binary [linux,missing]", "scaler metal: binary [linux,present]"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("checks: got %q, want %q", names, want)
	}
	for _, name := range []string{"database", "migrations", "secret key", "job-token key", "scaler metal: binary [linux,present]"} {
		if c := byName[name]; !c.OK || c.Fix != "" {
			t.Errorf("check %q: got %+v, want it passed without a fix", name, c)
		}
	}
	if c := byName["database"]; !strings.Contains(c.Detail, "ping") {
		t.Errorf("database detail %q does not give the ping latency", c.Detail)
	}
	if c := byName["data dir free space"]; !strings.Contains(c.Detail, "free of") || !strings.Contains(c.Detail, dataDir) {
		t.Errorf("free space detail %q does not say how much is free where", c.Detail)
	}
	missing := byName["scaler metal: binary [linux,missing]"]
	if missing.OK {
		t.Fatalf("missing binary: got %+v, want a failed check", missing)
	}
	if want := "/nonexistent/kici-agent does not exist"; missing.Detail != want {
		t.Errorf("missing binary detail: got %q, want %q", missing.Detail, want)
	}
	if want := "install kici-agent at /nonexistent/kici-agent or fix binaryPath in scalers.yaml"; missing.Fix != want {
		t.Errorf("missing binary fix: got %q, want %q", missing.Fix, want)
	}

	// The job-token key removed from under a running orchestrator.
	if err := os.Remove(filepath.Join(dataDir, "job-token.key")); err != nil {
		t.Fatal(err)
	}
	for _, c := range srv.Diagnose(t.Context()) {
		if c.Name == "job-token key" && (c.OK || !strings.Contains(c.Fix, "restore")) {
			t.Errorf("job-token key removed: got %+v, want a failed check with the fix", c)
		}
	}
}
