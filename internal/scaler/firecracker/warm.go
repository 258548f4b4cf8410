package firecracker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/durable"
	"github.com/kici-dev/kici/internal/fcguest"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
)

// Warm start. A label set with warmStart has one snapshot on disk: a
// template VM booted with the label set's kernel, rootfs and size, whose
// agent started and waits for an identity in MMDS, paused and saved. A
// spawn whose VM would be that one restores it (snapshot/load with
// resume_vm and its own TAP as a network override) and fills MMDS with
// its identity and its address; any other spawn, and every spawn while
// the snapshot is being built, boots cold.
//
// The snapshot lives in <chrootBaseDir>/firecracker/.snapshots/<key>/:
// vm.snap (the VM state), vm.mem (the guest memory), overlay.ext4 (the
// overlay drive as the template left it) and warm.json. The state and
// memory files are root's, read-only, and hard-linked into each restore's
// jail (Firecracker maps the memory file privately and never writes it;
// a VMM of the jailer's uid cannot either); the overlay is copied per
// restore. A snapshot is replaced as a whole, never changed in place, so
// a restored VM keeps the files it linked.

// Names of the snapshot files.
const (
	snapshotsDirName = ".snapshots"
	snapStateName    = "vm.snap"
	snapMemName      = "vm.mem"
	warmMetaName     = "warm.json"
	// warmIDPrefix starts a template VM's id; the rest is 8 hex digits,
	// so its TAP is kici-<those digits> like any VM's.
	warmIDPrefix = "kici-warm-"
	// Prefixes of a snapshot dir being built and of one being replaced.
	snapTmpPrefix = ".tmp-"
	snapOldPrefix = ".old-"
)

// DefaultTemplateWait bounds the wait for a template VM's agent to print
// that it is ready to be snapshotted.
const DefaultTemplateWait = 60 * time.Second

// Retries of a failed template build: 10 s, doubling, at most 10 min.
const (
	warmRetryBase = 10 * time.Second
	warmRetryMax  = 10 * time.Minute
)

// snapshot is a ready snapshot of one label set.
type snapshot struct {
	dir  string
	meta warmMeta
}

// warmMeta is warm.json.
type warmMeta struct {
	V           int       `json:"v"`
	Scaler      string    `json:"scaler"`
	Labels      []string  `json:"labels"`
	Fingerprint string    `json:"fingerprint"`
	TemplateID  string    `json:"template_id"`
	VCPUs       int       `json:"vcpus"`
	MemMiB      int       `json:"mem_mib"`
	OverlayMiB  int       `json:"overlay_mib"`
	Created     time.Time `json:"created"`
	BuildMillis int64     `json:"build_ms"`
}

// warmSet is the warm-start state of one label set.
type warmSet struct {
	snap     *snapshot
	building bool
	failures int
	retryAt  time.Time
	lastErr  string
	// built is closed (and replaced) after each build, for tests.
	built chan struct{}
}

// warmState holds every label set's; guarded by its mutex.
type warmState struct {
	mu   sync.Mutex
	sets map[string]*warmSet
}

// snapshotsDir is where the snapshots of a chroot base live.
func snapshotsDir(chrootBaseDir string) string {
	return filepath.Join(vmsDir(chrootBaseDir), snapshotsDirName)
}

// snapshotDir is the snapshot dir of a label set of this scaler.
func (b *Backend) snapshotDir(ls scaler.LabelSet) string {
	sum := sha256.Sum256([]byte(b.cfg.Name + "\x00" + ls.Key()))
	return filepath.Join(snapshotsDir(b.cfg.ChrootBaseDir), hex.EncodeToString(sum[:8]))
}

// set returns the state of a label set, made on first use.
func (w *warmState) set(key string) *warmSet {
	if w.sets == nil {
		w.sets = map[string]*warmSet{}
	}
	s := w.sets[key]
	if s == nil {
		s = &warmSet{built: make(chan struct{})}
		w.sets[key] = s
	}
	return s
}

// warmFor returns the snapshot a spawn may restore, or nil to boot cold:
// the label set has warmStart, the job asks for no other size than the
// label set's, and a snapshot of exactly these files and sizes exists
// (in memory, or on disk from an earlier run). When there is none it
// starts building one in the background.
func (b *Backend) warmFor(req scaler.SpawnRequest) *snapshot {
	ls := req.LabelSet
	if !ls.Firecracker.WarmStart {
		return nil
	}
	vcpus, mem := b.machine(req)
	if v, m := b.machine(scaler.SpawnRequest{LabelSet: ls}); v != vcpus || m != mem {
		return nil
	}
	fp, err := b.fingerprint(ls, vcpus, mem)
	if err != nil {
		return nil // the cold spawn's checks name what is missing
	}
	b.warm.mu.Lock()
	defer b.warm.mu.Unlock()
	ws := b.warm.set(ls.Key())
	if ws.snap != nil && ws.snap.meta.Fingerprint == fp {
		return ws.snap
	}
	// A build puts its snapshot in place (one rename) a moment before it
	// records it here: a snapshot on disk is used even while the build is
	// still marked running.
	if s, err := readSnapshot(b.snapshotDir(ls)); err == nil && s.meta.Fingerprint == fp {
		ws.snap = s
		return s
	}
	if ws.building {
		return nil
	}
	ws.snap = nil
	if b.cfg.Now().Before(ws.retryAt) {
		return nil
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if closed {
		return nil
	}
	ws.building = true
	go func() {
		defer b.wg.Done()
		b.runBuild(ls, vcpus, mem, fp)
	}()
	return nil
}

// Prewarm starts building the snapshot of every warm-start label set that
// has none, in the background.
func (b *Backend) Prewarm(sets []scaler.LabelSet) {
	for _, ls := range sets {
		b.warmFor(scaler.SpawnRequest{LabelSet: ls})
	}
}

// runBuild builds a label set's snapshot and records the outcome.
func (b *Backend) runBuild(ls scaler.LabelSet, vcpus, mem int, fp string) {
	t0 := time.Now()
	s, err := b.buildSnapshot(b.bg, ls, vcpus, mem, fp)
	b.warm.mu.Lock()
	ws := b.warm.set(ls.Key())
	ws.building = false
	if err != nil {
		ws.failures++
		ws.retryAt = b.cfg.Now().Add(min(warmRetryBase<<min(ws.failures-1, 10), warmRetryMax))
		ws.lastErr = err.Error()
	} else {
		ws.snap, ws.failures, ws.retryAt, ws.lastErr = s, 0, time.Time{}, ""
	}
	close(ws.built)
	ws.built = make(chan struct{})
	failures, retryAt := ws.failures, ws.retryAt
	b.warm.mu.Unlock()
	if err != nil {
		if b.bg.Err() != nil {
			return // closed
		}
		b.log.Warn("warm-start snapshot not built; spawns boot cold until it is", "labels", ls.Key(),
			"failures", failures, "retry_at", retryAt, "error", err)
		return
	}
	b.log.Info("warm-start snapshot ready", "labels", ls.Key(), "dir", s.dir, "took", time.Since(t0).Round(time.Millisecond))
}

// dropSnapshot forgets a snapshot a restore failed with and removes it
// (restores already running keep their links), so that the next spawn
// boots cold and a new one is built. A snapshot that a build has replaced
// meanwhile is gone already: the new one in its place is kept.
func (b *Backend) dropSnapshot(ls scaler.LabelSet, s *snapshot, cause error) {
	b.warm.mu.Lock()
	defer b.warm.mu.Unlock()
	ws := b.warm.set(ls.Key())
	if ws.snap == s {
		ws.snap = nil
	}
	if cur, err := readSnapshot(s.dir); err != nil || cur.meta.TemplateID != s.meta.TemplateID {
		return
	}
	b.log.Warn("warm-start snapshot dropped: a restore failed", "labels", ls.Key(), "dir", s.dir, "error", cause)
	if err := os.RemoveAll(s.dir); err != nil {
		b.log.Warn("remove the dropped snapshot", "dir", s.dir, "error", err)
	}
}

// fileStamp identifies a file's content cheaply: path, size, mtime, inode.
type fileStamp struct {
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
	Ino   uint64 `json:"ino"`
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{Path: path, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.Ino = sys.Ino
	}
	return st, nil
}

// fingerprint names what a snapshot depends on: the VMM binary, the
// kernel, the rootfs (the guest's page cache holds it), the sizes and the
// network the template booted with. A snapshot of another fingerprint is
// rebuilt.
func (b *Backend) fingerprint(ls scaler.LabelSet, vcpus, mem int) (string, error) {
	var files []fileStamp
	for _, p := range []string{b.cfg.FirecrackerPath, cmp.Or(ls.Firecracker.KernelPath, b.cfg.KernelPath), ls.Firecracker.RootfsPath} {
		st, err := stamp(p)
		if err != nil {
			return "", err
		}
		files = append(files, st)
	}
	data, _ := json.Marshal(struct {
		V       int         `json:"v"`
		Files   []fileStamp `json:"files"`
		VCPUs   int         `json:"vcpus"`
		Mem     int         `json:"mem"`
		Overlay int         `json:"overlay"`
		Net     string      `json:"net"`
	}{1, files, vcpus, mem, cmp.Or(ls.Firecracker.OverlayDriveSizeMib, DefaultOverlayMiB), b.host.cfg.Network.Gateway.String() + "/" + b.host.cfg.Netmask.String()})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// warmChecks report each warm-start label set's snapshot: ready (pass),
// or not yet, being built or failing (warn: its spawns boot cold).
func (b *Backend) warmChecks(sets []scaler.LabelSet) []check {
	var out []check
	for _, ls := range sets {
		if !ls.Firecracker.WarmStart {
			continue
		}
		c := check{Name: "warm-start " + ls.Key(), Warn: true,
			Fix: "the rootfs's init must start kici-agent with KICI_AGENT_MMDS_URL, which waits as a template (docs/scaler.md, Warm start); the orchestrator's log has each failed build"}
		vcpus, mem := b.machine(scaler.SpawnRequest{LabelSet: ls})
		fp, fpErr := b.fingerprint(ls, vcpus, mem)
		b.warm.mu.Lock()
		ws := b.warm.set(ls.Key())
		snap, building, failures, lastErr, retryAt := ws.snap, ws.building, ws.failures, ws.lastErr, ws.retryAt
		b.warm.mu.Unlock()
		if snap == nil && fpErr == nil {
			if s, err := readSnapshot(b.snapshotDir(ls)); err == nil && s.meta.Fingerprint == fp {
				snap = s
			}
		}
		switch {
		case fpErr != nil:
			c.Detail = "no snapshot: a file it needs is missing: " + fpErr.Error()
		case snap != nil && snap.meta.Fingerprint == fp:
			c.OK, c.Warn = true, false
			c.Detail = fmt.Sprintf("snapshot ready in %s (built %s in %d ms); spawns of %d vCPU and %d MiB restore it",
				snap.dir, snap.meta.Created.Format(time.RFC3339), snap.meta.BuildMillis, vcpus, mem)
		case building:
			c.Detail = "snapshot being built; spawns boot cold meanwhile"
		case failures > 0:
			c.Detail = fmt.Sprintf("snapshot build failed %d times in a row (last: %s); spawns boot cold; next try after %s",
				failures, lastErr, retryAt.Format(time.RFC3339))
		default:
			c.Detail = "no snapshot yet: start-up or the first spawn builds one; spawns boot cold meanwhile"
		}
		out = append(out, c)
	}
	return out
}

// readSnapshot reads a snapshot dir; it is valid when warm.json parses
// and the state, memory and overlay files are there, regular and not
// empty.
func readSnapshot(dir string) (*snapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, warmMetaName))
	if err != nil {
		return nil, err
	}
	var m warmMeta
	if err := json.Unmarshal(data, &m); err != nil || m.V != 1 || m.Fingerprint == "" {
		return nil, fmt.Errorf("%s: not a warm-start snapshot record", filepath.Join(dir, warmMetaName))
	}
	for _, n := range []string{snapStateName, snapMemName, overlayName} {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() || fi.Size() == 0 {
			return nil, fmt.Errorf("%s: not a regular, non-empty file", filepath.Join(dir, n))
		}
	}
	return &snapshot{dir: dir, meta: m}, nil
}

// buildSnapshot boots a template VM, waits for its agent's marker, pauses
// and snapshots it, kills it, and moves the files into place. The
// template is tracked like any VM while it lives (Close destroys it, the
// sweeps spare it) and leaves nothing behind but the snapshot.
func (b *Backend) buildSnapshot(parent context.Context, ls scaler.LabelSet, vcpus, mem int, fp string) (*snapshot, error) {
	if err := b.spawnCheck(ls); err != nil {
		return nil, err
	}
	if b.cfg.MinFreeBytes > 0 {
		var st unix.Statfs_t
		need := b.cfg.MinFreeBytes + int64(mem)<<20
		if err := unix.Statfs(b.cfg.ChrootBaseDir, &st); err == nil && int64(st.Bavail)*int64(st.Bsize) < need {
			return nil, fmt.Errorf("%s has %d MiB free, a snapshot of a %d MiB guest needs %d MiB", b.cfg.ChrootBaseDir,
				int64(st.Bavail)*int64(st.Bsize)>>20, mem, need>>20)
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id := warmIDPrefix + hex.EncodeToString(rnd[:])
	ctx, abort := context.WithCancelCause(parent)
	defer abort(nil)
	v := &vm{id: id, dir: b.vmDir(id), tap: hostnet.TapName(id), abort: abort, spawnDone: make(chan struct{}), torn: make(chan struct{})}
	v.root = filepath.Join(v.dir, "root")
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.vms[id] = v
	b.mu.Unlock()
	b.host.track(id, b.cfg.Name)
	defer func() {
		b.mu.Lock()
		v.destroyed = true
		b.mu.Unlock()
		tctx, cancel := context.WithTimeout(context.Background(), 2*killWait)
		if err := b.teardown(tctx, v); err != nil {
			b.log.Warn("tear down the template VM", "agent_id", id, "error", err)
		}
		cancel()
		close(v.spawnDone)
	}()

	t0 := time.Now()
	req := scaler.SpawnRequest{AgentID: id, Scaler: b.cfg.Name, LabelSet: ls}
	b.host.reclaim.RLock()
	err := b.provision(ctx, v, req, nil)
	b.host.reclaim.RUnlock()
	if err != nil {
		return nil, err
	}
	if err := b.startJailer(ctx, v); err != nil {
		return nil, err
	}
	sock, err := b.waitAPI(ctx, v)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	v.api, v.sock = sock.client, sock
	addr := v.addr
	b.mu.Unlock()
	api := sock.client
	if err := b.configure(ctx, v, api, req, addr, map[string]any{fcguest.TemplateKey: "1"}); err != nil {
		return nil, err
	}
	if err := api.Action(ctx, fcapi.InstanceStart); err != nil {
		return nil, fmt.Errorf("start the template VM: %w", err)
	}
	if err := b.waitMarker(ctx, v); err != nil {
		return nil, err
	}
	if err := api.PatchVM(ctx, fcapi.VMPaused); err != nil {
		return nil, fmt.Errorf("pause the template VM: %w", err)
	}
	if err := api.CreateSnapshot(ctx, fcapi.SnapshotCreate{SnapshotType: "Full", SnapshotPath: "/" + snapStateName, MemFilePath: "/" + snapMemName}); err != nil {
		return nil, fmt.Errorf("snapshot the template VM: %w", err)
	}
	// Nothing may write the overlay while it is moved: the VMM goes first.
	if _, err := vmproc.Kill(ctx, vmproc.PIDFile(v.root), v.root, killWait); err != nil {
		return nil, fmt.Errorf("stop the template VM: %w", err)
	}
	meta := warmMeta{V: 1, Scaler: b.cfg.Name, Labels: ls.Labels, Fingerprint: fp, TemplateID: id, VCPUs: vcpus, MemMiB: mem,
		OverlayMiB: cmp.Or(ls.Firecracker.OverlayDriveSizeMib, DefaultOverlayMiB), Created: b.cfg.Now().UTC(),
		BuildMillis: time.Since(t0).Milliseconds()}
	dir := b.snapshotDir(ls)
	if err := b.installSnapshot(v, dir, meta); err != nil {
		return nil, err
	}
	return &snapshot{dir: dir, meta: meta}, nil
}

// waitMarker waits until the template's serial console shows the agent's
// ready marker; the VMM exiting or TemplateWait passing fail it.
func (b *Backend) waitMarker(ctx context.Context, v *vm) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.TemplateWait)
	defer cancel()
	path := filepath.Join(v.dir, serialName)
	marker := []byte(fcguest.ReadyMarker + "\n")
	var off int64
	var carry []byte
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if f, err := os.Open(path); err == nil {
			buf, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, off, tailBytes), tailBytes))
			f.Close()
			off += int64(len(buf))
			carry = append(carry, buf...)
			if bytes.Contains(carry, marker) {
				return nil
			}
			if len(carry) > len(marker) {
				carry = carry[len(carry)-len(marker):]
			}
		}
		if !pidAlive(v.pid) {
			return fmt.Errorf("the template VM exited before its agent was ready%s", b.serialTail(v))
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == context.DeadlineExceeded {
				return fmt.Errorf("the template VM's agent did not print that it was ready within %s%s", b.cfg.TemplateWait, b.serialTail(v))
			}
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// installSnapshot moves the template's state, memory and overlay files
// into a new dir next to dir, makes them root's and read-only, writes
// warm.json, syncs it all and puts the dir in dir's place.
func (b *Backend) installSnapshot(v *vm, dir string, meta warmMeta) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	tmp := filepath.Join(parent, snapTmpPrefix+v.id)
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, n := range []string{snapStateName, snapMemName, overlayName} {
		dst := filepath.Join(tmp, n)
		if err := os.Rename(filepath.Join(v.root, n), dst); err != nil {
			return fmt.Errorf("move the template's %s: %w", n, err)
		}
		// The jailer's group reads them; nothing but root writes them.
		if err := os.Chown(dst, 0, b.cfg.GID); err != nil {
			return err
		}
		if err := os.Chmod(dst, 0o440); err != nil {
			return err
		}
		if err := durable.Sync(dst); err != nil {
			return err
		}
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := durable.WriteFile(filepath.Join(tmp, warmMetaName), data, os.O_CREATE|os.O_TRUNC, 0o640); err != nil {
		return err
	}
	if err := durable.Sync(tmp); err != nil {
		return err
	}
	// The swap is under the warm lock, so that dropSnapshot never
	// removes the new snapshot for a failure of the old one.
	old := filepath.Join(parent, snapOldPrefix+v.id)
	b.warm.mu.Lock()
	replaced := true
	err := os.Rename(dir, old)
	if errors.Is(err, os.ErrNotExist) {
		replaced, err = false, nil
	}
	if err != nil {
		b.warm.mu.Unlock()
		return fmt.Errorf("move the previous snapshot aside: %w", err)
	}
	err = os.Rename(tmp, dir)
	b.warm.mu.Unlock()
	if err != nil {
		return fmt.Errorf("put the snapshot in place: %w", err)
	}
	ok = true
	if err := durable.Sync(parent); err != nil {
		return err
	}
	if replaced {
		if err := os.RemoveAll(old); err != nil {
			b.log.Warn("remove the replaced snapshot", "dir", old, "error", err)
		}
	}
	return nil
}

// linkSnapshot puts a snapshot's files into a restore's jail: the state
// and memory files hard-linked (copied when the jail is on another
// filesystem), the overlay copied and given to the jailer's uid.
func (b *Backend) linkSnapshot(ctx context.Context, s *snapshot, root string) error {
	for _, n := range []string{snapStateName, snapMemName} {
		src, dst := filepath.Join(s.dir, n), filepath.Join(root, n)
		err := os.Link(src, dst)
		if errors.Is(err, syscall.EXDEV) {
			err = cpSparse(ctx, 5*time.Minute, src, dst)
		}
		if err != nil {
			return fmt.Errorf("link the snapshot's %s into the jail: %w", n, err)
		}
	}
	dst := filepath.Join(root, overlayName)
	if err := cpSparse(ctx, 30*time.Second, filepath.Join(s.dir, overlayName), dst); err != nil {
		return fmt.Errorf("copy the snapshot's overlay drive: %w", err)
	}
	if err := os.Chmod(dst, 0o600); err != nil {
		return err
	}
	return os.Lchown(dst, b.cfg.UID, b.cfg.GID)
}

// restore loads the snapshot into the fresh VMM, resumed on the VM's own
// TAP, and fills MMDS with the agent's identity and the VM's address.
func (b *Backend) restore(ctx context.Context, v *vm, api *fcapi.Client, req scaler.SpawnRequest, s *snapshot) error {
	err := api.LoadSnapshot(ctx, fcapi.SnapshotLoad{
		SnapshotPath:     "/" + snapStateName,
		MemBackend:       &fcapi.MemBackend{BackendType: "File", BackendPath: "/" + snapMemName},
		ResumeVM:         true,
		NetworkOverrides: []fcapi.NetworkOverride{{IfaceID: "eth0", HostDevName: v.tap}},
	})
	if err != nil {
		return fmt.Errorf("restore the snapshot %s: %w", s.dir, err)
	}
	b.mu.Lock()
	addr := v.addr
	b.mu.Unlock()
	md := b.guestMeta(v, req)
	md[fcguest.NetworkKey] = fcguest.Network{
		Interface: "eth0", Address: fmt.Sprintf("%s/%d", addr, b.host.cfg.Network.Prefix.Bits()),
		Gateway: b.host.cfg.Network.Gateway.String(), MAC: MAC(addr),
	}
	if err := api.PutMMDS(ctx, map[string]any{"latest": map[string]any{"meta-data": md}}); err != nil {
		return fmt.Errorf("hand the restored VM its identity (MMDS): %w", err)
	}
	return nil
}

// reapSnapshotLeftovers removes the dirs of snapshot builds and
// replacements a crash interrupted, whose template no backend tracks.
func (h *Host) reapSnapshotLeftovers(chrootBaseDir string) error {
	dir := snapshotsDir(chrootBaseDir)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		var id string
		switch {
		case strings.HasPrefix(name, snapTmpPrefix):
			id = strings.TrimPrefix(name, snapTmpPrefix)
		case strings.HasPrefix(name, snapOldPrefix):
			id = strings.TrimPrefix(name, snapOldPrefix)
		default:
			continue
		}
		if !strings.HasPrefix(id, warmIDPrefix) || h.isTracked(id) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
