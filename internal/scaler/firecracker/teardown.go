package firecracker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
)

// jailID is an id the jailer accepts.
var jailID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// posixName is a variable name a shell could export.
var posixName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Bounds of the serial log, which a guest writes at will.
const (
	maxSerialBytes = 16 << 20
	tailLines      = 50
	tailBytes      = 64 << 10
)

// killWait bounds the wait for a VMM to go after SIGKILL.
const killWait = 10 * time.Second

// Destroy stops the VM and removes everything it had on the host. A
// spawn in progress is aborted first. Destroy of an unknown or destroyed
// id returns nil.
func (b *Backend) Destroy(ctx context.Context, agentID string) error {
	b.mu.Lock()
	v := b.vms[agentID]
	if v == nil {
		b.mu.Unlock()
		return nil
	}
	first := !v.destroyed
	v.destroyed = true
	b.mu.Unlock()
	if first && v.abort != nil {
		v.abort(errDestroyed)
	}
	select {
	case <-v.spawnDone:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return b.teardown(ctx, v)
}

// unwind undoes a failed spawn: it reports the failure (unless the agent
// was destroyed meanwhile) and removes what the spawn made.
func (b *Backend) unwind(v *vm, spawnErr error) {
	b.mu.Lock()
	report := !v.destroyed && !v.registered
	v.destroyed = true
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*killWait)
	defer cancel()
	if err := b.teardown(ctx, v); err != nil {
		b.log.Warn("tear down failed spawn", "agent_id", v.id, "error", err)
	}
	if report {
		b.emit(v, scaler.EventFailed, spawnErr.Error())
	}
}

// teardown stops the VMM and removes the VM dir, the TAP, the rules and
// the lease, in that order, once: later calls wait for the first. A VMM
// that could not be stopped keeps all of them (it still uses them); the
// error says so and the orphan sweep retries.
func (b *Backend) teardown(ctx context.Context, v *vm) error {
	var err error
	ran := false
	v.tornOnce.Do(func() {
		ran = true
		err = b.removeVM(ctx, v)
		b.mu.Lock()
		sock := v.sock
		v.sock, v.api = nil, nil
		b.mu.Unlock()
		// MarkRegistered's MMDS clearing may still use the client: it
		// fails harmlessly once the descriptor is closed.
		sock.close()
		if err == nil {
			b.mu.Lock()
			if b.vms[v.id] == v {
				delete(b.vms, v.id)
			}
			b.mu.Unlock()
			b.host.untrack(v.id)
		}
		close(v.torn)
	})
	if !ran {
		select {
		case <-v.torn:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return err
}

// removeVM stops the VMM and removes the VM's host resources.
func (b *Backend) removeVM(ctx context.Context, v *vm) error {
	b.mu.Lock()
	api, addr := v.api, v.addr
	b.mu.Unlock()
	t0 := time.Now()
	if err := b.stopVMM(ctx, v, api); err != nil {
		return err
	}
	t1 := time.Now()
	err := b.host.removeResources(ctx, v.id, v.dir, addr)
	if b.timed != nil && err == nil {
		b.timed(t1.Sub(t0), time.Since(t1))
	}
	return err
}

// stopVMM asks the guest to stop and kills the VMM after the grace, only
// once its identity is confirmed. A VMM already gone is fine.
func (b *Backend) stopVMM(ctx context.Context, v *vm, api *fcapi.Client) error {
	pidFile := vmproc.PIDFile(v.root)
	id := vmproc.Probe(pidFile, v.root)
	if id.State == vmproc.Gone {
		return nil
	}
	if api != nil && id.State == vmproc.Confirmed {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := api.Action(actx, fcapi.SendCtrlAltDel)
		cancel()
		if err == nil {
			gctx, cancel := context.WithTimeout(ctx, b.cfg.StopGrace)
			err := vmproc.WaitGone(gctx, pidFile, v.root)
			cancel()
			if err == nil {
				return nil
			}
		}
	}
	if _, err := vmproc.Kill(ctx, pidFile, v.root, killWait); err != nil {
		return fmt.Errorf("stop the VMM of %s (pid %d): %w", v.id, id.PID, err)
	}
	return nil
}

// removeResources removes what a VM had on the host, each step
// idempotent: its dir (jail, logs), its TAP and its rules, side by side
// (deleting a bridged link waits for the kernel's RCU grace period, tens
// of milliseconds), then its lease, only once all three are gone: from
// then on the address and the TAP name may be handed to a new VM. addr
// may be invalid (no lease known): the lease is then looked up.
func (h *Host) removeResources(ctx context.Context, vmID, dir string, addr netip.Addr) error {
	if !addr.IsValid() {
		leases, err := h.addrs.Leases(ctx)
		if err != nil {
			return err
		}
		for _, l := range leases {
			if l.VMID == vmID {
				addr = l.Addr
			}
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = removeDir(dir) })
	wg.Go(func() { errs[1] = h.net.DeleteTap(ctx, hostnet.TapName(vmID)) })
	if addr.IsValid() {
		wg.Go(func() { errs[2] = h.net.RemoveVM(ctx, addr) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return h.addrs.Release(ctx, vmID)
}

// removeDir removes a VM dir. The jail holds device nodes and files of
// the jailer's uid; as root RemoveAll takes them all.
func removeDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove VM dir %s: %w", dir, err)
	}
	return nil
}

// pidAlive reports whether a process with the pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// serialTail is the end of the VM's serial log, as a failure detail's
// "captured output" section, or "".
func (b *Backend) serialTail(v *vm) string {
	t := readTail(filepath.Join(v.dir, serialName))
	if t == "" {
		return ""
	}
	return "\n--- captured output ---\n" + t
}

// readTail returns the last tailLines lines of a file (read from its last
// tailBytes).
func readTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-tailBytes, 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, tailBytes))
	if err != nil {
		return ""
	}
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}
