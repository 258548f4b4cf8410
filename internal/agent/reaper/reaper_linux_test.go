package reaper_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent/reaper"
)

func TestMain(m *testing.M) {
	reaper.Main() // the reapers Start runs are copies of this binary
	os.Exit(m.Run())
}

// proc is a sleeping child of the test.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startSleep starts `sleep 300` with env, in a new process group (or a new
// session), killed when the test ends.
func startSleep(t *testing.T, env []string, setsid bool) *proc {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !setsid, Setsid: setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exited reports whether p has exited, waiting up to wait for it.
func (p *proc) exited(wait time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(wait):
		return false
	}
}

func TestCloseKillsWhatTheStepsLeft(t *testing.T) {
	t.Parallel()
	g, err := reaper.Start(reaper.NewScope(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	other := reaper.NewScope()
	kill := map[string]*proc{
		"marked":               startSleep(t, g.Env(), false),
		"marked, own session":  startSleep(t, g.Env(), true),
		"unmarked, group kept": startSleep(t, nil, false),
	}
	g.Started(kill["unmarked, group kept"].cmd.Process.Pid)
	keep := map[string]*proc{
		"unmarked":                  startSleep(t, nil, false),
		"another agent's scope":     startSleep(t, []string{reaper.ScopeVar + "=" + other}, false),
		"unmarked, group ended":     startSleep(t, nil, false),
		"scope as a value's prefix": startSleep(t, []string{reaper.ScopeVar + "=" + g.Scope() + "x"}, false),
	}
	g.Started(keep["unmarked, group ended"].cmd.Process.Pid)
	g.Ended(keep["unmarked, group ended"].cmd.Process.Pid)

	// What a dying agent does: its end of the pipe closes.
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, p := range kill {
		if !p.exited(5 * time.Second) {
			t.Errorf("%s: got still running 5s after the agent's pipe closed, want killed", name)
		}
	}
	// The reaper has exited, so its sweep is over: what it spared stays.
	for name, p := range keep {
		if p.exited(0) {
			t.Errorf("%s: got killed, want left alone", name)
		}
	}
}

func TestAdoptKillsThePreviousScope(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prev := reaper.NewScope()
	if err := os.WriteFile(filepath.Join(dir, "scope"), []byte(prev+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	orphan := startSleep(t, []string{reaper.ScopeVar + "=" + prev}, true)
	bystander := startSleep(t, nil, false)

	g, err := reaper.Start(reaper.NewScope(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	n, err := g.Adopt(dir)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if n != 1 {
		t.Errorf("Adopt killed %d processes, want 1", n)
	}
	if !orphan.exited(5 * time.Second) {
		t.Errorf("process of the previous scope: got still running, want killed")
	}
	if bystander.exited(0) {
		t.Errorf("unmarked process: got killed, want left alone")
	}
	got, err := os.ReadFile(filepath.Join(dir, "scope"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != g.Scope() {
		t.Errorf("scope file: got %q, want the new scope %q", got, g.Scope())
	}
}

func TestStartRefusesABadScope(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"", "xyz", strings.Repeat("g", 32)} {
		if _, err := reaper.Start(scope, nil); err == nil || !strings.Contains(err.Error(), "scope") {
			t.Errorf("Start(%q): got error %v, want one naming the scope", scope, err)
		}
	}
}
