//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// startAgentTokenVia is startAgent with the agent token handed over in
// KICI_AGENT_TOKEN, or, with viaFile, in an owner-only KICI_AGENT_TOKEN_FILE.
// It returns the agent and its token.
func startAgentTokenVia(t *testing.T, o *orchestrator, id string, viaFile bool) (*agent, string) {
	t.Helper()
	var tok apiv1.AgentToken
	o.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{}, &tok, http.StatusCreated)
	env := []string{"KICI_ORCHESTRATOR_URL=ws://" + o.addr + "/ws"}
	if viaFile {
		file := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(file, []byte(tok.Token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "KICI_AGENT_TOKEN_FILE="+file)
	} else {
		env = append(env, "KICI_AGENT_TOKEN="+tok.Token)
	}
	return o.launchAgent(t, id, env), tok.Token
}

// TestAgentTokenHiddenFromSteps: whether the token comes in KICI_AGENT_TOKEN
// or in KICI_AGENT_TOKEN_FILE, neither the agent's environment as the
// kernel shows it (/proc/<agent pid>/environ, read by the test and by a
// step) nor a step's own environment holds it.
func TestAgentTokenHiddenFromSteps(t *testing.T) {
	t.Parallel()
	for _, viaFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("file=%v", viaFile), func(t *testing.T) {
			t.Parallel()
			o := startOrchestrator(t, "")
			marks := t.TempDir()
			o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  peek:
    steps:
      - run: |
          echo $PPID > %[1]s/ppid
          cat /proc/$PPID/environ > %[1]s/agent-environ
          env > %[1]s/step-env
`, marks)})
			a, token := startAgentTokenVia(t, o, "peeker", viaFile)
			pid := a.cmd.Process.Pid

			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(environ), "KICI_AGENT_ID=peeker") {
				t.Fatalf("/proc/%d/environ: got %q, want the agent's environment", pid, environ)
			}
			if strings.Contains(string(environ), token) {
				t.Errorf("/proc/%d/environ: got the agent token in it, want it scrubbed", pid)
			}

			r := o.waitRun(t, o.push(t), 30*time.Second, "run to end", ended)
			if r.Status != "success" {
				t.Fatalf("run: got %s, want success", r.Status)
			}
			if got := readLines(t, filepath.Join(marks, "ppid")); len(got) != 1 || got[0] != strconv.Itoa(pid) {
				t.Fatalf("step's parent: got %q, want the agent (%d)", got, pid)
			}
			seen, err := os.ReadFile(filepath.Join(marks, "agent-environ"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(seen), "KICI_ORCHESTRATOR_URL=") {
				t.Fatalf("the agent's environ as the step read it: got %q, want the agent's variables", seen)
			}
			if strings.Contains(string(seen), token) {
				t.Errorf("the agent's environ as the step read it: got the agent token in it, want it scrubbed")
			}
			stepEnv, err := os.ReadFile(filepath.Join(marks, "step-env"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(stepEnv), token) || strings.Contains(string(stepEnv), "KICI_AGENT_TOKEN") {
				t.Errorf("step environment: got %q, want no agent token and no KICI_AGENT_TOKEN* variable", stepEnv)
			}
		})
	}
}

// TestAgentKilledTakesItsStepsAlong: a step starts a background child, a
// double-forked one, a nohup'd one that would leave a side effect once the
// test says go, and one in a session of its own. The agent is SIGKILLed and
// not restarted: every one of those processes, and the step's shell, is
// gone within 5 s, and the side effect never happens.
func TestAgentKilledTakesItsStepsAlong(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    steps:
      - run: |
          cd %[1]s
          sleep 300 & echo $! > background
          ( sleep 300 & echo $! > double-forked )
          nohup sh -c 'while [ ! -e go ]; do sleep 0.05; done; sleep 1; touch effect' > /dev/null 2>&1 & echo $! > nohup
          setsid sh -c 'echo $$ > own-session.tmp; mv own-session.tmp own-session; exec sleep 300' &
          while [ ! -e own-session ]; do sleep 0.05; done
          echo $$ > shell.tmp; mv shell.tmp shell
          sleep 300
`, marks)})
	a, _ := startAgentTokenVia(t, o, "doomed", false)
	o.push(t)
	waitFor(t, 30*time.Second, "the step to start its processes", func() bool { return fileExists(filepath.Join(marks, "shell")) })

	pids := map[string]int{}
	for _, name := range []string{"shell", "background", "double-forked", "nohup", "own-session"} {
		lines := readLines(t, filepath.Join(marks, name))
		pid := 0
		if len(lines) == 1 {
			pid, _ = strconv.Atoi(lines[0])
		}
		if pid <= 1 {
			t.Fatalf("pid file %s: got %q, want one pid", name, lines)
		}
		pids[name] = pid
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for name, pid := range pids {
		if !alive(pid) {
			t.Fatalf("%s (pid %d): got gone before the agent was killed, want running", name, pid)
		}
	}

	killed := time.Now() // the deadline runs from the SIGKILL
	a.kill()             // returns once the agent and its reaper (which holds its stderr) are gone
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	// Nothing signals a grandchild's end to the test: poll /proc up to the
	// contract's deadline.
	deadline := killed.Add(5 * time.Second)
	for {
		var left []string
		for name, pid := range pids {
			if alive(pid) {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running 5s after the agent was killed: %s; want every process of its steps gone", strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every step process gone %s after the agent's SIGKILL", time.Since(killed).Round(time.Millisecond))
	// The one process that would write the effect is gone, so it never will.
	if fileExists(filepath.Join(marks, "effect")) {
		t.Errorf("side effect: got written after the agent was killed, want never")
	}
}
