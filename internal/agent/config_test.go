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
			env: with(with(with(with(with(with(base,
				"KICI_AGENT_AUTH", "none"),
				"KICI_AGENT_ONESHOT", "1"),
				"KICI_LABEL", "x"),
				"KICI_AGENT_FROBNICATE", "1"),
				"KICI_AGENT_SCOPE", "0123456789abcdef0123456789abcdef"),
				"KICI_EVENT_BRANCH", "main"), // a job's variable: not the agent's business
			// kici-agent's own (the outer agent's, for an agent in a job) are not either
			// (KICI_AGENT_TOKEN_FD is read, so it has a test of its own)
			// (the orchestrator's, in a shared environment, are not either)
			want: agent.Config{OrchestratorURL: "ws://127.0.0.1:4000/ws"},
			wantWarnings: []string{
				"unknown variable KICI_AGENT_FROBNICATE (did you mean KICI_AGENT_TOKEN_FILE?)",
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

func TestTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "  kat_from_file\n", 0o600)
	readOnly := file("read-only", "kat_ro", 0o400)
	groupReadable := file("group", "kat_g", 0o640)
	worldReadable := file("world", "kat_w", 0o604)
	empty := file("empty", " \n\t", 0o600)
	control := file("control", "kat_a\rb", 0o600)
	huge := file("huge", strings.Repeat("k", 5000), 0o600)
	tests := []struct {
		name      string
		env       map[string]string
		wantToken string
		wantErr   string
	}{
		{name: "trimmed", env: map[string]string{"KICI_AGENT_TOKEN_FILE": good}, wantToken: "kat_from_file"},
		{name: "owner read-only", env: map[string]string{"KICI_AGENT_TOKEN_FILE": readOnly}, wantToken: "kat_ro"},
		{name: "group-readable", env: map[string]string{"KICI_AGENT_TOKEN_FILE": groupReadable},
			wantErr: `KICI_AGENT_TOKEN_FILE "` + groupReadable + `": mode 0640 gives group or others access`},
		{name: "world-readable", env: map[string]string{"KICI_AGENT_TOKEN_FILE": worldReadable},
			wantErr: `KICI_AGENT_TOKEN_FILE "` + worldReadable + `": mode 0604`},
		{name: "empty", env: map[string]string{"KICI_AGENT_TOKEN_FILE": empty},
			wantErr: `KICI_AGENT_TOKEN_FILE "` + empty + `": the file is empty`},
		{name: "control character", env: map[string]string{"KICI_AGENT_TOKEN_FILE": control}, wantErr: "control character"},
		{name: "too long", env: map[string]string{"KICI_AGENT_TOKEN_FILE": huge}, wantErr: "longer than 4096 bytes"},
		{name: "missing", env: map[string]string{"KICI_AGENT_TOKEN_FILE": filepath.Join(dir, "nope")},
			wantErr: "KICI_AGENT_TOKEN_FILE: open " + filepath.Join(dir, "nope")},
		{name: "both set", env: map[string]string{"KICI_AGENT_TOKEN_FILE": good, "KICI_AGENT_TOKEN": "kat_x"},
			wantErr: "KICI_AGENT_TOKEN and KICI_AGENT_TOKEN_FILE are both set"},
		{name: "bad descriptor", env: map[string]string{"KICI_AGENT_TOKEN_FD": "1"}, wantErr: `KICI_AGENT_TOKEN_FD="1": want a file descriptor >= 3`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := with(tc.env, "KICI_ORCHESTRATOR_URL", "ws://127.0.0.1:4000/ws")
			got, _, err := agent.FromEnv(func(k string) string { return env[k] }, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromEnv: got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: got error %v, want nil", err)
			}
			if got.Token != tc.wantToken {
				t.Errorf("token: got %q, want %q", got.Token, tc.wantToken)
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
