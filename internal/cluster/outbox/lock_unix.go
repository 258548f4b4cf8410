//go:build unix

package outbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path+".lock" without waiting and
// returns the function that releases it. The kernel drops the lock when
// the process ends, however it ends, so a restart after a crash finds the
// file free. SQLite's own locks on the database last one transaction and
// never keep a second opener out, hence this one, held from Open to Close.
func lockFile(path string) (func() error, error) {
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open outbox lock %q: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open outbox %q: %w: another process or Outbox holds %q", path, ErrInUse, lockPath)
		}
		return nil, fmt.Errorf("lock outbox %q: %w", lockPath, err)
	}
	return func() error {
		// Closing the descriptor drops the lock. The file stays: removing
		// it would let a third opener lock a new file while a second
		// still waits on the old one.
		if err := f.Close(); err != nil {
			return fmt.Errorf("unlock outbox %q: %w", lockPath, err)
		}
		return nil
	}, nil
}
