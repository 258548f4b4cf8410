package reaper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ScopeVar is the environment variable that marks every process an agent's
// steps started: its value is the agent process's scope.
const ScopeVar = "KICI_AGENT_SCOPE"

// The reaper-mode variables: the pipe's fd and the scope to kill. They are
// private to kici-agent and its reaper.
const (
	envFD    = "KICI_AGENT_REAPER_FD"
	envScope = "KICI_AGENT_REAPER_SCOPE"
)

// PrivateVars are the variables of this package that kici-agent sets for
// itself; they are no user's configuration.
var PrivateVars = []string{ScopeVar, envFD, envScope}

// scopeFile holds the scope of the agent that last ran in a work dir.
const scopeFile = "scope"

// maxGroups bounds the process groups the reaper tracks: far more than an
// agent runs at once.
const maxGroups = 1 << 16

// Guard is an agent's side of its reaper. The zero Guard and a nil *Guard
// guard nothing.
type Guard struct {
	scope string
	cmd   *exec.Cmd // the reaper; nil when none runs
	done  chan struct{}

	mu sync.Mutex
	w  *os.File // the pipe to the reaper; nil once closed
}

// NewScope returns a fresh random scope.
func NewScope() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Scope returns the guard's scope.
func (g *Guard) Scope() string {
	if g == nil {
		return ""
	}
	return g.scope
}

// Env returns the variable that marks the processes of the agent's steps.
func (g *Guard) Env() []string {
	if g == nil || g.scope == "" {
		return nil
	}
	return []string{ScopeVar + "=" + g.scope}
}

// Started tells the reaper that the process group pgid is running, with the
// start time of its leader.
func (g *Guard) Started(pgid int) {
	if st, err := readStat(pgid); err == nil {
		g.send(fmt.Sprintf("+%d %d\n", pgid, st.start))
	}
}

// Ended tells the reaper that the process group pgid has been killed.
func (g *Guard) Ended(pgid int) { g.send(fmt.Sprintf("-%d\n", pgid)) }

// send writes one line to the reaper. A line is shorter than PIPE_BUF, so
// it is written whole. A reaper that is gone is not the caller's problem:
// Adopt covers for it on the next start.
func (g *Guard) send(line string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = io.WriteString(g.w, line)
	}
}

// Close closes the pipe, which makes the reaper kill whatever the steps
// left running and exit, and waits for it. It may be called more than once.
func (g *Guard) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	w := g.w
	g.w = nil
	g.mu.Unlock()
	if w == nil {
		return nil
	}
	err := w.Close()
	if g.cmd != nil {
		<-g.done
	}
	return err
}

// Adopt kills what carries the scope of the agent that last ran in dir (its
// reaper may have died with it) and records the guard's scope there
// instead, synced to disk. The caller holds dir's lock, so that agent is
// gone. It returns how many processes it killed.
func (g *Guard) Adopt(dir string) (int, error) {
	if g == nil || g.scope == "" {
		return 0, nil
	}
	path := filepath.Join(dir, scopeFile)
	killed := 0
	prev, err := os.ReadFile(path)
	switch {
	case err == nil:
		if s := strings.TrimSpace(string(prev)); validScope(s) {
			killed = Sweep(s, nil)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("read previous scope: %w", err)
	}
	if err := writeSynced(path, g.scope+"\n"); err != nil {
		return killed, fmt.Errorf("record scope: %w", err)
	}
	return killed, nil
}

// validScope reports whether s looks like a scope of NewScope.
func validScope(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 32
}

// writeSynced replaces path with text, synced to disk.
func writeSynced(path, text string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
