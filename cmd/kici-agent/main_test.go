package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/agent/reaper"
)

func TestMain(m *testing.M) {
	reaper.Main() // run starts a reaper, a copy of this binary, once its config is good
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{name: "help lists every variable", args: []string{"--help"}, wantCode: exitOK, wantStdout: envNames()},
		{name: "version", args: []string{"--version"}, wantCode: exitOK, wantStdout: []string{"dev"}},
		{name: "unknown argument", args: []string{"--url"}, wantCode: exitUsage, wantStderr: `unknown argument "--url"`},
		{name: "missing URL", wantCode: exitUsage, wantStderr: "KICI_ORCHESTRATOR_URL) is required"},
		{
			name:       "reserved label",
			env:        map[string]string{"KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:1/ws", "KICI_LABELS": "kici:gpu"},
			wantCode:   exitUsage,
			wantStderr: "reserved",
		},
		{name: "bad log level", env: map[string]string{"KICI_LOG_LEVEL": "loud"}, wantCode: exitUsage, wantStderr: "KICI_LOG_LEVEL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			var environ []string
			for k, v := range tc.env {
				environ = append(environ, k+"="+v)
			}
			code := run(tc.args, func(k string) string { return tc.env[k] }, environ, &stdout, &stderr, false)
			if code != tc.wantCode {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, tc.wantCode, stderr.String())
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout: got %q, want it to contain %q", stdout.String(), w)
				}
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

func envNames() []string {
	var out []string
	for _, v := range agent.EnvVars {
		out = append(out, v.Name)
	}
	return out
}
