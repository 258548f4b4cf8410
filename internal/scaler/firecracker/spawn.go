package firecracker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	overlaypkg "github.com/kici-dev/kici/internal/scaler/firecracker/overlay"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
	"github.com/kici-dev/kici/internal/store"
)

// Names inside a VM's directory and its jail root.
const (
	apiSocket   = "/run/firecracker.socket" // seen from inside the jail
	kernelName  = "vmlinux"
	rootfsName  = "rootfs.ext4"
	overlayName = "overlay.ext4"
	vmmLogName  = "vmm.log"
	serialName  = "serial.log" // in the VM dir, outside the jail
	ownerName   = "kici-vm.json"
)

// MMDS is the guests' metadata service address.
const mmdsAddr = "169.254.169.254"

// maxGuestEnvBytes bounds the variables handed to a guest through MMDS
// (Firecracker's data store holds about 51 KiB in all).
const maxGuestEnvBytes = 32 << 10

// socketPoll is how often the VMM's API socket is tried while it starts.
const socketPoll = 5 * time.Millisecond

// identityVars are the variables of SpawnRequest.Env that travel as MMDS
// keys of their own, not in kici-env.
var identityVars = map[string]string{
	"KICI_ORCHESTRATOR_URL": "kici-orchestrator-url",
	"KICI_AGENT_ID":         "kici-agent-id",
	"KICI_AGENT_TOKEN":      "kici-agent-token",
	"KICI_LABELS":           "kici-labels",
}

// owner is the record a spawn leaves in the VM dir, so that a listing
// can say whose VM it is without the store.
type owner struct {
	Scaler  string    `json:"scaler"`
	AgentID string    `json:"agent_id"`
	Created time.Time `json:"created"`
}

// Spawn starts a microVM for req and returns once the VM runs; its agent
// registers afterwards. A missing kernel, rootfs, binary or device, a full
// disk or an unprepared host network refuse the spawn
// (scaler.IsDeterministic). A spawn that fails after it created anything
// tears it all down before returning.
func (b *Backend) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	if req.AgentID == "" || !jailID.MatchString(req.AgentID) {
		return scaler.Handle{}, fmt.Errorf("spawn firecracker agent: agent id %q is not 1-64 letters, digits and dashes", req.AgentID)
	}
	if err := b.spawnCheck(req.LabelSet); err != nil {
		return scaler.Handle{}, err
	}
	spawnCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	v := &vm{
		id: req.AgentID, onEvent: req.OnEvent, dir: b.vmDir(req.AgentID), tap: hostnet.TapName(req.AgentID),
		abort: abort, spawnDone: make(chan struct{}), torn: make(chan struct{}),
	}
	v.root = filepath.Join(v.dir, "root")
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, ErrClosed)
	}
	if _, dup := b.vms[req.AgentID]; dup {
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: already tracked", req.AgentID)
	}
	b.vms[req.AgentID] = v
	b.spawns.Add(1)
	b.mu.Unlock()
	b.host.track(v.id, b.cfg.Name)
	defer b.spawns.Done()
	defer close(v.spawnDone)

	started := b.cfg.Now()
	if err := b.spawn(spawnCtx, v, req); err != nil {
		err = spawnError(ctx, spawnCtx, err)
		b.unwind(v, err)
		return scaler.Handle{}, err
	}
	b.mu.Lock()
	pid, addr := v.pid, v.addr
	b.mu.Unlock()
	blob, _ := json.Marshal(handleBlob{V: 1, Addr: addr.String(), TAP: v.tap, PID: pid})
	return scaler.Handle{AgentID: v.id, Scaler: b.cfg.Name, Ref: strconv.Itoa(pid), Blob: blob, SpawnedAt: started}, nil
}

// handleBlob is the backend's part of a handle (version 1).
type handleBlob struct {
	V    int    `json:"v"`
	Addr string `json:"addr"`
	TAP  string `json:"tap"`
	PID  int    `json:"pid"`
}

// spawnError makes a spawn aborted by its caller, or by a Destroy, say so.
func spawnError(parent, spawnCtx context.Context, err error) error {
	if perr := parent.Err(); perr != nil && !errors.Is(err, perr) {
		return fmt.Errorf("%w: %w", perr, err)
	}
	if cause := context.Cause(spawnCtx); errors.Is(cause, errDestroyed) && !errors.Is(err, errDestroyed) {
		return fmt.Errorf("%w: %w", errDestroyed, err)
	}
	return err
}

// spawn does the work of Spawn.
func (b *Backend) spawn(ctx context.Context, v *vm, req scaler.SpawnRequest) error {
	// Host resources are made under the shared side of the reclaim lock:
	// a sweep never sees a spawn half made.
	snap := b.warmFor(req)
	b.host.reclaim.RLock()
	err := b.provision(ctx, v, req, snap)
	b.host.reclaim.RUnlock()
	if err != nil {
		return err
	}

	if snap != nil {
		b.emit(v, scaler.EventProvisioning, "restoring microVM from its warm-start snapshot")
	} else {
		b.emit(v, scaler.EventProvisioning, "booting microVM")
	}
	if err := b.startJailer(ctx, v); err != nil {
		return err
	}
	sock, err := b.waitAPI(ctx, v)
	if err != nil {
		return err
	}
	api := sock.client
	b.mu.Lock()
	v.api, v.sock = api, sock
	addr := v.addr
	b.mu.Unlock()
	if snap != nil {
		if err := b.restore(ctx, v, api, req, snap); err != nil {
			if ctx.Err() == nil {
				b.dropSnapshot(req.LabelSet, snap, err)
			}
			return err
		}
		b.emit(v, scaler.EventReady, fmt.Sprintf("microVM restored from snapshot (pid %d, %s on %s)", v.pid, addr, v.tap))
	} else {
		if err := b.configure(ctx, v, api, req, addr, b.guestMeta(v, req)); err != nil {
			return err
		}
		if err := api.Action(ctx, fcapi.InstanceStart); err != nil {
			return fmt.Errorf("start microVM: %w", err)
		}
		b.emit(v, scaler.EventReady, fmt.Sprintf("microVM booted (pid %d, %s on %s)", v.pid, addr, v.tap))
	}
	if err := b.watch(v); err != nil {
		return err
	}
	b.emit(v, scaler.EventConnecting, "waiting for agent "+v.id+" to register")
	return nil
}

// provision makes the host resources of a VM: lease, TAP, rules, the VM
// dir with the jail's files (those of snap for a restore).
func (b *Backend) provision(ctx context.Context, v *vm, req scaler.SpawnRequest, snap *snapshot) error {
	b.emit(v, scaler.EventProvisioning, "preparing rootfs and kernel")
	addr, err := b.host.addrs.Allocate(ctx, v.id, b.cfg.Name, v.tap)
	if errors.Is(err, store.ErrPoolExhausted) {
		// Retrying at once would fail the same way: the scaler waits, and
		// the job says why.
		return scaler.Refused("lease an address for VM %s: %v (widen firecracker.cidr, or lower maxAgents)", v.id, err)
	}
	if err != nil {
		return fmt.Errorf("lease an address for VM %s: %w", v.id, err)
	}
	b.mu.Lock()
	v.addr = addr
	destroyed := v.destroyed
	b.mu.Unlock()
	if destroyed {
		return errDestroyed
	}
	b.emit(v, scaler.EventNetwork, fmt.Sprintf("TAP %s on %s, address %s", v.tap, b.host.Bridge(), addr))
	if err := b.host.net.CreateTap(ctx, v.tap, b.cfg.UID, b.cfg.GID); err != nil {
		return err
	}
	if err := b.host.net.AllowVM(ctx, vmRules(addr, v.tap)); err != nil {
		return err
	}
	if err := b.makeJail(ctx, v, req, snap); err != nil {
		return err
	}
	return ctx.Err()
}

// makeJail makes the VM dir: the owner record, the jail root with the
// kernel, the rootfs, the overlay and the VMM's log file, and for a
// restore the snapshot's files (its overlay instead of a blank one).
func (b *Backend) makeJail(ctx context.Context, v *vm, req scaler.SpawnRequest, snap *snapshot) error {
	ls := req.LabelSet
	if err := os.MkdirAll(v.root, 0o750); err != nil {
		return fmt.Errorf("create the jail of VM %s: %w", v.id, err)
	}
	rec, _ := json.Marshal(owner{Scaler: b.cfg.Name, AgentID: v.id, Created: b.cfg.Now().UTC()})
	if err := os.WriteFile(filepath.Join(v.dir, ownerName), rec, 0o640); err != nil {
		return fmt.Errorf("write the owner of VM %s: %w", v.id, err)
	}
	kernel := cmp.Or(ls.Firecracker.KernelPath, b.cfg.KernelPath)
	if err := b.placeReadOnly(ctx, kernel, filepath.Join(v.root, kernelName)); err != nil {
		return err
	}
	if err := b.placeReadOnly(ctx, ls.Firecracker.RootfsPath, filepath.Join(v.root, rootfsName)); err != nil {
		return err
	}
	overlay := filepath.Join(v.root, overlayName)
	if snap != nil {
		if err := b.linkSnapshot(ctx, snap, v.root); err != nil {
			return fmt.Errorf("VM %s: %w", v.id, err)
		}
	} else {
		tpl, err := b.host.Templates(b.cfg.ChrootBaseDir)
		if err != nil {
			return err
		}
		size := cmp.Or(ls.Firecracker.OverlayDriveSizeMib, DefaultOverlayMiB)
		if err := tpl.Copy(ctx, size, overlay); err != nil {
			var missing *overlaypkg.MissingToolError
			if errors.As(err, &missing) {
				return scaler.Refused("overlay drive of VM %s: %v (install e2fsprogs and coreutils on the orchestrator's host)", v.id, err)
			}
			return fmt.Errorf("overlay drive of VM %s: %w", v.id, err)
		}
	}
	vmmLog := filepath.Join(v.root, vmmLogName)
	if err := os.WriteFile(vmmLog, nil, 0o600); err != nil {
		return fmt.Errorf("create the VMM log of VM %s: %w", v.id, err)
	}
	for _, p := range []string{v.root, overlay, vmmLog} {
		if err := os.Lchown(p, b.cfg.UID, b.cfg.GID); err != nil {
			return fmt.Errorf("give %s to the jailer's uid %d: %w", p, b.cfg.UID, err)
		}
	}
	return nil
}

// placeReadOnly puts src at dst for the VMM to read: a hard link when
// the file is readable by everyone (the VMM's uid then reads it without
// owning it: a chown of a hard link would hand the shared source to the
// jailer's uid), else a copy given to that uid, read-only.
func (b *Backend) placeReadOnly(ctx context.Context, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return scaler.Refused("%s: %v", src, errors.Unwrap(err))
	}
	if fi.Mode().Perm()&0o004 != 0 {
		err := os.Link(src, dst)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("link %s into the jail: %w", src, err)
		}
	}
	if err := cpSparse(ctx, 5*time.Minute, src, dst); err != nil {
		return fmt.Errorf("copy %s into the jail: %w", src, err)
	}
	if err := os.Chown(dst, b.cfg.UID, b.cfg.GID); err != nil {
		return err
	}
	return os.Chmod(dst, 0o400)
}

// cpSparse copies src to dst with cp, sharing blocks where the filesystem
// can and keeping holes, within timeout; a failed copy leaves no dst.
func cpSparse(ctx context.Context, timeout time.Duration, src, dst string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "cp", "--reflink=auto", "--sparse=always", "-T", src, dst).CombinedOutput()
	if err != nil {
		_ = os.Remove(dst)
		return fmt.Errorf("cp %s %s: %w: %s", src, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

// startJailer runs the jailer, which starts the VMM in its own PID
// namespace and exits; the VMM's output (the guest's serial console) goes
// to the VM dir's serial.log.
func (b *Backend) startJailer(ctx context.Context, v *vm) error {
	serial, err := os.OpenFile(filepath.Join(v.dir, serialName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("create the serial log of VM %s: %w", v.id, err)
	}
	defer serial.Close()
	args := []string{
		"--id", v.id,
		"--exec-file", b.cfg.FirecrackerPath,
		"--uid", strconv.Itoa(b.cfg.UID), "--gid", strconv.Itoa(b.cfg.GID),
		"--chroot-base-dir", b.cfg.ChrootBaseDir,
		"--cgroup-version", cgroupVersion(),
		"--new-pid-ns",
		"--",
		"--api-sock", apiSocket,
		"--log-path", "/" + vmmLogName, "--level", "Warning",
	}
	cmd := exec.Command(b.cfg.JailerPath, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, serial, serial
	// The VMM must outlive this process (a restarted orchestrator adopts
	// it): its own session, no parent-death signal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = b.jailerEnv()
	if err := cmd.Start(); err != nil {
		return scaler.Refused("start the jailer %s: %v", b.cfg.JailerPath, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			// The jailer refused this host or configuration (a binary it
			// cannot run, a jail it cannot make): the next spawn would too.
			return scaler.Refused("jailer %s failed (%v)%s", b.cfg.JailerPath, err, b.serialTail(v))
		}
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return context.Cause(ctx)
	}
	id := vmproc.Probe(vmproc.PIDFile(v.root), v.root)
	if id.PID == 0 {
		return fmt.Errorf("the jailer exited without writing %s%s", vmproc.PIDFile(v.root), b.serialTail(v))
	}
	b.mu.Lock()
	v.pid = id.PID
	b.mu.Unlock()
	return nil
}

// jailerEnv is the jailer's environment: the orchestrator's own, less the
// kici variables (the token key, the database URL) no VMM needs.
func (b *Backend) jailerEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if len(kv) >= 5 && kv[:5] == "KICI_" && !hasPrefix(kv, "KICI_FAKE_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// waitAPI waits until the VMM answers on its socket, giving up when the
// VMM exits, SocketWait passes or ctx ends.
func (b *Backend) waitAPI(ctx context.Context, v *vm) (*apiSock, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.SocketWait)
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	var sock *apiSock
	for {
		select {
		case <-ctx.Done():
			sock.close()
			if context.Cause(ctx) == context.DeadlineExceeded {
				return nil, fmt.Errorf("the VMM's API socket did not answer within %s%s", b.cfg.SocketWait, b.serialTail(v))
			}
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		if sock == nil {
			sock, _ = openAPI(v.root) // fails until the VMM made its run dir
		}
		if sock != nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			err := sock.client.Ping(pctx)
			pcancel()
			if err == nil {
				return sock, nil
			}
		}
		if !pidAlive(v.pid) {
			sock.close()
			return nil, fmt.Errorf("the VMM exited before its API came up%s", b.serialTail(v))
		}
		t.Reset(socketPoll)
	}
}

// configure sets the VM up over its API: machine, kernel, drives,
// network, MMDS with meta (the agent's configuration, or a template's
// marker).
func (b *Backend) configure(ctx context.Context, v *vm, api *fcapi.Client, req scaler.SpawnRequest, addr netip.Addr, meta map[string]any) error {
	vcpus, mem := b.machine(req)
	net := b.host.cfg.Network
	bootArgs := fmt.Sprintf("console=ttyS0 reboot=k panic=1 pci=off random.trust_cpu=on init=/init ip=%s::%s:%s::eth0:off",
		addr, net.Gateway, b.host.cfg.Netmask)
	steps := []struct {
		what string
		call func() error
	}{
		{"machine-config", func() error {
			return api.PutMachineConfig(ctx, fcapi.MachineConfig{VCPUCount: vcpus, MemSizeMib: mem, SMT: false})
		}},
		{"boot-source", func() error {
			return api.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/" + kernelName, BootArgs: bootArgs})
		}},
		{"rootfs drive", func() error {
			return api.PutDrive(ctx, fcapi.Drive{DriveID: "rootfs", PathOnHost: "/" + rootfsName, IsRootDevice: true, IsReadOnly: true})
		}},
		{"overlay drive", func() error {
			return api.PutDrive(ctx, fcapi.Drive{DriveID: "overlay", PathOnHost: "/" + overlayName})
		}},
		{"network interface", func() error {
			return api.PutNetworkInterface(ctx, fcapi.NetworkInterface{IfaceID: "eth0", HostDevName: v.tap, GuestMAC: MAC(addr)})
		}},
		{"MMDS config", func() error {
			return api.PutMMDSConfig(ctx, fcapi.MMDSConfig{Version: "V2", NetworkInterfaces: []string{"eth0"}, IPv4Address: mmdsAddr})
		}},
		{"MMDS data", func() error {
			return api.PutMMDS(ctx, map[string]any{"latest": map[string]any{"meta-data": meta}})
		}},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			return fmt.Errorf("configure the VM (%s): %w", s.what, err)
		}
	}
	return nil
}

// machine sizes the VM: the job's limits, else the label set's, else the
// scaler's. CPUs round up to whole vCPUs; memory truncates to MiB.
func (b *Backend) machine(req scaler.SpawnRequest) (vcpus, mib int) {
	ls := req.LabelSet
	vcpus = cmp.Or(ls.Firecracker.VCPUCount, b.cfg.VCPUCount)
	mib = cmp.Or(ls.Firecracker.MemSizeMib, b.cfg.MemSizeMib)
	lim := req.Limits
	if lim.CPUs == 0 {
		lim.CPUs = ls.Limits.CPUs
	}
	if lim.MemoryBytes == 0 {
		lim.MemoryBytes = ls.Limits.MemoryBytes
	}
	if lim.CPUs > 0 {
		vcpus = max(1, int(math.Ceil(lim.CPUs)))
	}
	if m := int(lim.MemoryBytes >> 20); m > 0 {
		mib = m
	}
	return min(vcpus, 32), mib
}

// guestMeta is the agent's configuration as MMDS meta-data: the identity
// keys, and kici-env with every other variable of the request, then the
// label set's env (which wins), names a shell could export only, within
// 32 KiB.
func (b *Backend) guestMeta(v *vm, req scaler.SpawnRequest) map[string]any {
	md := map[string]any{"kici-scaler-managed": "1"}
	env := map[string]string{}
	for k, val := range req.Env {
		if key, ok := identityVars[k]; ok {
			md[key] = val
			continue
		}
		if k == "KICI_AGENT_ONE_SHOT" || k == "KICI_AGENT_SCALER" {
			continue // kici-scaler-managed says both
		}
		env[k] = val
	}
	maps.Copy(env, req.LabelSet.Env)
	kept := map[string]string{}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !posixName.MatchString(k) {
			b.log.Warn("variable not passed to the guest: not a POSIX name", "agent_id", v.id, "name", k)
			continue
		}
		if total += len(k) + len(env[k]) + 2; total > maxGuestEnvBytes {
			b.log.Warn("variable not passed to the guest: the guest's variables exceed 32 KiB", "agent_id", v.id, "name", k)
			continue
		}
		kept[k] = env[k]
	}
	if len(kept) > 0 {
		md["kici-env"] = kept
	}
	return md
}
