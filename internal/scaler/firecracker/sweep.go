package firecracker

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
)

// ReapLeftovers removes what VMs this process does not track left on the
// host: VM dirs of this scaler (or of none) whose VMM is gone or
// confirmed (it is killed), leases of this scaler, TAPs of the pattern on
// the bridge and rules in the bridge's table that no lease, tracked VM or
// running VMM accounts for. keep names agents to spare besides the
// tracked ones. A VMM that runs unconfirmed is spared with its files. The
// sweep holds the host's reclaim lock, so it never runs beside a spawn's
// resource creation; leases are read before and after the host is
// listed, so a VM whose lease appears meanwhile is spared too. It returns
// the VM ids it reaped.
func (b *Backend) ReapLeftovers(ctx context.Context, keep []string) ([]string, error) {
	h := b.host
	h.reclaim.Lock()
	defer h.reclaim.Unlock()
	spare := func(id string) bool { return slices.Contains(keep, id) || h.isTracked(id) }

	before, err := h.addrs.Leases(ctx)
	if err != nil {
		return nil, err
	}
	vms, err := b.scanVMs()
	if err != nil {
		return nil, err
	}
	var errs []error
	taps, err := h.net.Taps(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	ruleAddrs, err := h.net.VMAddrs(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	after, err := h.addrs.Leases(ctx)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	leases := append(before, after...)
	leaseOf := map[string]netip.Addr{}
	for _, l := range leases {
		leaseOf[l.VMID] = l.Addr
	}

	var reaped []string
	keepTap := map[string]bool{}
	keepAddr := map[netip.Addr]bool{}
	for _, l := range leases {
		keepTap[hostnet.TapName(l.VMID)] = true
		keepAddr[l.Addr] = true
	}
	seen := map[string]bool{}
	for _, l := range vms {
		seen[l.id] = true
		mine := l.scaler == b.cfg.Name || l.scaler == ""
		if !mine || spare(l.id) || l.ident.State == vmproc.Unconfirmed {
			keepTap[hostnet.TapName(l.id)] = true
			continue
		}
		if l.ident.State == vmproc.Confirmed {
			if _, err := vmproc.Kill(ctx, vmproc.PIDFile(l.dir+"/root"), l.dir+"/root", killWait); err != nil {
				errs = append(errs, err)
				keepTap[hostnet.TapName(l.id)] = true
				continue
			}
		}
		if err := h.removeResources(ctx, l.id, l.dir, leaseOf[l.id]); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(keepTap, hostnet.TapName(l.id))
		delete(keepAddr, leaseOf[l.id])
		reaped = append(reaped, l.id)
	}
	// Leases of this scaler whose VM left no dir at all.
	for _, l := range after {
		if l.Scaler != b.cfg.Name || seen[l.VMID] || spare(l.VMID) || !slices.ContainsFunc(before, func(o Lease) bool { return o.VMID == l.VMID }) {
			continue
		}
		if err := h.removeResources(ctx, l.VMID, b.vmDir(l.VMID), l.Addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(keepTap, hostnet.TapName(l.VMID))
		delete(keepAddr, l.Addr)
		reaped = append(reaped, l.VMID)
	}
	for _, t := range taps {
		if keepTap[t] || tappedByTracked(h, t) {
			continue
		}
		if err := h.net.DeleteTap(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range ruleAddrs {
		if keepAddr[a] {
			continue
		}
		if err := h.net.RemoveVM(ctx, a); err != nil {
			errs = append(errs, err)
		}
	}
	if err := h.reapSnapshotLeftovers(b.cfg.ChrootBaseDir); err != nil {
		errs = append(errs, err)
	}
	slices.Sort(reaped)
	if len(reaped) > 0 {
		b.log.Info("leftover VMs reaped", "agents", reaped)
	}
	return slices.Compact(reaped), errors.Join(errs...)
}

// tappedByTracked reports whether a TAP belongs to a VM some backend
// tracks (a spawn that has no lease yet has no TAP either, but a
// recovered VM may have lost its lease row).
func tappedByTracked(h *Host, tap string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.tracked {
		if hostnet.TapName(id) == tap {
			return true
		}
	}
	return false
}

// StopOrphan stops one untracked VM an operator named, and removes what
// it had on the host. It refuses ids that are not jail ids (no '/', '.' or
// '..'), tracked VMs, VMs without a dir here, VMs not running and VMs
// whose identity is not confirmed; the trackers are checked again under
// the reclaim lock right before the kill. isTracked is the caller's view
// of trackers beyond this process's backends (registered agents, job
// bindings).
func (b *Backend) StopOrphan(ctx context.Context, id string, isTracked func(string) bool) (string, error) {
	if !jailID.MatchString(id) || strings.Trim(id, ".") == "" {
		return scaler.OutcomeNotFound, errors.New("not a VM id")
	}
	h := b.host
	h.reclaim.Lock()
	defer h.reclaim.Unlock()
	vms, err := b.scanVMs()
	if err != nil {
		return scaler.OutcomeError, err
	}
	i := slices.IndexFunc(vms, func(l liveVM) bool { return l.id == id })
	switch {
	case h.isTracked(id) || (isTracked != nil && isTracked(id)):
		return scaler.OutcomeTracked, nil
	case i < 0:
		return scaler.OutcomeNotFound, nil
	case vms[i].ident.State == vmproc.Gone:
		return scaler.OutcomeNotLive, nil
	case vms[i].ident.State != vmproc.Confirmed:
		return scaler.OutcomeUnverified, errors.New(vms[i].ident.Detail)
	}
	l := vms[i]
	root := l.dir + "/root"
	// Checked again right before the kill: an agent may have registered
	// with this id since the listing.
	if h.isTracked(id) || (isTracked != nil && isTracked(id)) {
		return scaler.OutcomeTracked, nil
	}
	if _, err := vmproc.Kill(ctx, vmproc.PIDFile(root), root, 5*time.Second); err != nil {
		return scaler.OutcomeError, err
	}
	var addr netip.Addr
	if leases, err := h.addrs.Leases(ctx); err == nil {
		for _, le := range leases {
			if le.VMID == id {
				addr = le.Addr
			}
		}
	}
	if err := h.removeResources(ctx, id, l.dir, addr); err != nil {
		return scaler.OutcomeError, err
	}
	return scaler.OutcomeStopped, nil
}
