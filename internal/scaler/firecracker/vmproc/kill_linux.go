package vmproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errExited means pidfd_open found no process with the PID.
var errExited = errors.New("process has exited")

// Kill sends SIGKILL to the jail's Firecracker process, and waits until it
// has exited, but only if its identity is Confirmed (see the package doc).
// It returns the Identity it acted on, and:
//
//   - nil if the process was killed, had already exited, or is Gone (no
//     signal is sent to a Gone PID, recycled or not);
//   - an error wrapping ErrNotConfirmed, with nothing signalled, if a
//     process runs that Probe cannot confirm;
//   - an error wrapping ErrStillRunning if it was signalled but had not
//     exited when ctx ended or grace passed (grace <= 0: wait for ctx
//     only);
//   - the signal's error otherwise; one wrapping syscall.EPERM means the
//     orchestrator may not signal the jailer's uid (it needs CAP_KILL, or
//     the caller's sudo fallback).
func Kill(ctx context.Context, pidFile, jailRoot string, grace time.Duration) (Identity, error) {
	id := Probe(pidFile, jailRoot)
	switch id.State {
	case Gone:
		return id, nil
	case Unconfirmed:
		return id, notConfirmed(id)
	}
	fd, err := openPidfd(id.PID)
	if errors.Is(err, errExited) {
		return exitedIdentity(id), nil
	}
	if err != nil {
		return id, fmt.Errorf("kill firecracker pid %d: %w", id.PID, err)
	}
	defer fd.close()

	// The pidfd holds whatever process had the PID when it was opened.
	// Probing again now checks that this is still the confirmed one: a
	// process that took the PID over since fails the probe, and the pidfd
	// would not reach it anyway.
	again := Probe(pidFile, jailRoot)
	switch {
	case again.PID != id.PID:
		// Removed or rewritten: either way the file no longer vouches for
		// the pinned process.
		again.State = Unconfirmed
		again.Detail = fmt.Sprintf("the pid file changed from pid %d to %d while it was checked: %s", id.PID, again.PID, again.Detail)
		return again, notConfirmed(again)
	case again.State == Gone:
		return again, nil
	case again.State != Confirmed:
		return again, notConfirmed(again)
	}
	if err := fd.signal(unix.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return exitedIdentity(again), nil
		}
		return again, fmt.Errorf("kill firecracker pid %d: %w", again.PID, err)
	}
	if grace > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, grace, fmt.Errorf("no exit %s after SIGKILL", grace))
		defer cancel()
	}
	if err := fd.wait(ctx); err != nil {
		return again, fmt.Errorf("kill firecracker pid %d: %w", again.PID, err)
	}
	return again, nil
}

// WaitGone waits until the process behind the pid file has exited (or is
// Gone), without signalling it, whatever its identity: waiting harms
// nothing, and an Unconfirmed process may still be the VM. It returns nil
// once the process is gone, or an error wrapping ErrStillRunning and ctx's
// cause when ctx ends first. A pid file that cannot be read gives an error
// at once: there is no process to wait on.
func WaitGone(ctx context.Context, pidFile, jailRoot string) error {
	id := Probe(pidFile, jailRoot)
	if id.State == Gone {
		return nil
	}
	if id.PID <= 0 {
		return fmt.Errorf("wait for firecracker of %q to exit: %s", jailRoot, id.Detail)
	}
	fd, err := openPidfd(id.PID)
	if errors.Is(err, errExited) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wait for firecracker pid %d to exit: %w", id.PID, err)
	}
	defer fd.close()
	// As in Kill: the process the pidfd holds is the one probed only if a
	// probe after the open still finds it.
	again := Probe(pidFile, jailRoot)
	if again.State == Gone {
		return nil
	}
	if again.PID != id.PID {
		return fmt.Errorf("wait for firecracker pid %d to exit: the pid file changed to pid %d", id.PID, again.PID)
	}
	if err := fd.wait(ctx); err != nil {
		return fmt.Errorf("wait for firecracker pid %d to exit: %w", id.PID, err)
	}
	return nil
}

func notConfirmed(id Identity) error {
	if id.PID > 0 {
		return fmt.Errorf("kill firecracker pid %d: %w: %s", id.PID, ErrNotConfirmed, id.Detail)
	}
	return fmt.Errorf("kill firecracker: %w: %s", ErrNotConfirmed, id.Detail)
}

func exitedIdentity(id Identity) Identity {
	id.State, id.Detail = Gone, fmt.Sprintf("pid %d has exited", id.PID)
	return id
}

// pidfd is a process file descriptor: it refers to one process, not to a
// PID, so it can never signal a process that took the PID over. It is
// registered with the runtime's poller, which wakes a wait when the
// process exits (the pidfd becomes readable).
type pidfd struct {
	f  *os.File
	rc syscall.RawConn
}

func openPidfd(pid int) (*pidfd, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil, errExited
		}
		return nil, os.NewSyscallError("pidfd_open", err)
	}
	// A non-blocking descriptor makes os.NewFile add it to the poller.
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	rc, err := f.SyscallConn()
	if err == nil {
		// Only a descriptor in the poller can have a deadline, which is how
		// wait is interrupted.
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("poll pidfd of pid %d: %w", pid, err)
	}
	return &pidfd{f: f, rc: rc}, nil
}

func (p *pidfd) close() { _ = p.f.Close() }

func (p *pidfd) signal(sig unix.Signal) error {
	var serr error
	if err := p.rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("pidfd_send_signal", serr)
	}
	return nil
}

// exited reports whether the process has exited (it may be a zombie).
func (p *pidfd) exited() bool {
	var done bool
	_ = p.rc.Control(func(fd uintptr) { done = pollExited(fd) })
	return done
}

// wait blocks until the process has exited or ctx ends.
func (p *pidfd) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = p.f.SetReadDeadline(time.Now()) })
	defer stop()
	var done bool
	err := p.rc.Read(func(fd uintptr) bool {
		done = pollExited(fd)
		return done
	})
	if done || p.exited() {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrStillRunning, context.Cause(ctx))
	}
	return fmt.Errorf("wait on pidfd: %w", err)
}

// pollExited reports whether the pidfd fd is readable, which it becomes
// when its process exits.
func pollExited(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents != 0
	}
}
