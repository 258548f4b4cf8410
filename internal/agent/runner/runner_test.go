//go:build unix

package runner_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/kici-dev/kici/internal/testsvc"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

func newRunner(t *testing.T, mutate func(*runner.Config)) *runner.Runner {
	t.Helper()
	cfg := runner.Config{WorkDir: t.TempDir(), CancelGrace: 5 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := runner.New(slog.New(slog.NewTextHandler(t.Output(), nil)), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// dirJob is a job that runs steps in a fresh directory.
func dirJob(t *testing.T, steps ...workflow.Step) runner.JobSpec {
	t.Helper()
	for i := range steps {
		if steps[i].Name == "" {
			steps[i].Name = fmt.Sprintf("step-%d", i+1)
		}
	}
	return runner.JobSpec{
		ID:     "job-1",
		Job:    workflow.Job{Name: "test", Steps: steps},
		Source: runner.Source{Kind: runner.SourceDir, Dir: t.TempDir()},
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		spec      func(t *testing.T) runner.JobSpec
		want      []runner.Status
		wantRes   runner.Status
		wantErr   string // substring of Result.Err
		wantCode  int
		wantLines map[int][]string // a subset: only the steps named
	}{
		{
			name: "two steps succeed",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t, workflow.Step{Run: "echo one"}, workflow.Step{Run: "echo two >&2"})
			},
			want:      []runner.Status{runner.StatusSuccess, runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{0: {"one"}, 1: {"two"}},
		},
		{
			name: "a failure skips later steps unless their if says otherwise",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t,
					workflow.Step{Run: "echo first"},
					workflow.Step{Name: "boom", Run: "exit 3"},
					workflow.Step{Run: "echo never"},
					workflow.Step{Run: "echo cleanup", If: "always()"},
					workflow.Step{Run: "echo after-failure", If: "${{ failure() }}"},
					workflow.Step{Run: "echo only-on-success", If: "success()"},
				)
			},
			want: []runner.Status{
				runner.StatusSuccess, runner.StatusFailure, runner.StatusSkipped,
				runner.StatusSuccess, runner.StatusSuccess, runner.StatusSkipped,
			},
			wantRes:   runner.StatusFailure,
			wantErr:   `step "boom": exited with code 3`,
			wantCode:  3,
			wantLines: map[int][]string{3: {"cleanup"}, 4: {"after-failure"}},
		},
		{
			name: "continue-on-error keeps the job successful",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t,
					workflow.Step{Run: "exit 1", ContinueOnError: true},
					workflow.Step{Run: "echo still"},
				)
			},
			want:      []runner.Status{runner.StatusFailure, runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{1: {"still"}},
		},
		{
			name: "pipefail and -e are on by default",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t, workflow.Step{Run: "false | true\necho not-reached"})
			},
			want:     []runner.Status{runner.StatusFailure},
			wantRes:  runner.StatusFailure,
			wantErr:  "exited with code 1",
			wantCode: 1,
		},
		{
			name: "step timeout",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t,
					workflow.Step{Name: "slow", Run: "sleep 30", TimeoutMS: 200},
					workflow.Step{Run: "echo skipped"},
					workflow.Step{Run: "echo cleanup", If: "always()"},
				)
			},
			want:      []runner.Status{runner.StatusFailure, runner.StatusSkipped, runner.StatusSuccess},
			wantRes:   runner.StatusFailure,
			wantErr:   `step "slow": step timed out after 200ms`,
			wantCode:  128 + int(syscall.SIGTERM),
			wantLines: map[int][]string{2: {"cleanup"}},
		},
		{
			name: "job timeout skips the rest",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t,
					workflow.Step{Run: "sleep 30"},
					workflow.Step{Run: "echo cleanup", If: "always()"},
				)
				s.Timeout = 300 * time.Millisecond
				return s
			},
			want:    []runner.Status{runner.StatusFailure, runner.StatusSkipped},
			wantRes: runner.StatusFailure,
			wantErr: "job timed out after 300ms",
		},
		{
			name: "environment layers and masking",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t, workflow.Step{
					Run: `echo "A=$A B=$B C=$C D=$D E=$E TOKEN=$TOKEN CI=$CI"; test "$KICI_WORKSPACE" = "$PWD"; test -z "$NOT_ALLOWED"`,
					Env: map[string]string{"D": "step", "E": "step"},
				})
				s.Env = map[string]string{"A": "dispatch", "B": "dispatch", "C": "dispatch", "D": "dispatch", "E": "dispatch"}
				s.EventEnv = map[string]string{"B": "event", "C": "event", "D": "event", "E": "event"}
				s.Job.Env = map[string]string{"C": "job", "D": "job", "E": "job"}
				s.Secrets = map[string]string{"E": "secret-e", "TOKEN": "tok-123"}
				s.Token = "job-token-xyz"
				return s
			},
			want:      []runner.Status{runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{0: {"A=dispatch B=event C=job D=step E=*** TOKEN=*** CI=true"}},
		},
		{
			name: "a secret printed in two pieces is masked",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t, workflow.Step{Run: `printf '%s' "${TOKEN:0:4}"; sleep 0.1; printf '%s\n' "${TOKEN:4}"; printf 'x%s' "$TOKEN"`})
				s.Secrets = map[string]string{"TOKEN": "tok-123456"}
				return s
			},
			want:      []runner.Status{runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{0: {"***", "x***"}},
		},
		{
			// The step hides the secret from a plain search: split by a
			// CR and by a colour reset, and base64 behind "user:" (HTTP
			// Basic auth).
			name: "a secret split by controls or in base64 is masked",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t, workflow.Step{Run: `printf '%s\r%s\n' "${TOKEN:0:3}" "${TOKEN:3}"; printf '%s\033[0m%s\n' "${TOKEN:0:5}" "${TOKEN:5}"; printf 'user:%s' "$TOKEN" | base64`})
				s.Secrets = map[string]string{"TOKEN": "tok-123456"}
				return s
			},
			want:      []runner.Status{runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{0: {"***", "***", "dXNlcjp***"}},
		},
		{
			name: "if reads env, matrix, event and inputs",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t,
					workflow.Step{Run: "echo yes", If: "matrix.go == '1.26' && env.MODE == 'fast' && event.branch == 'main' && inputs.target == 'prod'"},
					workflow.Step{Run: "echo no", If: "matrix.go == '1.25'"},
				)
				s.Job.Matrix = map[string]string{"go": "1.26"}
				s.Job.Env = map[string]string{"MODE": "fast"}
				s.Event = workflow.EventVars{Branch: "main"}
				s.Inputs = map[string]string{"target": "prod"}
				return s
			},
			want:      []runner.Status{runner.StatusSuccess, runner.StatusSkipped},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{0: {"yes"}},
		},
		{
			name: "working directory and custom shell",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t,
					workflow.Step{Run: "mkdir -p sub/dir"},
					workflow.Step{Run: `basename "$PWD"`, WorkingDirectory: "sub/dir"},
					workflow.Step{Run: "ignored", Shell: `sh -c 'echo "custom shell ran $(basename "$0")"'`},
				)
			},
			want:      []runner.Status{runner.StatusSuccess, runner.StatusSuccess, runner.StatusSuccess},
			wantRes:   runner.StatusSuccess,
			wantLines: map[int][]string{1: {"dir"}, 2: {"custom shell ran step-2"}},
		},
		{
			name: "a missing working directory fails the step",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t, workflow.Step{Run: "true", WorkingDirectory: "nope"})
			},
			want:    []runner.Status{runner.StatusFailure},
			wantRes: runner.StatusFailure,
			wantErr: `working-directory "nope"`,
		},
		{
			name: "an unknown shell fails the step with 127",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t, workflow.Step{Run: "true", Shell: "no-such-shell-kici"})
			},
			want:     []runner.Status{runner.StatusFailure},
			wantRes:  runner.StatusFailure,
			wantErr:  "no-such-shell-kici",
			wantCode: 127,
		},
		{
			name: "a broken if fails the step",
			spec: func(t *testing.T) runner.JobSpec {
				return dirJob(t, workflow.Step{Run: "true", If: "nope("})
			},
			want:    []runner.Status{runner.StatusFailure},
			wantRes: runner.StatusFailure,
			wantErr: "if",
		},
		{
			name: "a missing checkout directory skips every step",
			spec: func(t *testing.T) runner.JobSpec {
				s := dirJob(t, workflow.Step{Run: "true"}, workflow.Step{Run: "true"})
				s.Source.Dir = filepath.Join(s.Source.Dir, "missing")
				return s
			},
			want:    []runner.Status{runner.StatusSkipped, runner.StatusSkipped},
			wantRes: runner.StatusFailure,
			wantErr: "checkout:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			res := newRunner(t, nil).Run(t.Context(), tc.spec(t), rec)
			if res.Status != tc.wantRes || !strings.Contains(errText(res.Err), tc.wantErr) || (tc.wantErr == "") != (res.Err == nil) {
				t.Errorf("result: got %s %q, want %s with error containing %q", res.Status, errText(res.Err), tc.wantRes, tc.wantErr)
			}
			if res.ExitCode != tc.wantCode {
				t.Errorf("exit code: got %d, want %d", res.ExitCode, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			for step, want := range tc.wantLines {
				if diff := cmp.Diff(want, rec.lines[step]); diff != "" {
					t.Errorf("step %d lines (-want +got):\n%s", step, diff)
				}
			}
		})
	}
}

// TestStepReportsAreOrdered checks that every run step reports running
// before its lines, that times are set, and skipped steps report once.
func TestStepReportsAreOrdered(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	spec := dirJob(t, workflow.Step{Run: "echo hi"}, workflow.Step{Run: "true", If: "failure()"})
	newRunner(t, nil).Run(t.Context(), spec, rec)
	var got []string
	for _, s := range rec.steps {
		got = append(got, fmt.Sprintf("%d:%s", s.Step, s.Status))
		if s.Status == runner.StatusSkipped && !s.StartedAt.IsZero() {
			t.Errorf("skipped step %d: got StartedAt %v, want zero", s.Step, s.StartedAt)
		}
		if s.Status == runner.StatusSuccess && (s.StartedAt.IsZero() || s.FinishedAt.Before(s.StartedAt)) {
			t.Errorf("step %d: got StartedAt %v FinishedAt %v, want both set, in order", s.Step, s.StartedAt, s.FinishedAt)
		}
	}
	if diff := cmp.Diff([]string{"0:running", "0:success", "1:skipped"}, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if !rec.running {
		t.Errorf("JobRunning: got no call, want one")
	}
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie waiting for a parent that does not reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// waitGone polls until pid is gone: nothing signals a grandchild's end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d: still running 5s after the step ended, want it killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

// grandchildScript starts a background sleep, records its pid, says ready
// and waits; trap decides what the shell does on SIGTERM.
func grandchildScript(pidFile, trap string) string {
	return fmt.Sprintf("%s\nsleep 300 &\necho $! > %q\necho ready\nwait\necho after-wait\n", trap, pidFile)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		trap      string
		grace     time.Duration
		force     bool // cancel with a Forced cause
		kill      bool // cancel politely, then Kill
		cause     error
		wantLines []string
		wantErr   error
	}{
		{
			name:      "graceful: SIGTERM reaches the shell",
			trap:      `trap 'echo got-term; exit 0' TERM`,
			grace:     time.Minute,
			cause:     fmt.Errorf("%w: by alice", runner.ErrCancelled),
			wantLines: []string{"ready", "got-term"},
			wantErr:   runner.ErrCancelled,
		},
		{
			name:      "grace expires: SIGKILL",
			trap:      `trap '' TERM`, // the shell and the sleep ignore SIGTERM
			grace:     200 * time.Millisecond,
			cause:     runner.ErrShutdown,
			wantLines: []string{"ready"},
			wantErr:   runner.ErrShutdown,
		},
		{
			name:      "kill ends a running grace period",
			trap:      `trap '' TERM`,
			grace:     time.Hour,
			kill:      true,
			cause:     runner.ErrCancelled,
			wantLines: []string{"ready"},
			wantErr:   runner.ErrCancelled,
		},
		{
			name:      "force: SIGKILL at once",
			trap:      `trap 'echo got-term' TERM`,
			grace:     time.Hour,
			force:     true,
			cause:     runner.ErrCancelled,
			wantLines: []string{"ready"},
			wantErr:   runner.ErrCancelled,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			spec := dirJob(t,
				workflow.Step{Run: grandchildScript(pidFile, tc.trap)},
				workflow.Step{Run: "echo cleanup", If: "always()"},
			)
			rec := newRecorder()
			r := newRunner(t, func(c *runner.Config) { c.CancelGrace = tc.grace })
			ctx, cancel := context.WithCancelCause(t.Context())
			exec := r.Start(ctx, spec, rec)
			t.Cleanup(exec.Cleanup)
			rec.waitLine(t, 0, "ready")
			pid := readPID(t, pidFile)
			cancelled := time.Now()
			if tc.force {
				cancel(runner.Forced(tc.cause))
			} else {
				cancel(tc.cause)
			}
			if tc.kill {
				exec.Kill()
			}
			select {
			case <-exec.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("job: still running 10s after the cancel")
			}
			res := exec.Wait()
			if took := time.Since(cancelled); tc.grace < time.Minute && took < tc.grace {
				t.Errorf("job ended %s after the cancel, want not before the grace period %s", took, tc.grace)
			}
			if res.Status != runner.StatusCancelled || !errors.Is(res.Err, tc.wantErr) {
				t.Errorf("result: got %s %v, want cancelled with %v", res.Status, res.Err, tc.wantErr)
			}
			if got := rec.final(0); got.Status != runner.StatusCancelled || !errors.Is(got.Err, tc.wantErr) {
				t.Errorf("step 0: got %s %v, want cancelled with %v", got.Status, got.Err, tc.wantErr)
			}
			if diff := cmp.Diff([]runner.Status{runner.StatusCancelled, runner.StatusSkipped}, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLines, rec.lines[0]); diff != "" {
				t.Errorf("step 0 lines (-want +got):\n%s", diff)
			}
			waitGone(t, pid)
		})
	}
}

// TestGroupKilledAfterExit checks that a step's background process does not
// outlive the step, even when the step itself succeeds.
func TestGroupKilledAfterExit(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	spec := dirJob(t, workflow.Step{Run: fmt.Sprintf("sleep 300 &\necho $! > %q\necho started", pidFile)})
	rec := newRecorder()
	start := time.Now()
	res := newRunner(t, nil).Run(t.Context(), spec, rec)
	if res.Status != runner.StatusSuccess {
		t.Fatalf("result: got %s %v, want success", res.Status, res.Err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("job took %s, want it not to wait for the background sleep", d)
	}
	waitGone(t, readPID(t, pidFile))
}

func TestGitCheckout(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("git is not installed, and %s=1 requires it", testsvc.EnvRequireServices)
		}
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "file.txt"), []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "one")
	first := git("rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(repo, "file.txt"), []byte("second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "two")

	rec := newRecorder()
	spec := runner.JobSpec{
		ID:     "git-job",
		Job:    workflow.Job{Name: "git", Steps: []workflow.Step{{Name: "cat", Run: "cat file.txt"}}},
		Source: runner.Source{Kind: runner.SourceGit, CloneURL: "file://" + repo, SHA: first, Ref: "refs/heads/main"},
	}
	res := newRunner(t, nil).Run(t.Context(), spec, rec)
	if res.Status != runner.StatusSuccess {
		t.Fatalf("result: got %s %v, want success; job log: %q", res.Status, res.Err, rec.lines[runner.JobLevelStep])
	}
	if diff := cmp.Diff([]string{"first"}, rec.lines[0]); diff != "" {
		t.Errorf("step lines (-want +got):\n%s", diff)
	}
}

// TestJobDirOutlivesTheResult: after Start the job's directory stays until
// Cleanup, so that the Result can be reported first; Run removes it itself,
// and KeepJobDirs keeps it.
func TestJobDirOutlivesTheResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		keep     bool
		run      func(r *runner.Runner, spec runner.JobSpec) runner.Result
		wantLeft int
	}{
		{name: "Run", run: func(r *runner.Runner, spec runner.JobSpec) runner.Result {
			return r.Run(context.Background(), spec, newRecorder())
		}},
		{name: "Start, Wait, Cleanup", run: func(r *runner.Runner, spec runner.JobSpec) runner.Result {
			e := r.Start(context.Background(), spec, newRecorder())
			res := e.Wait()
			e.Cleanup()
			e.Cleanup() // a second call returns at once
			return res
		}},
		{name: "KeepJobDirs", keep: true, wantLeft: 1, run: func(r *runner.Runner, spec runner.JobSpec) runner.Result {
			return r.Run(context.Background(), spec, newRecorder())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			r := newRunner(t, func(c *runner.Config) { c.WorkDir, c.KeepJobDirs = work, tc.keep })
			spec := dirJob(t, workflow.Step{Run: `echo hi > "$TMPDIR/file"`})
			if res := tc.run(r, spec); res.Status != runner.StatusSuccess {
				t.Fatalf("result: got %s %v, want success", res.Status, res.Err)
			}
			if left := jobDirNames(t, work); len(left) != tc.wantLeft {
				t.Errorf("job directories after the job: got %v, want %d", left, tc.wantLeft)
			}
		})
	}
	t.Run("kept until Cleanup", func(t *testing.T) {
		t.Parallel()
		work := t.TempDir()
		r := newRunner(t, func(c *runner.Config) { c.WorkDir = work })
		e := r.Start(context.Background(), dirJob(t, workflow.Step{Run: `echo hi > "$TMPDIR/file"`}), newRecorder())
		if res := e.Wait(); res.Status != runner.StatusSuccess {
			t.Fatalf("result: got %s %v, want success", res.Status, res.Err)
		}
		files, err := filepath.Glob(filepath.Join(work, "job-job-1-*", "tmp", "file"))
		if err != nil || len(files) != 1 {
			t.Fatalf("the step's file after Wait: got %v (%v), want it still there", files, err)
		}
		e.Cleanup()
		if left := jobDirNames(t, work); len(left) != 0 {
			t.Errorf("job directories after Cleanup: got %v, want none", left)
		}
		if files, _ := filepath.Glob(filepath.Join(work, "*", "tmp", "file")); len(files) != 0 {
			t.Errorf("the step's file after Cleanup: %v, want it gone", files)
		}
	})
}

// jobDirNames lists the job directories in work, leaving out the emptied
// ones kept for later jobs ("spare-…").
func jobDirNames(t *testing.T, work string) []string {
	t.Helper()
	entries, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "spare-") {
			out = append(out, e.Name())
		}
	}
	return out
}
