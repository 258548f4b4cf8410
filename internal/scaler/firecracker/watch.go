package firecracker

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
)

// watchPoll is how often, in milliseconds, a watch wakes to bound the
// serial log while the VMM runs.
const watchPoll = 2000

// watch follows the VMM of v until it exits: an exit before the agent
// registered is a failed spawn (EventFailed with the serial log's tail);
// any exit tears the VM down. It returns false, watching nothing, when v
// was destroyed meanwhile or its VMM cannot be confirmed as this VM's.
func (b *Backend) watch(v *vm) bool {
	b.mu.Lock()
	pid, destroyed := v.pid, v.destroyed
	b.mu.Unlock()
	if destroyed {
		return false
	}
	// The pidfd is opened before the identity is checked, so the process
	// it names is the one the check confirmed, never a recycled PID.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	if id := vmproc.Probe(vmproc.PIDFile(v.root), v.root); id.State != vmproc.Confirmed || id.PID != pid {
		_ = unix.Close(fd)
		return false
	}
	b.wg.Go(func() {
		defer unix.Close(fd)
		waitExit(fd, filepath.Join(v.dir, serialName))
		b.mu.Lock()
		report := !v.registered && !v.destroyed
		b.mu.Unlock()
		if report {
			b.emit(v, scaler.EventFailed, "the VM exited before its agent registered"+b.serialTail(v))
		}
		// Nothing runs in the VM any more; its resources go now, whether or
		// not the manager destroys it later (that Destroy finds nothing).
		b.mu.Lock()
		v.destroyed = true
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*killWait)
		defer cancel()
		select {
		case <-v.spawnDone:
		case <-ctx.Done():
		}
		if err := b.teardown(ctx, v); err != nil {
			b.log.Warn("tear down exited VM", "agent_id", v.id, "error", err)
		}
	})
	return true
}

// waitExit blocks until the pidfd's process exits, truncating the serial
// log whenever it passes maxSerialBytes (a guest may print without end).
func waitExit(fd int, serial string) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, watchPoll)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 {
			return
		}
		if fi, err := os.Stat(serial); err == nil && fi.Size() > maxSerialBytes {
			_ = os.Truncate(serial, 0)
		}
	}
}
