//go:build linux

package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

// imageJob is a job whose steps run in img (pull: never), in a fresh
// directory, with an id of its own so that its containers can be found by
// label.
func imageJob(t *testing.T, img string, steps ...workflow.Step) runner.JobSpec {
	t.Helper()
	spec := dirJob(t, steps...)
	spec.ID = "ctr-" + randomHex(6)
	if img != "" {
		spec.Job.Image = &workflow.Container{Image: img, Pull: workflow.PullNever}
	}
	return spec
}

// requireNoLeftovers fails the test if a container or network labelled
// with the job's id is still on the engine.
func requireNoLeftovers(t *testing.T, jobID string) {
	t.Helper()
	label := "label=" + runner.LabelJobID + "=" + jobID
	if out, err := docker("ps", "-aq", "--filter", label); err != nil || out != "" {
		t.Errorf("containers of job %s after it ended: %q (%v), want none", jobID, out, err)
	}
	if out, err := docker("network", "ls", "-q", "--filter", label); err != nil || out != "" {
		t.Errorf("networks of job %s after it ended: %q (%v), want none", jobID, out, err)
	}
}

// jobLines returns the job-level output, joined by newlines.
func jobLines(rec *recorder) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.lines[runner.JobLevelStep], "\n")
}

// TestImageSteps: steps in an image see the workspace at the host's path
// (and their writes land on the host), their working directory, their
// environment without the host's, their secrets (masked in the output);
// exit codes propagate; the default shell is bash -eo pipefail where the
// image has bash and sh -e where it does not; an explicit shell is used as
// given. Nothing of the job is left on the engine.
func TestImageSteps(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	tests := []struct {
		name      string
		image     string
		steps     []workflow.Step
		prepare   func(t *testing.T, spec *runner.JobSpec)
		want      []runner.Status
		wantCode  int
		wantLines map[int][]string
		check     func(t *testing.T, spec runner.JobSpec, rec *recorder)
	}{
		{
			name:  "workspace, working directory, environment and secrets",
			image: im.plain,
			steps: []workflow.Step{
				{Run: "echo made-inside > out.txt\npwd", Env: map[string]string{"STEP_VAR": "s"}},
				{Run: "pwd", WorkingDirectory: "sub"},
				{
					Run: `echo "vars $FROM_DISPATCH $JOB_VAR $STEP_VAR ci=$CI"
echo "path $PATH"
test "$KICI_WORKSPACE" = "$(pwd)" && echo workspace-ok
test -d "$TMPDIR" && echo tmpdir-ok
echo "secret is $TOKEN"`,
					Env: map[string]string{"STEP_VAR": "s3"},
				},
			},
			prepare: func(t *testing.T, spec *runner.JobSpec) {
				if err := os.Mkdir(filepath.Join(spec.Source.Dir, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
				spec.Env = map[string]string{"FROM_DISPATCH": "d"}
				spec.Job.Env = map[string]string{"JOB_VAR": "j"}
				spec.Secrets = map[string]string{"TOKEN": "s3cret-value-42"}
			},
			want: []runner.Status{runner.StatusSuccess, runner.StatusSuccess, runner.StatusSuccess},
			check: func(t *testing.T, spec runner.JobSpec, rec *recorder) {
				dir := spec.Source.Dir
				if got, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(got) != "made-inside\n" {
					t.Errorf("out.txt on the host: got %q (%v), want %q", got, err, "made-inside\n")
				}
				want := map[int][]string{
					0: {dir},
					1: {filepath.Join(dir, "sub")},
					// The image's PATH, not the host's; the secret masked.
					2: {"vars d j s3 ci=true", "path /bin", "workspace-ok", "tmpdir-ok", "secret is ***"},
				}
				for step, lines := range want {
					if diff := cmp.Diff(lines, rec.lines[step]); diff != "" {
						t.Errorf("step %d lines (-want +got):\n%s", step, diff)
					}
				}
			},
		},
		{
			name:     "exit code propagates",
			image:    im.plain,
			steps:    []workflow.Step{{Name: "boom", Run: "echo before\nexit 7"}},
			want:     []runner.Status{runner.StatusFailure},
			wantCode: 7,
		},
		{
			name:  "no bash: sh -e stops at a failing command, a pipe's status is its last command's",
			image: im.plain,
			steps: []workflow.Step{
				{Run: "false | true\necho piped"},
				{Run: "false\necho not-reached", ContinueOnError: true},
			},
			want:      []runner.Status{runner.StatusSuccess, runner.StatusFailure},
			wantLines: map[int][]string{0: {"piped"}, 1: nil},
		},
		{
			name:      "bash: pipefail",
			image:     im.bash,
			steps:     []workflow.Step{{Run: "false | true\necho not-reached"}},
			want:      []runner.Status{runner.StatusFailure},
			wantCode:  1,
			wantLines: map[int][]string{0: nil},
		},
		{
			name:      "an explicit shell is used as given",
			image:     im.bash,
			steps:     []workflow.Step{{Shell: "sh", Run: "false | true\nfalse\necho went-on"}},
			want:      []runner.Status{runner.StatusSuccess},
			wantLines: map[int][]string{0: {"went-on"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := imageJob(t, tc.image, tc.steps...)
			if tc.prepare != nil {
				tc.prepare(t, &spec)
			}
			rec := newRecorder()
			res := newRunner(t, nil).Run(t.Context(), spec, rec)
			wantRes := runner.StatusSuccess
			if tc.wantCode != 0 {
				wantRes = runner.StatusFailure
			}
			if res.Status != wantRes || res.ExitCode != tc.wantCode {
				t.Errorf("result: got %s code %d (%v), want %s code %d; job output:\n%s", res.Status, res.ExitCode, res.Err, wantRes, tc.wantCode, jobLines(rec))
			}
			if diff := cmp.Diff(tc.want, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			for step, lines := range tc.wantLines {
				if diff := cmp.Diff(lines, rec.lines[step]); diff != "" {
					t.Errorf("step %d lines (-want +got):\n%s", step, diff)
				}
			}
			if tc.check != nil {
				tc.check(t, spec, rec)
			}
			requireNoLeftovers(t, spec.ID)
		})
	}
}

// TestImageStepStops: a step timeout and a job cancel stop the step's
// container: politely first (SIGTERM reaches the step's shell), then by
// force once the grace period is over; a forced cancel kills at once.
func TestImageStepStops(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	tests := []struct {
		name      string
		trap      string
		grace     time.Duration
		timeout   time.Duration // the step's; 0: the test cancels the job
		force     bool
		wantRes   runner.Status
		wantErr   error
		wantLines []string
		minTook   time.Duration // from the stop to the job's end
	}{
		{
			name:      "cancel: SIGTERM reaches the shell",
			trap:      `trap 'echo got-term; exit 0' TERM`,
			grace:     time.Minute,
			wantRes:   runner.StatusCancelled,
			wantErr:   runner.ErrCancelled,
			wantLines: []string{"ready", "got-term"},
		},
		{
			name:      "cancel: grace expires, SIGKILL",
			trap:      `trap '' TERM`,
			grace:     time.Second,
			wantRes:   runner.StatusCancelled,
			wantErr:   runner.ErrCancelled,
			wantLines: []string{"ready"},
			minTook:   time.Second,
		},
		{
			name:      "forced cancel: SIGKILL at once",
			trap:      `trap 'echo got-term' TERM`,
			grace:     time.Hour,
			force:     true,
			wantRes:   runner.StatusCancelled,
			wantErr:   runner.ErrCancelled,
			wantLines: []string{"ready"},
		},
		{
			name:      "step timeout",
			trap:      `trap 'echo got-term; exit 0' TERM`,
			grace:     time.Minute,
			timeout:   1500 * time.Millisecond,
			wantRes:   runner.StatusFailure,
			wantErr:   runner.ErrTimeout,
			wantLines: []string{"ready", "got-term"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := imageJob(t, im.plain,
				workflow.Step{Run: tc.trap + "\necho ready\nsleep 300 &\nwait\necho after-wait", TimeoutMS: tc.timeout.Milliseconds()},
				workflow.Step{Run: "echo cleanup", If: "always()"},
			)
			rec := newRecorder()
			r := newRunner(t, func(c *runner.Config) { c.CancelGrace = tc.grace })
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			exec := r.Start(ctx, spec, rec)
			t.Cleanup(exec.Cleanup)
			rec.waitLine(t, 0, "ready")
			stopped := time.Now()
			switch {
			case tc.timeout > 0:
			case tc.force:
				cancel(runner.Forced(runner.ErrCancelled))
			default:
				cancel(runner.ErrCancelled)
			}
			select {
			case <-exec.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("job: still running 20s after the stop")
			}
			took := time.Since(stopped)
			res := exec.Wait()
			if res.Status != tc.wantRes || !errors.Is(res.Err, tc.wantErr) {
				t.Errorf("result: got %s %v, want %s with %v", res.Status, res.Err, tc.wantRes, tc.wantErr)
			}
			if took < tc.minTook {
				t.Errorf("job ended %s after the stop, want not before the grace period %s", took, tc.minTook)
			}
			if tc.grace >= time.Minute && took > 15*time.Second {
				t.Errorf("job ended %s after the stop: SIGTERM did not end the step", took)
			}
			if diff := cmp.Diff(tc.wantLines, rec.lines[0]); diff != "" {
				t.Errorf("step 0 lines (-want +got):\n%s", diff)
			}
			wantSteps := []runner.Status{runner.StatusCancelled, runner.StatusSkipped}
			if tc.timeout > 0 {
				wantSteps = []runner.Status{runner.StatusFailure, runner.StatusSuccess}
			}
			if diff := cmp.Diff(wantSteps, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			requireNoLeftovers(t, spec.ID)
		})
	}
}

// TestImageSetupFailures: a job that cannot get its image or reach an
// engine fails before its first step, with an infrastructure error that
// names the cause, and every step skipped.
func TestImageSetupFailures(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	missing := "kici-runner-test-missing:" + randomHex(6)
	tests := []struct {
		name       string
		image      workflow.Container
		dockerHost string
		wantErr    []string // substrings of the job's error
	}{
		{
			name:    "pull never, image missing",
			image:   workflow.Container{Image: missing, Pull: workflow.PullNever},
			wantErr: []string{`image "` + missing + `" is not on this agent's Docker engine`, "pull policy is never"},
		},
		{
			name:    "pull fails",
			image:   workflow.Container{Image: "127.0.0.1:9/kici-nowhere:1", Pull: workflow.PullAlways},
			wantErr: []string{`pull image "127.0.0.1:9/kici-nowhere:1"`},
		},
		{
			name:       "no engine",
			image:      workflow.Container{Image: im.plain},
			dockerHost: "unix:///nonexistent/kici-test/docker.sock",
			wantErr:    []string{"no Docker engine answers at unix:///nonexistent/kici-test/docker.sock", "DOCKER_HOST"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := imageJob(t, "", workflow.Step{Run: "echo never"})
			spec.Job.Image = &tc.image
			rec := newRecorder()
			r := newRunner(t, func(c *runner.Config) { c.DockerHost = tc.dockerHost })
			res := r.Run(t.Context(), spec, rec)
			t.Logf("job output:\n%s", jobLines(rec))
			if res.Status != runner.StatusFailure || !errors.Is(res.Err, runner.ErrInfrastructure) {
				t.Errorf("result: got %s %v, want failure matching ErrInfrastructure", res.Status, res.Err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(errText(res.Err), want) {
					t.Errorf("error: got %q, want it to contain %q", errText(res.Err), want)
				}
			}
			if diff := cmp.Diff([]runner.Status{runner.StatusSkipped}, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			requireNoLeftovers(t, spec.ID)
		})
	}
}

// TestServices: a step in the image reaches each service by its name, a
// step on the host by the address in KICI_SERVICE_<NAME>_HOST; the
// services' logs (masked) end up in the job's output; nothing is left.
func TestServices(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	const secret = "svc-secret-value-77"
	services := []workflow.Service{
		{Name: "web", Container: workflow.Container{Image: im.svc, Pull: workflow.PullNever},
			Env: map[string]string{"ANSWER": "answer-from-web", "SERVICE_SAY": "said " + secret}},
		{Name: "plain-db", Container: workflow.Container{Image: im.svcNoHealth, Pull: workflow.PullIfNotPresent},
			Env: map[string]string{"ANSWER": "answer-from-plain"}},
	}
	tests := []struct {
		name  string
		image string
		run   string
		want  []string
	}{
		{
			name:  "steps in the image use the names",
			image: im.plain,
			run: `echo "host $KICI_SERVICE_WEB_HOST $KICI_SERVICE_PLAIN_DB_HOST"
wget -q -O- http://web:8080/
for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O- http://plain-db:8080/ && exit 0; sleep 0.3; done; exit 1`,
			want: []string{"host web plain-db", "answer-from-web", "answer-from-plain"},
		},
		{
			name: "steps on the host use the addresses",
			run: `/bin/busybox wget -q -O- "http://$KICI_SERVICE_WEB_HOST:8080/"
for i in 1 2 3 4 5 6 7 8 9 10; do /bin/busybox wget -q -O- "http://$KICI_SERVICE_PLAIN_DB_HOST:8080/" && exit 0; sleep 0.3; done; exit 1`,
			want: []string{"answer-from-web", "answer-from-plain"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := imageJob(t, tc.image, workflow.Step{Run: tc.run})
			spec.Job.Services = services
			spec.Masks = []string{secret}
			rec := newRecorder()
			res := newRunner(t, nil).Run(t.Context(), spec, rec)
			out := jobLines(rec)
			t.Logf("job output:\n%s", out)
			if res.Status != runner.StatusSuccess {
				t.Fatalf("result: got %s %v, want success; job output:\n%s\nstep output: %q", res.Status, res.Err, out, rec.lines[0])
			}
			if diff := cmp.Diff(tc.want, rec.lines[0]); diff != "" {
				t.Errorf("step lines (-want +got):\n%s", diff)
			}
			for _, want := range []string{"[service web] service starting as web", "[service web] said ***", "[service plain-db] service starting as plain-db"} {
				if !slices.Contains(rec.lines[runner.JobLevelStep], want) {
					t.Errorf("job output has no line %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, secret) {
				t.Errorf("job output shows the secret:\n%s", out)
			}
			requireNoLeftovers(t, spec.ID)
		})
	}
}

// TestServiceFailures: a service that exits or never turns healthy fails
// the job before its first step, naming the service, with its log in the
// job's output; it is the workflow's failure, not the infrastructure's.
func TestServiceFailures(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	tests := []struct {
		name    string
		svc     workflow.Service
		wantErr string
		wantLog string
	}{
		{
			name:    "exits",
			svc:     workflow.Service{Name: "quitter", Container: workflow.Container{Image: im.svc}, Env: map[string]string{"EXIT_WITH": "3"}},
			wantErr: `service "quitter" (` + im.svc + `) exited with code 3`,
			wantLog: "[service quitter] service starting as quitter",
		},
		{
			name:    "never healthy",
			svc:     workflow.Service{Name: "sick", Container: workflow.Container{Image: im.svc}, Env: map[string]string{"SICK": "1"}},
			wantErr: `service "sick" (` + im.svc + `) not healthy within 2s`,
			wantLog: "[service sick] service starting as sick",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := imageJob(t, im.plain, workflow.Step{Run: "echo never"})
			spec.Job.Services = []workflow.Service{tc.svc}
			rec := newRecorder()
			res := newRunner(t, func(c *runner.Config) { c.ServiceReadyTimeout = 2 * time.Second }).Run(t.Context(), spec, rec)
			if res.Status != runner.StatusFailure || !strings.Contains(errText(res.Err), tc.wantErr) || errors.Is(res.Err, runner.ErrInfrastructure) {
				t.Errorf("result: got %s %v, want failure containing %q, not an infrastructure failure", res.Status, res.Err, tc.wantErr)
			}
			if !slices.Contains(rec.lines[runner.JobLevelStep], tc.wantLog) {
				t.Errorf("job output has no line %q:\n%s", tc.wantLog, jobLines(rec))
			}
			if diff := cmp.Diff([]runner.Status{runner.StatusSkipped}, rec.finals()); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			requireNoLeftovers(t, spec.ID)
		})
	}
}

// TestRemoveLeftoverContainers: the containers and networks labelled with
// the runner's owner go; another owner's stay.
func TestRemoveLeftoverContainers(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	owner, other := "owner-"+randomHex(4), "other-"+randomHex(4)
	start := func(who string) string {
		id, err := docker("run", "-d", "--label", runner.LabelJobOwner+"="+who, im.plain, "sleep", "300")
		if err != nil {
			t.Fatalf("docker run: %v: %s", err, id)
		}
		t.Cleanup(func() { _, _ = docker("rm", "-f", id) })
		return id
	}
	mine, theirs := start(owner), start(other)
	net := "kici-test-" + randomHex(4)
	if out, err := docker("network", "create", "--label", runner.LabelJobOwner+"="+owner, net); err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = docker("network", "rm", net) })

	r := newRunner(t, func(c *runner.Config) { c.ContainerOwner = owner })
	n, err := r.RemoveLeftoverContainers(t.Context())
	if err != nil || n != 1 {
		t.Errorf("RemoveLeftoverContainers: got %d, %v; want 1, nil", n, err)
	}
	if out, _ := docker("ps", "-aq", "--no-trunc", "--filter", "id="+mine); out != "" {
		t.Errorf("the owner's container %s is still there", mine)
	}
	if out, _ := docker("ps", "-q", "--no-trunc", "--filter", "id="+theirs); out != theirs {
		t.Errorf("another owner's container: got %q, want it running", out)
	}
	if out, _ := docker("network", "ls", "-q", "--filter", "name=^"+net+"$"); out != "" {
		t.Errorf("the owner's network %s is still there", net)
	}
	if n, err := newRunner(t, nil).RemoveLeftoverContainers(t.Context()); n != 0 || err != nil {
		t.Errorf("RemoveLeftoverContainers without an owner: got %d, %v; want 0, nil", n, err)
	}
}

// TestCancelWhileServicesStart: a job cancelled while it waits for a
// service ends cancelled, with its steps skipped, the service's log copied
// and nothing of it left on the engine.
func TestCancelWhileServicesStart(t *testing.T) {
	t.Parallel()
	im := requireDocker(t)
	spec := imageJob(t, im.plain, workflow.Step{Run: "echo never"})
	spec.Job.Services = []workflow.Service{{Name: "sick", Container: workflow.Container{Image: im.svc}, Env: map[string]string{"SICK": "1"}}}
	rec := newRecorder()
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	exec := newRunner(t, nil).Start(ctx, spec, rec)
	t.Cleanup(exec.Cleanup)
	deadline := time.Now().Add(20 * time.Second)
	for {
		id, err := docker("ps", "-q", "--filter", "label="+runner.LabelJobID+"="+spec.ID)
		if err == nil && id != "" {
			if logs, _ := docker("logs", id); strings.Contains(logs, "service starting") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the service did not start within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel(runner.ErrCancelled)
	select {
	case <-exec.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("job: still running 20s after the cancel")
	}
	res := exec.Wait()
	if res.Status != runner.StatusCancelled || !errors.Is(res.Err, runner.ErrCancelled) {
		t.Errorf("result: got %s %v, want cancelled", res.Status, res.Err)
	}
	if diff := cmp.Diff([]runner.Status{runner.StatusSkipped}, rec.finals()); diff != "" {
		t.Errorf("step statuses (-want +got):\n%s", diff)
	}
	if want := "[service sick] service starting as sick"; !slices.Contains(rec.lines[runner.JobLevelStep], want) {
		t.Errorf("job output has no line %q:\n%s", want, jobLines(rec))
	}
	requireNoLeftovers(t, spec.ID)
}
