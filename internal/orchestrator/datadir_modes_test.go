package orchestrator

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestOwnerOnlyDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	agent := filepath.Join(dir, "scalers", "metal", "agents", "a1")
	for _, d := range []string{filepath.Join(dir, "logs", "run"), filepath.Join(agent, "job")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(dir, "kici.db"), filepath.Join(dir, "logs", "run", "step-0.log"), filepath.Join(agent, "job", "script"), outside} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "logs", "run"), agent} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	ownerOnlyDataDir(slog.New(slog.NewTextHandler(t.Output(), nil)), dir)

	tests := []struct {
		name string
		path string
		want os.FileMode
	}{
		{name: "data dir", path: dir, want: 0o700},
		{name: "database", path: filepath.Join(dir, "kici.db"), want: 0o600},
		{name: "log dir", path: filepath.Join(dir, "logs", "run"), want: 0o700},
		{name: "log file", path: filepath.Join(dir, "logs", "run", "step-0.log"), want: 0o600},
		{name: "agent work dir", path: agent, want: 0o700},
		{name: "inside an agent work dir is the agent's", path: filepath.Join(agent, "job", "script"), want: 0o644},
		{name: "symlink target outside is not followed", path: outside, want: 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.want {
				t.Errorf("%s: got mode %s, want %s", tt.path, got, tt.want)
			}
		})
	}
}
