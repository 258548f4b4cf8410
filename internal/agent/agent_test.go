//go:build unix

package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

// testAgent is an Agent running against a fake orchestrator.
type testAgent struct {
	*agent.Agent
	cfg    agent.Config
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, once done is closed
}

// startAgent runs an agent with short timeouts against f until the test
// ends (or until it stops by itself).
func startAgent(t *testing.T, f *fakeOrchestrator, mutate func(*agent.Config)) *testAgent {
	t.Helper()
	cfg := agent.Config{
		OrchestratorURL:  f.wsURL(),
		Token:            f.token,
		Labels:           []string{"test"},
		WorkDir:          t.TempDir(),
		Version:          "test",
		CancelGrace:      5 * time.Second,
		ShutdownTimeout:  5 * time.Second,
		ReconnectMin:     10 * time.Millisecond,
		ReconnectMax:     100 * time.Millisecond,
		LogFlushInterval: 20 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := agent.New(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Not t.Context(): the agent must outlive the test body to drain in
	// Cleanup, while the fake orchestrator still answers.
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{Agent: a, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ta.done)
		ta.err = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ta.done:
		case <-time.After(20 * time.Second):
			t.Errorf("agent: still running 20s after its context ended")
		}
	})
	return ta
}

// wait returns Run's result once it has returned by itself.
func (ta *testAgent) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-ta.done:
		return ta.err
	case <-time.After(20 * time.Second):
		t.Fatalf("agent: Run did not return within 20s")
		return nil
	}
}

// dispatch builds a job.dispatch of steps with an archive source.
func dispatch(id string, steps ...workflow.Step) *protocol.JobDispatch {
	for i := range steps {
		if steps[i].Name == "" {
			steps[i].Name = fmt.Sprintf("step-%d", i+1)
		}
	}
	return &protocol.JobDispatch{
		JobID:    id,
		RunID:    "run-1",
		Attempt:  1,
		Job:      workflow.Job{Name: id, RunsOn: []string{"test"}, Steps: steps},
		Source:   protocol.Source{Kind: protocol.SourceArchive, ArchiveURL: "/archive/src.tar.gz", SHA: "0123abcd"},
		JobToken: "jt-" + id,
	}
}

// summary describes job-scoped messages compactly: consecutive log chunks of
// a step become one "log N" entry.
func summary(msgs []protocol.JobScoped) []string {
	var out []string
	for _, m := range msgs {
		var s string
		switch m := m.(type) {
		case *protocol.JobAck:
			s = "ack"
		case *protocol.JobReject:
			s = "reject " + m.Reason
		case *protocol.JobStatus:
			s = "job " + m.Status
		case *protocol.StepStatus:
			s = fmt.Sprintf("step %d %s", m.Step, m.Status)
		case *protocol.LogChunk:
			s = fmt.Sprintf("log %d", m.Step)
			if len(out) > 0 && out[len(out)-1] == s {
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

func finalJob(t *testing.T, msgs []protocol.JobScoped) *protocol.JobStatus {
	t.Helper()
	js, ok := msgs[len(msgs)-1].(*protocol.JobStatus)
	if !ok {
		t.Fatalf("last message: got %T, want *protocol.JobStatus", msgs[len(msgs)-1])
	}
	return js
}

// finalSteps returns each step's final step.status by index.
func finalSteps(msgs []protocol.JobScoped) map[int]*protocol.StepStatus {
	out := map[int]*protocol.StepStatus{}
	for _, m := range msgs {
		if s, ok := m.(*protocol.StepStatus); ok && s.Status != protocol.StepRunning {
			out[s.Step] = s
		}
	}
	return out
}

func TestRegister(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	a := startAgent(t, f, func(c *agent.Config) {
		c.Labels = []string{"linux-big", "gpu"}
		c.Concurrency = 2
	})
	f.waitFor("a registration", func() bool { return f.conns == 1 })
	reg := f.registers[0]
	wantLabels := []string{"linux-big", "gpu", "kici:os:" + runtime.GOOS, "kici:arch:" + runtime.GOARCH}
	if diff := cmp.Diff(wantLabels, reg.Labels); diff != "" {
		t.Errorf("register labels (-want +got):\n%s", diff)
	}
	if reg.AgentID != a.ID() || reg.Concurrency != 2 || reg.OS != runtime.GOOS || reg.Arch != runtime.GOARCH || reg.Version != "test" || reg.OneShot {
		t.Errorf("register: got %+v, want agent_id %q, concurrency 2, os/arch of this host, version test, not one-shot", reg, a.ID())
	}
	saved, err := os.ReadFile(filepath.Join(a.cfg.WorkDir, "agent-id"))
	if err != nil || strings.TrimSpace(string(saved)) != a.ID() {
		t.Errorf("agent-id file: got %q (%v), want the generated id %q", saved, err, a.ID())
	}
	// A second agent on the same work dir keeps the id, but only once the
	// first has stopped: the work dir is locked while an agent runs.
	again, err := agent.New(slog.New(slog.DiscardHandler), a.cfg)
	if err != nil {
		t.Fatalf("New on the same work dir: %v", err)
	}
	if again.ID() != a.ID() {
		t.Errorf("id after a restart: got %q, want %q", again.ID(), a.ID())
	}
	if err := again.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "in use by another agent") {
		t.Errorf("second Run on a locked work dir: got %v, want an error saying it is in use", err)
	}
}

func TestJobSuccess(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	f.heartbeat = 50 * time.Millisecond
	startAgent(t, f, nil)
	f.send(dispatch("j1",
		workflow.Step{Name: "hello", Run: "cat README\necho to-stderr >&2"},
		workflow.Step{Name: "count", Run: "for i in 1 2 3; do echo n$i; done"},
	))
	msgs := f.jobEnded("j1")
	want := []string{
		"ack", "log -1", "job running",
		"step 0 running", "log 0", "step 0 success",
		"step 1 running", "log 1", "step 1 success",
		"job success",
	}
	if diff := cmp.Diff(want, summary(msgs)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	for i, m := range msgs {
		if _, seq := m.JobSeq(); seq != uint64(i+1) {
			t.Errorf("message %d (%s): got seq %d, want %d", i, m.Type(), seq, i+1)
		}
	}
	if diff := cmp.Diff([]string{"hello from the archive", "to-stderr"}, linesOf(msgs, 0)); diff != "" {
		t.Errorf("step 0 lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n1", "n2", "n3"}, linesOf(msgs, 1)); diff != "" {
		t.Errorf("step 1 lines (-want +got):\n%s", diff)
	}
	// While the job ran or right after, heartbeats flowed both ways.
	f.waitFor("an agent heartbeat", func() bool {
		for _, r := range f.received {
			if _, ok := r.msg.(*protocol.Heartbeat); ok {
				return true
			}
		}
		return false
	})
}

func TestJobOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		steps      []workflow.Step
		wantSteps  map[int]string
		wantStatus string
		wantError  string
		wantCode   int
	}{
		{
			name: "a failing step skips later steps; always() still runs",
			steps: []workflow.Step{
				{Name: "build", Run: "exit 4"},
				{Name: "test", Run: "echo never"},
				{Name: "cleanup", Run: "echo cleaning", If: "always()"},
			},
			wantSteps:  map[int]string{0: "failure", 1: "skipped", 2: "success"},
			wantStatus: "failure",
			wantError:  `step "build": exited with code 4`,
			wantCode:   4,
		},
		{
			name: "continue-on-error",
			steps: []workflow.Step{
				{Name: "flaky", Run: "exit 1", ContinueOnError: true},
				{Name: "next", Run: "true"},
			},
			wantSteps:  map[int]string{0: "failure", 1: "success"},
			wantStatus: "success",
		},
		{
			name: "step timeout",
			steps: []workflow.Step{
				{Name: "slow", Run: "sleep 30", TimeoutMS: 300},
				{Name: "after", Run: "true"},
			},
			wantSteps:  map[int]string{0: "failure", 1: "skipped"},
			wantStatus: "failure",
			wantError:  "timed out after 300ms",
			wantCode:   128 + int(syscall.SIGTERM),
		},
	}
	f := newFakeOrchestrator(t)
	startAgent(t, f, func(c *agent.Config) { c.Concurrency = len(tests) })
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "job-" + strconv.Itoa(i)
			f.send(dispatch(id, tc.steps...))
			msgs := f.jobEnded(id)
			got := map[int]string{}
			for i, s := range finalSteps(msgs) {
				got[i] = s.Status
			}
			if diff := cmp.Diff(tc.wantSteps, got); diff != "" {
				t.Errorf("step statuses (-want +got):\n%s", diff)
			}
			js := finalJob(t, msgs)
			if js.Status != tc.wantStatus || !strings.Contains(js.Error, tc.wantError) || js.ExitCode != tc.wantCode {
				t.Errorf("job.status: got %s %q exit %d, want %s with error containing %q, exit %d",
					js.Status, js.Error, js.ExitCode, tc.wantStatus, tc.wantError, tc.wantCode)
			}
			if tc.wantError != "" && !strings.Contains(finalSteps(msgs)[0].Error, strings.TrimPrefix(tc.wantError, `step "build": `)) {
				t.Errorf("step 0 error: got %q, want it to contain the reason", finalSteps(msgs)[0].Error)
			}
		})
	}
}

// grandchild is a step script that starts a background sleep, records its
// pid in pidFile and says ready.
func grandchild(pidFile string) string {
	return fmt.Sprintf("sleep 300 &\necho $! > %q\necho ready\nwait\n", pidFile)
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

// waitGone polls until pid has exited (a zombie whose parent does not reap
// it counts as gone): nothing signals a grandchild's end to the test.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: still running 5s after its step ended, want it killed with its group", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancelKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			t.Parallel()
			f := newFakeOrchestrator(t)
			startAgent(t, f, nil)
			pidFile := filepath.Join(t.TempDir(), "pid")
			f.send(dispatch("c1",
				workflow.Step{Name: "wait", Run: grandchild(pidFile)},
				workflow.Step{Name: "after", Run: "echo after"},
			))
			f.waitLine("c1", 0, "ready")
			pid := readPID(t, pidFile)
			f.send(&protocol.JobCancel{JobID: "c1", Force: force, Reason: "cancelled by alice"})
			msgs := f.jobEnded("c1")
			js := finalJob(t, msgs)
			if js.Status != protocol.JobCancelled || !strings.Contains(js.Error, "cancelled by alice") {
				t.Errorf("job.status: got %s %q, want cancelled with the reason", js.Status, js.Error)
			}
			steps := finalSteps(msgs)
			if steps[0].Status != protocol.StepCancelled || steps[1].Status != protocol.StepSkipped {
				t.Errorf("steps: got %s, %s, want cancelled, skipped", steps[0].Status, steps[1].Status)
			}
			if !slicesContainPrefix(linesOf(msgs, protocol.JobLevelStep), "[kici] cancel requested (cancelled by alice)") {
				t.Errorf("job-level lines: got %q, want a note of the cancel", linesOf(msgs, protocol.JobLevelStep))
			}
			waitGone(t, pid)
		})
	}
}

func slicesContainPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestReconnectReplays drops the connection in the middle of a job; the job
// goes on, the agent reconnects, and the orchestrator (which lost its acks,
// so the agent replays everything) sees every line exactly once.
func TestReconnectReplays(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	f.ackAfterConn = 1
	f.resumeZero = true
	startAgent(t, f, nil)
	dir := t.TempDir()
	disconnected, reconnected := filepath.Join(dir, "disconnected"), filepath.Join(dir, "reconnected")
	script := fmt.Sprintf("for i in $(seq 1 30); do echo line-$i; done\n"+
		"while [ ! -f %q ]; do sleep 0.01; done\n"+
		"for i in $(seq 31 45); do echo line-$i; done\n"+
		"while [ ! -f %q ]; do sleep 0.01; done\n"+
		"for i in $(seq 46 60); do echo line-$i; done\n", disconnected, reconnected)
	f.send(dispatch("r1", workflow.Step{Name: "print", Run: script}))
	f.waitLine("r1", 0, "line-30")

	f.dropConn()
	touch(t, disconnected) // lines 31-45 are printed while the agent is away, or about to come back
	f.waitFor("a second registration", func() bool { return f.conns == 2 })
	touch(t, reconnected)
	msgs := f.jobEnded("r1")

	var want []string
	for i := 1; i <= 60; i++ {
		want = append(want, fmt.Sprintf("line-%d", i))
	}
	if diff := cmp.Diff(want, linesOf(msgs, 0)); diff != "" {
		t.Errorf("lines applied (-want +got):\n%s", diff)
	}
	if js := finalJob(t, msgs); js.Status != protocol.JobSuccess {
		t.Errorf("job.status: got %s %q, want success", js.Status, js.Error)
	}
	for i, m := range msgs {
		if _, seq := m.JobSeq(); seq != uint64(i+1) {
			t.Errorf("applied message %d (%s): got seq %d, want %d: nothing lost, nothing twice", i, m.Type(), seq, i+1)
		}
	}
	if !slicesContainPrefix(linesOf(msgs, protocol.JobLevelStep), "[kici] reconnected to the orchestrator after") {
		t.Errorf("job-level lines: got %q, want a note of the reconnect", linesOf(msgs, protocol.JobLevelStep))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dupes == 0 {
		t.Errorf("replayed duplicates: got 0, want the replay to resend what was already applied")
	}
	if in := f.registers[1].InFlight; len(in) != 1 || in[0].JobID != "r1" || in[0].LastSeq == 0 {
		t.Errorf("second register's in_flight: got %+v, want [r1 with its last seq]", in)
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestResumeAbandons drops the connection of a running job the orchestrator
// then hands elsewhere: the agent kills it and sends nothing more for it.
func TestResumeAbandons(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	f.heartbeat = 50 * time.Millisecond
	startAgent(t, f, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	f.send(dispatch("a1", workflow.Step{Name: "wait", Run: grandchild(pidFile)}))
	f.waitLine("a1", 0, "ready")
	pid := readPID(t, pidFile)
	f.disown("a1")
	// A loaded machine may miss a 50 ms heartbeat and reconnect on its
	// own, even before the disown: a connection registered by then
	// resumed the job, so only those registered after it count.
	f.mu.Lock()
	disowned := f.conns
	f.mu.Unlock()
	f.dropConn()
	f.waitFor("a registration after the disown", func() bool { return f.conns > disowned })
	waitGone(t, pid)
	// After the kill, the next heartbeat lists no job.
	f.waitFor("an idle heartbeat on the new connection", func() bool {
		for _, r := range f.received {
			if hb, ok := r.msg.(*protocol.Heartbeat); ok && r.conn > disowned && len(hb.Busy) == 0 {
				return true
			}
		}
		return false
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.received {
		if js, ok := r.msg.(protocol.JobScoped); ok && r.conn > disowned {
			t.Errorf("after the resume: got %s for an abandoned job, want nothing", js.Type())
		}
	}
}

func TestArchiveNeedsTheJobToken(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, nil)
	d := dispatch("t1", workflow.Step{Run: "cat README"}, workflow.Step{Run: "true"})
	d.JobToken = ""
	f.send(d)
	msgs := f.jobEnded("t1")
	if diff := cmp.Diff([]string{"ack", "log -1", "step 0 skipped", "step 1 skipped", "job failure"}, summary(msgs)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if js := finalJob(t, msgs); !strings.Contains(js.Error, "401") {
		t.Errorf("job.status error: got %q, want it to name the HTTP 401", js.Error)
	}
}

// TestInlineArchive: the agent announces the archive_inline feature; an
// archive sent with the dispatch is extracted and the orchestrator gets no
// archive request; one whose SHA-256 does not match fails the job, naming
// the corruption, also without a request.
func TestInlineArchive(t *testing.T) {
	t.Parallel()
	archive := readmeArchive("hello from the inline archive\n")
	tests := []struct {
		name      string
		sha256    string // "" for the archive's own
		want      []string
		wantLines []string
		wantErr   string
	}{
		{name: "extracted", want: []string{"ack", "log -1", "job running", "step 0 running", "log 0", "step 0 success", "job success"},
			wantLines: []string{"hello from the inline archive"}},
		{name: "corrupt", sha256: strings.Repeat("0", 64), want: []string{"ack", "log -1", "step 0 skipped", "job failure"},
			wantErr: "inline archive is corrupt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeOrchestrator(t)
			startAgent(t, f, nil)
			f.waitFor("a registration", func() bool { return f.conns == 1 })
			f.mu.Lock()
			features := f.registers[0].Features
			f.mu.Unlock()
			if !slices.Contains(features, protocol.FeatureArchiveInline) {
				t.Fatalf("register features: got %q, want %q among them", features, protocol.FeatureArchiveInline)
			}
			d := dispatch("i1", workflow.Step{Run: "cat README"})
			if !d.InlineArchive(archive) {
				t.Fatal("InlineArchive: got false, want the small archive inlined")
			}
			if tc.sha256 != "" {
				d.Source.ArchiveSHA256 = tc.sha256
			}
			f.send(d)
			msgs := f.jobEnded("i1")
			if diff := cmp.Diff(tc.want, summary(msgs)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLines, linesOf(msgs, 0), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("step 0 lines (-want +got):\n%s", diff)
			}
			if js := finalJob(t, msgs); !strings.Contains(js.Error, tc.wantErr) {
				t.Errorf("job.status error: got %q, want it to contain %q", js.Error, tc.wantErr)
			}
			f.mu.Lock()
			n := f.archiveRequests
			f.mu.Unlock()
			if n != 0 {
				t.Errorf("archive requests: got %d, want 0 (the archive came with the dispatch)", n)
			}
		})
	}
}

func TestSecretsAreMasked(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, nil)
	d := dispatch("m1", workflow.Step{Run: `echo "key=$API_KEY mask=extra-mask-value token=jt-m1"; echo "$API_KEY" >&2`})
	d.Secrets = map[string]string{"API_KEY": "hunter2-secret"}
	d.Masks = []string{"extra-mask-value"}
	f.send(d)
	msgs := f.jobEnded("m1")
	if diff := cmp.Diff([]string{"key=*** mask=*** token=***", "***"}, linesOf(msgs, 0)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, frame := range f.raw {
		for _, secret := range []string{"hunter2-secret", "extra-mask-value", "jt-m1"} {
			if bytes.Contains(frame, []byte(secret)) {
				t.Errorf("frame %s: got the secret %q, want it masked", frame, secret)
			}
		}
	}
}

func TestLogCap(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, func(c *agent.Config) { c.MaxStepLogBytes = 1 << 10 })
	line := strings.Repeat("x", 99)
	f.send(dispatch("l1",
		workflow.Step{Name: "noisy", Run: fmt.Sprintf("for i in $(seq 1 50); do echo %s; done\necho still-running > /dev/null\n", line)},
		workflow.Step{Name: "next", Run: "echo next"},
	))
	msgs := f.jobEnded("l1")
	lines := linesOf(msgs, 0)
	wantMarker := "[kici] log limit of 1 KiB reached; further output discarded"
	if len(lines) != 11 || lines[10] != wantMarker {
		t.Fatalf("step 0 lines: got %d ending %q, want 10 lines and the marker %q", len(lines), lines[len(lines)-1], wantMarker)
	}
	var last *protocol.LogChunk
	for _, m := range msgs {
		if c, ok := m.(*protocol.LogChunk); ok && c.Step == 0 {
			if last != nil && last.Truncated {
				t.Errorf("got a chunk of step 0 after the truncated one, want none")
			}
			last = c
		}
	}
	if !last.Truncated {
		t.Errorf("last chunk of step 0: got truncated=false, want true")
	}
	if finalSteps(msgs)[0].Status != protocol.StepSuccess || finalJob(t, msgs).Status != protocol.JobSuccess {
		t.Errorf("statuses: got step %s, job %s, want success: the cap does not stop the step", finalSteps(msgs)[0].Status, finalJob(t, msgs).Status)
	}
	if diff := cmp.Diff([]string{"next"}, linesOf(msgs, 1)); diff != "" {
		t.Errorf("step 1 lines (-want +got):\n%s", diff)
	}
}

func TestOneShot(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	a := startAgent(t, f, func(c *agent.Config) { c.OneShot = true })
	pidFile := filepath.Join(t.TempDir(), "pid")
	goFile := filepath.Join(t.TempDir(), "go-on")
	f.send(dispatch("o1", workflow.Step{Run: fmt.Sprintf("echo ready\nwhile [ ! -f %q ]; do sleep 0.01; done", goFile)}))
	_ = pidFile
	f.waitLine("o1", 0, "ready")
	f.send(dispatch("o2", workflow.Step{Run: "true"}))
	if got := summary(f.jobEnded("o2")); !cmp.Equal(got, []string{"reject busy"}) {
		t.Errorf("second dispatch: got %v, want [reject busy]", got)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(t); err != nil {
		t.Fatalf("Run: got %v, want nil after the one job", err)
	}
	if js := finalJob(t, f.jobEnded("o1")); js.Status != protocol.JobSuccess {
		t.Errorf("job.status: got %s, want success", js.Status)
	}
	if !f.registers[0].OneShot {
		t.Errorf("register: got one_shot false, want true")
	}
}

func TestRejects(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, nil)
	goFile := filepath.Join(t.TempDir(), "go-on")
	f.send(dispatch("busy-1", workflow.Step{Run: fmt.Sprintf("echo ready\nwhile [ ! -f %q ]; do sleep 0.01; done", goFile)}))
	f.waitLine("busy-1", 0, "ready")
	f.send(dispatch("busy-2", workflow.Step{Run: "true"}))
	other := dispatch("labels-1", workflow.Step{Run: "true"})
	other.Job.RunsOn = []string{"test", "gpu"}
	f.send(other)
	for id, want := range map[string]string{"busy-2": "reject busy", "labels-1": "reject labels"} {
		msgs := f.jobEnded(id)
		if diff := cmp.Diff([]string{want}, summary(msgs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
		if _, seq := msgs[0].JobSeq(); seq != 1 {
			t.Errorf("%s: got seq %d, want 1", id, seq)
		}
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.jobEnded("busy-1")
}

func TestCloseCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		token    string // the agent's; the fake wants kat_test
		refuse   int
		wantCode int // 0: the agent reconnects
	}{
		{name: "bad token: HTTP 401", token: "kat_wrong", wantCode: protocol.CloseUnauthorized},
		{name: "labels not allowed", refuse: protocol.CloseLabelsNotAllowed, wantCode: protocol.CloseLabelsNotAllowed},
		{name: "replaced", refuse: protocol.CloseReplaced, wantCode: protocol.CloseReplaced},
		{name: "token revoked", refuse: protocol.CloseTokenRevoked, wantCode: protocol.CloseTokenRevoked},
		{name: "server shutting down: reconnect", refuse: protocol.CloseShuttingDown},
		{name: "malformed: reconnect", refuse: protocol.CloseMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeOrchestrator(t)
			f.refuse, f.refuseOnce = tc.refuse, true
			a := startAgent(t, f, func(c *agent.Config) {
				if tc.token != "" {
					c.Token = tc.token
				}
			})
			if tc.wantCode == 0 {
				f.waitFor("a registration after the refusal", func() bool { return f.conns == 1 })
				return
			}
			err := a.wait(t)
			var se *agent.StopError
			if !errors.As(err, &se) || se.Code != tc.wantCode {
				t.Fatalf("Run: got %v, want a StopError with code %d", err, tc.wantCode)
			}
		})
	}
}

// TestShutdownCancelsJobs stops an agent in the middle of a job: the job is
// reported cancelled before Run returns.
func TestShutdownCancelsJobs(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	a := startAgent(t, f, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	f.send(dispatch("s1", workflow.Step{Run: grandchild(pidFile)}))
	f.waitLine("s1", 0, "ready")
	a.cancel()
	if err := a.wait(t); err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
	js := finalJob(t, f.jobEnded("s1"))
	if js.Status != protocol.JobCancelled || !strings.Contains(js.Error, "agent shutting down") {
		t.Errorf("job.status: got %s %q, want cancelled by the shutdown", js.Status, js.Error)
	}
	waitGone(t, readPID(t, pidFile))
}

// TestHeartbeatTimeout: an orchestrator that goes quiet for two heartbeat
// intervals gets closed with 4004, and the agent reconnects.
func TestHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	f.heartbeat = 50 * time.Millisecond
	f.silent = true
	startAgent(t, f, nil)
	f.waitFor("a reconnect after a heartbeat timeout", func() bool {
		return f.conns >= 2 && len(f.closes) >= 1
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closes[0] != protocol.CloseHeartbeatTimeout {
		t.Errorf("close code: got %d, want %d", f.closes[0], protocol.CloseHeartbeatTimeout)
	}
}

// TestShortJobTravelsInOneBurst: with a linger longer than the job, what
// the job reports after its ack is held and sent together with its final
// status, every message but the last marked as followed by more; the ack
// goes out alone, at once.
func TestShortJobTravelsInOneBurst(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, func(c *agent.Config) { c.StatusLinger = time.Hour })
	f.send(dispatch("b1", workflow.Step{Name: "one", Run: "echo one"}, workflow.Step{Name: "two", Run: "echo two"}))
	msgs := f.jobEnded("b1")
	if len(msgs) < 4 {
		t.Fatalf("got %v, want an ack, statuses, logs and a final status", summary(msgs))
	}
	if msgs[0].MoreFollows() {
		t.Errorf("the ack says more follows: it must go out alone")
	}
	for i, m := range msgs[1:] {
		last := i == len(msgs)-2
		if m.MoreFollows() == last {
			t.Errorf("message %d (%s): more=%t, want %t (one burst after the ack)", i+1, m.Type(), m.MoreFollows(), !last)
		}
	}
}

// TestLingerEnds: a running status is not held past the linger while the
// job goes on.
func TestLingerEnds(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	startAgent(t, f, func(c *agent.Config) { c.StatusLinger = 20 * time.Millisecond })
	f.send(dispatch("l1", workflow.Step{Name: "wait", Run: "sleep 30"}))
	f.waitFor("step 0 running of a job that sleeps", func() bool {
		for _, m := range f.messages["l1"] {
			if s, ok := m.(*protocol.StepStatus); ok && s.Status == protocol.StepRunning {
				return true
			}
		}
		return false
	})
	f.send(&protocol.JobCancel{JobID: "l1", Force: true, Reason: "test over"})
	f.jobEnded("l1")
}
