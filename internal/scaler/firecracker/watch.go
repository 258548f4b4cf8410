package firecracker

import (
	"context"
	"errors"
	"fmt"
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
// any exit tears the VM down. A VMM already gone (a guest whose agent
// failed at once) counts as an exit at once. It returns errDestroyed,
// watching nothing, when v was destroyed meanwhile, and an error when a
// process runs under the VMM's PID that is not this VM's.
func (b *Backend) watch(v *vm) error {
	b.mu.Lock()
	pid, destroyed := v.pid, v.destroyed
	b.mu.Unlock()
	if destroyed {
		return errDestroyed
	}
	// The pidfd is opened before the identity is checked, so the process
	// it names is the one the check confirmed, never a recycled PID.
	fd, err := unix.PidfdOpen(pid, 0)
	gone := err != nil // ESRCH: it exited already
	if !gone {
		id := vmproc.Probe(vmproc.PIDFile(v.root), v.root)
		switch {
		case id.State == vmproc.Gone:
			gone = true
		case id.State != vmproc.Confirmed || id.PID != pid:
			_ = unix.Close(fd)
			return fmt.Errorf("the VMM (pid %d) could not be confirmed as this VM's: %s", pid, id.Detail)
		}
	}
	b.wg.Go(func() {
		if !gone {
			waitExit(fd, filepath.Join(v.dir, serialName))
		}
		if err == nil {
			_ = unix.Close(fd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*killWait)
		defer cancel()
		// The failure follows the spawn's own events (a guest may die
		// before Spawn has even returned).
		select {
		case <-v.spawnDone:
		case <-ctx.Done():
		}
		b.mu.Lock()
		report := !v.registered && !v.destroyed
		// Nothing runs in the VM any more; its resources go now, whether or
		// not the manager destroys it later (that Destroy finds nothing).
		v.destroyed = true
		b.mu.Unlock()
		if report {
			b.emit(v, scaler.EventFailed, "the VM exited before its agent registered"+b.serialTail(v))
		}
		if err := b.teardown(ctx, v); err != nil {
			b.log.Warn("tear down exited VM", "agent_id", v.id, "error", err)
		}
	})
	return nil
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
