package firecracker

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
)

// Recover re-attaches the VMs of handles whose VMM still runs (confirmed
// by its identity) and removes what is left of the others.
func (b *Backend) Recover(ctx context.Context, handles []scaler.Handle) ([]scaler.Handle, error) {
	var out []scaler.Handle
	for _, h := range handles {
		if !jailID.MatchString(h.AgentID) {
			continue
		}
		var blob handleBlob
		_ = json.Unmarshal(h.Blob, &blob)
		addr, _ := netip.ParseAddr(blob.Addr)
		v := &vm{
			id: h.AgentID, dir: b.vmDir(h.AgentID), tap: hostnet.TapName(h.AgentID),
			spawnDone: make(chan struct{}), torn: make(chan struct{}), addr: addr,
		}
		close(v.spawnDone)
		v.root = filepath.Join(v.dir, "root")
		id := vmproc.Probe(vmproc.PIDFile(v.root), v.root)
		if id.State != vmproc.Confirmed {
			if id.State == vmproc.Gone {
				if err := b.host.removeResources(ctx, v.id, v.dir, addr); err != nil {
					b.log.Warn("remove what a gone VM left", "agent_id", v.id, "error", err)
				}
			}
			continue
		}
		v.pid = id.PID
		// Its rules again: an orchestrator of an earlier version may have
		// made fewer (the TAP binding), and the rules are idempotent.
		if addr.IsValid() {
			if err := b.host.net.AllowVM(ctx, vmRules(addr, v.tap)); err != nil {
				b.log.Warn("re-apply the rules of a recovered VM", "agent_id", v.id, "error", err)
			}
		}
		if sock, err := openAPI(v.root); err == nil {
			v.api, v.sock = sock.client, sock
		}
		b.mu.Lock()
		if b.vms[v.id] != nil || b.closed {
			b.mu.Unlock()
			continue
		}
		b.vms[v.id] = v
		b.mu.Unlock()
		b.host.track(v.id, b.cfg.Name)
		if b.watch(v) != nil {
			b.mu.Lock()
			delete(b.vms, v.id)
			b.mu.Unlock()
			b.host.untrack(v.id)
			continue
		}
		h.Ref = strconv.Itoa(id.PID)
		out = append(out, h)
	}
	return out, nil
}

// liveVM is a VM dir whose VMM may still run.
type liveVM struct {
	id      string
	scaler  string // from the owner record; "" when it has none
	dir     string
	ident   vmproc.Identity
	created time.Time
}

// scanVMs lists the VM dirs of the chroot base (never dot entries, never
// names the jailer would refuse) with their owner and identity.
func (b *Backend) scanVMs() ([]liveVM, error) {
	base := vmsDir(b.cfg.ChrootBaseDir)
	entries, err := os.ReadDir(base)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []liveVM
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.IsDir() || !jailID.MatchString(name) {
			continue
		}
		dir := filepath.Join(base, name)
		root := filepath.Join(dir, "root")
		l := liveVM{id: name, dir: dir, ident: vmproc.Probe(vmproc.PIDFile(root), root)}
		if data, err := os.ReadFile(filepath.Join(dir, ownerName)); err == nil {
			var o owner
			if json.Unmarshal(data, &o) == nil {
				l.scaler, l.created = o.Scaler, o.Created
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// List returns this scaler's running VMs (by their owner record).
func (b *Backend) List(ctx context.Context) ([]scaler.Compute, error) {
	vms, err := b.scanVMs()
	if err != nil {
		return nil, err
	}
	var out []scaler.Compute
	for _, l := range vms {
		if l.scaler != b.cfg.Name || !l.ident.Running() {
			continue
		}
		b.mu.Lock()
		_, tracked := b.vms[l.id]
		b.mu.Unlock()
		started := l.ident.Started
		if started.IsZero() {
			started = l.created
		}
		out = append(out, scaler.Compute{AgentID: l.id, Ref: strconv.Itoa(l.ident.PID), Started: started,
			Unverified: l.ident.State != vmproc.Confirmed, Tracked: tracked})
	}
	return out, nil
}
