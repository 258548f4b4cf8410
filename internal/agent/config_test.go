package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kici-dev/kici/internal/agent"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	base := map[string]string{"KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:4000/ws"}
	tests := []struct {
		name         string
		env          map[string]string
		want         agent.Config
		wantWarnings []string
		wantErr      string
	}{
		{
			name: "minimal",
			env:  base,
			want: agent.Config{OrchestratorURL: "ws://127.0.0.1:4000/ws"},
		},
		{
			name: "everything",
			env: map[string]string{
				"KICI_ORCHESTRATOR_URL":          "wss://ci.example.com/ws",
				"KICI_AGENT_TOKEN":               "kat_x",
				"KICI_LABELS":                    " linux , gpu,,linux ",
				"KICI_AGENT_ID":                  "builder-1",
				"KICI_AGENT_WORKDIR":             "/var/lib/kici",
				"KICI_AGENT_ONE_SHOT":            "yes",
				"KICI_AGENT_CONCURRENCY":         "1",
				"KICI_AGENT_SCALER":              "true",
				"KICI_AGENT_CANCEL_GRACE_MS":     "2500",
				"KICI_AGENT_SHUTDOWN":            "finish",
				"KICI_AGENT_SHUTDOWN_TIMEOUT_MS": "1000",
				"KICI_AGENT_MAX_STEP_LOG_BYTES":  "2048",
				"KICI_AGENT_KEEP_JOB_DIRS":       "1",
			},
			want: agent.Config{
				OrchestratorURL: "wss://ci.example.com/ws", Token: "kat_x", Labels: []string{"linux", "gpu"},
				AgentID: "builder-1", WorkDir: "/var/lib/kici", OneShot: true, Concurrency: 1, ScalerAgent: true,
				CancelGrace: 2500 * time.Millisecond, Shutdown: agent.ShutdownFinish, ShutdownTimeout: time.Second,
				MaxStepLogBytes: 2048, KeepJobDirs: true,
			},
		},
		{
			name:    "missing URL",
			env:     map[string]string{},
			wantErr: "KICI_ORCHESTRATOR_URL) is required",
		},
		{
			name:    "http URL",
			env:     map[string]string{"KICI_ORCHESTRATOR_URL": "http://127.0.0.1:4000/ws"},
			wantErr: "want a ws:// or wss:// URL",
		},
		{
			name:    "reserved label prefix",
			env:     with(base, "KICI_LABELS", "linux,kici:os:windows"),
			wantErr: `KICI_LABELS: label "kici:os:windows": the "kici:" prefix is reserved`,
		},
		{
			name:    "bad number",
			env:     with(base, "KICI_AGENT_CONCURRENCY", "two"),
			wantErr: `KICI_AGENT_CONCURRENCY="two": want a whole number`,
		},
		{
			name:    "zero concurrency",
			env:     with(base, "KICI_AGENT_CONCURRENCY", "0"),
			wantErr: "want at least 1",
		},
		{
			name:    "one-shot with concurrency",
			env:     with(with(base, "KICI_AGENT_ONE_SHOT", "true"), "KICI_AGENT_CONCURRENCY", "2"),
			wantErr: "want 1 with OneShot",
		},
		{
			name:    "bad bool",
			env:     with(base, "KICI_AGENT_ONE_SHOT", "maybe"),
			wantErr: `KICI_AGENT_ONE_SHOT="maybe": want true or false`,
		},
		{
			name:    "bad shutdown mode",
			env:     with(base, "KICI_AGENT_SHUTDOWN", "wait"),
			wantErr: `KICI_AGENT_SHUTDOWN) "wait"`,
		},
		{
			name: "misspelt variables",
			env: with(with(with(with(with(base,
				"KICI_AGENT_AUTH", "none"),
				"KICI_AGENT_ONESHOT", "1"),
				"KICI_LABEL", "x"),
				"KICI_AGENT_FROBNICATE", "1"),
				"KICI_EVENT_BRANCH", "main"), // a job's variable: not the agent's business
			// (the orchestrator's, in a shared environment, are not either)
			want: agent.Config{OrchestratorURL: "ws://127.0.0.1:4000/ws"},
			wantWarnings: []string{
				"unknown variable KICI_AGENT_FROBNICATE (did you mean KICI_AGENT_SCALER?)",
				"unknown variable KICI_AGENT_ONESHOT (did you mean KICI_AGENT_ONE_SHOT?)",
				"unknown variable KICI_LABEL (did you mean KICI_LABELS?)",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var environ []string
			for k, v := range tc.env {
				environ = append(environ, k+"="+v)
			}
			got, warnings, err := agent.FromEnv(func(k string) string { return tc.env[k] }, environ)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromEnv: got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: got error %v, want nil", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func with(env map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for k2, v2 := range env {
		if k2 != k {
			out[k2] = v2
		}
	}
	return out
}

// TestDocsCoverEnv checks that docs/agent.md explains every variable.
func TestDocsCoverEnv(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "agent.md"))
	if err != nil {
		t.Fatalf("read docs/agent.md: %v", err)
	}
	for _, v := range agent.EnvVars {
		if !strings.Contains(string(page), "`"+v.Name+"`") {
			t.Errorf("docs/agent.md: got no `%s`, want it documented", v.Name)
		}
	}
}
