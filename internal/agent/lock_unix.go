//go:build unix

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockWorkDir takes an exclusive lock on dir/agent.lock for as long as the
// agent runs, so that two agents never share a work dir (and so an id).
// The lock goes away with the process, however it ends.
func lockWorkDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "agent.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("work dir %q is in use by another agent (set KICI_AGENT_WORKDIR to a directory of its own)", dir)
		}
		return nil, fmt.Errorf("lock %q: %w", path, err)
	}
	return func() { f.Close() }, nil
}
