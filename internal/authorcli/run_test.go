//go:build unix

package authorcli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRun runs `kici run` on the repositories under testdata/run and
// compares its exit status, stdout and stderr with testdata/run/golden.
// The steps only echo and exit, so the whole table takes well under a
// second.
func TestRun(t *testing.T) {
	t.Parallel()
	const repo, secret = "testdata/run/repo", "API_TOKEN=s3cr3t-token"
	tests := []struct {
		name string
		args []string
		code int
	}{
		// A failed job skips the dependant whose condition is success, runs
		// the one whose condition is failure; continue-on-error steps and
		// jobs count as success; an always() step runs after a failure.
		{name: "keep-going", args: []string{"run", repo, "ci", "--keep-going", "--secret", secret}, code: 1},
		// Without --keep-going the run stops after the first failed job.
		{name: "stop-at-failure", args: []string{"run", repo, "ci", "--secret", secret}, code: 1},
		{name: "select-jobs-manual", args: []string{"run", repo, "ci", "--job", "test", "--job", "notify", "--event", "manual", "--input", "target=production", "--secret", secret, "--secret", "UNUSED=x"}, code: 0},
		{name: "matrix-env-other-branch", args: []string{"run", repo, "ci", "--job", "build", "--ref", "dev", "--env", "GREETING=hi"}, code: 0},
		{name: "one-combination", args: []string{"run", repo, "ci", "--job", "build (go=1.26)"}, code: 0},
		{name: "tag-if-true", args: []string{"run", repo, "ci", "--event", "tag", "--ref", "v1.0.0", "--job", "build", "--job", "release"}, code: 0},
		{name: "missing-secret", args: []string{"run", repo, "ci", "--job", "test"}, code: 0},
		{name: "single-workflow", args: []string{"run", "testdata/run/single"}, code: 0},
		{name: "several-workflows", args: []string{"run", repo}, code: 2},
		{name: "unknown-workflow", args: []string{"run", repo, "nope"}, code: 2},
		{name: "unknown-job", args: []string{"run", repo, "ci", "--job", "nope"}, code: 2},
		{name: "bad-input", args: []string{"run", repo, "ci", "--event", "manual", "--input", "target=prod"}, code: 2},
		{name: "input-without-manual", args: []string{"run", repo, "ci", "--input", "target=staging"}, code: 2},
		{name: "bad-secret", args: []string{"run", repo, "ci", "--secret", "api_token=x"}, code: 2},
		{name: "bad-env", args: []string{"run", repo, "ci", "--env", "KICI_EVENT_KIND=tag"}, code: 2},
		{name: "unknown-event", args: []string{"run", repo, "ci", "--event", "merge"}, code: 2},
		{name: "too-many-args", args: []string{"run", repo, "ci", "extra"}, code: 2},
		{name: "compile-error", args: []string{"run", "../workflow/testdata/invalid/syntax"}, code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := Main(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit status: got %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			checkRunGolden(t, tt.name, tt.args, stdout.String(), stderr.String())
		})
	}
}

// TestRunInterrupt sends the test process SIGINT twice while a step that
// ignores SIGTERM runs: the first interrupt cancels the job, the second
// kills its process group, and the remaining jobs do not run. It cannot be
// parallel: the signal reaches every signal.Notify of the process, so it
// runs before the parallel tests start.
func TestRunInterrupt(t *testing.T) {
	args := []string{"run", "testdata/run/cancel", "--keep-going"}
	stdout := &signalOnLine{line: "[first] ready\n"}
	stderr := &signalOnLine{line: "kici: interrupted: cancelling"}
	code := Main(args, strings.NewReader(""), stdout, stderr)
	if code != exitInvalid {
		t.Errorf("exit status: got %d, want %d", code, exitInvalid)
	}
	checkRunGolden(t, "interrupt", args, stdout.String(), stderr.String())
}

// signalOnLine collects output and sends the process SIGINT once, when
// the output first contains line.
type signalOnLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	line string
	sent bool
}

func (w *signalOnLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent && strings.Contains(w.buf.String(), w.line) {
		w.sent = true
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *signalOnLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// durationRE matches the durations `kici run` prints.
var durationRE = regexp.MustCompile(`\b\d+\.\ds\b`)

// checkRunGolden compares a run's output with testdata/run/golden/NAME.txt
// (go test -update rewrites it), after turning durations into 0.0s and the
// package directory into $PKG.
func checkRunGolden(t *testing.T, name string, args []string, stdout, stderr string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := "$ kici " + strings.Join(args, " ") + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr
	got = strings.ReplaceAll(got, wd, "$PKG")
	got = durationRE.ReplaceAllString(got, "0.0s")
	path := filepath.Join("testdata", "run", "golden", name+".txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (go test -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs (-want +got):\n%s", diff)
	}
}

func TestRunArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantDir  string
		wantName string
	}{
		{name: "none", args: nil, wantDir: ".", wantName: ""},
		{name: "repository", args: []string{"testdata/run/repo"}, wantDir: "testdata/run/repo", wantName: ""},
		{name: "workflow", args: []string{"ci"}, wantDir: ".", wantName: "ci"},
		// The current directory has no workflows, so a directory without
		// any is DIR too, and the compile error names it.
		{name: "directory without workflows", args: []string{"testdata"}, wantDir: "testdata", wantName: ""},
		{name: "both", args: []string{"testdata/run/repo", "ci"}, wantDir: "testdata/run/repo", wantName: "ci"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, name := runArgs(tt.args)
			if dir != tt.wantDir || name != tt.wantName {
				t.Errorf("runArgs(%q): got (%q, %q), want (%q, %q)", tt.args, dir, name, tt.wantDir, tt.wantName)
			}
		})
	}
}

func TestParseSecretFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FROM_ENV": "env-value"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		flags   []string
		want    map[string]string
		wantErr string
	}{
		{name: "value", flags: []string{"TOKEN=a=b"}, want: map[string]string{"TOKEN": "a=b"}},
		{name: "empty value", flags: []string{"TOKEN="}, want: map[string]string{"TOKEN": ""}},
		{name: "from the environment", flags: []string{"FROM_ENV"}, want: map[string]string{"FROM_ENV": "env-value"}},
		{name: "not in the environment", flags: []string{"MISSING"}, wantErr: "--secret MISSING: no value given and $MISSING is not set"},
		{name: "lower-case name", flags: []string{"token=x"}, wantErr: `--secret "token=x": want NAME=VALUE or NAME, NAME of upper-case letters, digits and _`},
		{name: "no name", flags: []string{"=x"}, wantErr: `--secret "=x": want NAME=VALUE or NAME, NAME of upper-case letters, digits and _`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSecretFlags(tt.flags, lookup)
			if errText(err) != tt.wantErr {
				t.Fatalf("error: got %q, want %q", errText(err), tt.wantErr)
			}
			var ue usageError
			if err != nil && !errors.As(err, &ue) {
				t.Errorf("error %v: got %T, want a usageError", err, err)
			}
			if diff := cmp.Diff(tt.want, got); err == nil && diff != "" {
				t.Errorf("secrets differ (-want +got):\n%s", diff)
			}
		})
	}
}
