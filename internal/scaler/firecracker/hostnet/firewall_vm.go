//go:build linux

package hostnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// VMRules is what one VM may reach through the host, beyond the host's
// own addresses (which the forward hook never sees), and the TAP and MAC
// its frames must come by.
type VMRules struct {
	// Addr is the VM's address, inside the pool and not its gateway,
	// network or broadcast address. Its rules match ip saddr Addr
	// exactly.
	Addr netip.Addr
	// Tap is the name of the VM's TAP, of TapPattern. Only frames that
	// come in by it from MAC, carrying IPv4 from Addr or ARP of MAC at
	// Addr, pass the bridge; everything else it brings is dropped.
	Tap string
	// MAC is the guest's MAC: 6 bytes, unicast, not all zero.
	MAC net.HardwareAddr
	// Allow lists the IPv4 prefixes the VM may reach although they are
	// private (RFC 1918 or link-local); nil allows none. The gateway is
	// always allowed.
	Allow []netip.Prefix
	// DenyAll drops everything else the VM sends, the internet included;
	// false lets it reach any non-private destination.
	DenyAll bool
}

// check reports the first reason vm cannot be applied.
func (h *Host) check(vm VMRules) error {
	a := vm.Addr
	if !a.Is4() {
		return fmt.Errorf("address %v is not IPv4", a)
	}
	if !h.cfg.Prefix.Contains(a) || a == h.cfg.Gateway || a == h.cfg.Prefix.Addr() || a == broadcast(h.cfg.Prefix) {
		return fmt.Errorf("address %v is not a guest address of the pool %v", a, h.cfg.Prefix)
	}
	if !IsTapName(vm.Tap) {
		return fmt.Errorf("tap %q does not match %s", vm.Tap, TapPattern)
	}
	switch m := vm.MAC; {
	case len(m) != 6:
		return fmt.Errorf("MAC %q is %d bytes, not a 6-byte Ethernet address", m.String(), len(m))
	case m[0]&1 != 0:
		return fmt.Errorf("MAC %v is a multicast address, not a unicast one", m)
	case isZero(m):
		return fmt.Errorf("MAC %v is all zero", m)
	}
	for _, p := range vm.Allow {
		if !p.IsValid() || !p.Addr().Is4() {
			return fmt.Errorf("allowed prefix %v is not an IPv4 prefix", p)
		}
	}
	return nil
}

// AllowVM applies vm's rules in one transaction: it deletes every rule of
// vm.Addr in both tables (an address is reused by later VMs, on other
// TAPs, whose rules must not stack on the old ones) and inserts the new
// ones. At the head of forward, ahead of the baseline jump, in this
// order: accept ip daddr gateway; accept each Allow prefix; drop 10/8,
// 172.16/12 and 192.168/16; drop 169.254/16; drop everything when
// DenyAll; each matches ip saddr vm.Addr exactly. At the head of the
// bridge table's vm_ports, ahead of the drop of kici's ports: accept
// IPv4 from vm.Addr and ARP whose sender is vm.MAC at vm.Addr, each
// coming in by vm.Tap from vm.MAC. Every rule is commented
// "kici-vm <addr>". The tables and those chains are created if missing
// (EnsureFirewall adds the baselines), so a VM is never left without its
// rules for want of them.
func (h *Host) AllowVM(ctx context.Context, vm VMRules) error {
	what := fmt.Sprintf("apply nftables rules of vm %v in tables ip and bridge %q", vm.Addr, h.cfg.Table)
	if err := h.check(vm); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h.fwMu.Lock()
	defer h.fwMu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("%s: open nftables: %w", what, err)
	}
	defer c.CloseLasting()
	old, err := h.vmRulesInTables(c, func(a netip.Addr) bool { return a == vm.Addr })
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	t := c.AddTable(h.table())
	fwd := c.AddChain(forwardChain(t))
	bt := c.AddTable(h.bridgeTable())
	ports := c.AddChain(vmPortsChain(bt))
	for _, r := range old {
		_ = c.DelRule(r) // fails only for handle 0, which the kernel never reports
	}
	// Each insert goes to the head, so the last one sent ends up first.
	insert := func(t *nftables.Table, ch *nftables.Chain, rules [][]expr.Any) {
		for i := len(rules) - 1; i >= 0; i-- {
			c.InsertRule(&nftables.Rule{Table: t, Chain: ch, Exprs: rules[i], UserData: tagged(vmTag(vm.Addr))})
		}
	}
	insert(t, fwd, h.vmRules(vm))
	insert(bt, ports, vmPortRules(vm))
	if err := c.Flush(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// RemoveVM deletes every rule of addr in both tables, in one
// transaction. An address without rules, or a missing table, is not an
// error.
func (h *Host) RemoveVM(ctx context.Context, addr netip.Addr) error {
	what := fmt.Sprintf("remove nftables rules of vm %v from tables ip and bridge %q", addr, h.cfg.Table)
	h.fwMu.Lock()
	defer h.fwMu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("%s: open nftables: %w", what, err)
	}
	defer c.CloseLasting()
	old, err := h.vmRulesInTables(c, func(a netip.Addr) bool { return a == addr })
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(old) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range old {
		_ = c.DelRule(r) // fails only for handle 0, which the kernel never reports
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// VMAddrs returns, sorted, the addresses that have per-VM rules in either
// table; none when the tables are missing.
func (h *Host) VMAddrs(ctx context.Context) ([]netip.Addr, error) {
	what := fmt.Sprintf("list vm addresses of nftables tables ip and bridge %q", h.cfg.Table)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("%s: open nftables: %w", what, err)
	}
	defer c.CloseLasting()
	rules, err := h.vmRulesInTables(c, func(netip.Addr) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var addrs []netip.Addr
	for _, r := range rules {
		a, _ := vmAddrOf(r)
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs), nil
}

// vmRulesInTables returns the per-VM rules, in any chain of the ip table
// and of the bridge table, whose address pick accepts. A missing table
// has none.
func (h *Host) vmRulesInTables(c *nftables.Conn, pick func(netip.Addr) bool) ([]*nftables.Rule, error) {
	var out []*nftables.Rule
	for _, t := range []*nftables.Table{h.table(), h.bridgeTable()} {
		st, err := h.readTableOf(c, t)
		if err != nil {
			return nil, err
		}
		for name := range st.chains {
			rules, err := h.rulesIn(c, t, name)
			if err != nil {
				return nil, err
			}
			for _, r := range rules {
				if a, ok := vmAddrOf(r); ok && pick(a) {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}
