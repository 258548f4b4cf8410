//go:build unix

package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// dataDirLock is the held flock on DataDir/orchestrator.lock. The kernel
// releases it when the process ends, however it ends, so a restart after
// a crash finds the directory free.
type dataDirLock struct {
	f    *os.File
	path string
	// previous is what the lock file said when this process took the
	// lock: the last holder, which is now certainly gone.
	previous lockHolder
}

// lockDataDir takes the exclusive lock on dir's lock file without waiting.
// When another process holds it, the error is a *DataDirInUseError naming
// that process as its lock file describes it.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %q: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		data, _ := io.ReadAll(io.LimitReader(f, maxLockFileBytes)) // what it says is only for the message
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DataDirInUseError{Dir: dir, Holder: parseLockHolder(data)}
		}
		return nil, fmt.Errorf("lock %q: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxLockFileBytes))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read lock file %q: %w", path, err)
	}
	return &dataDirLock{f: f, path: path, previous: parseLockHolder(data)}, nil
}

// record writes h into the lock file, for the next process that finds the
// directory locked.
func (l *dataDirLock) record(h lockHolder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode lock holder: %w", err)
	}
	data = append(data, '\n')
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file %q: %w", l.path, err)
	}
	if _, err := l.f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write lock file %q: %w", l.path, err)
	}
	return nil
}

// release drops the lock. The file stays: removing it would let a third
// process lock a new file while a second still waits on the old one.
func (l *dataDirLock) release() {
	_ = l.f.Close() // closing the last descriptor drops the flock
}
