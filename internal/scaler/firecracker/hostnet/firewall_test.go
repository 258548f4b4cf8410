//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/kici-dev/kici/internal/testsvc"
)

// baselineWant is the baseline chain of test host n, as chainRules
// renders it.
func baselineWant(n int) []string {
	pool := fmt.Sprintf("ip saddr %v/24", poolAddr(n, 0))
	return []string{
		fmt.Sprintf(`kici-baseline: iifname "ktbr%d" ip saddr != %v/24 counter drop`, n, poolAddr(n, 0)),
		"kici-baseline: " + pool + " ct state established,related accept",
		fmt.Sprintf("kici-baseline: %s ip daddr %v accept", pool, poolAddr(n, 1)),
		"kici-baseline: " + pool + " ip daddr 10.0.0.0/8 drop",
		"kici-baseline: " + pool + " ip daddr 172.16.0.0/12 drop",
		"kici-baseline: " + pool + " ip daddr 192.168.0.0/16 drop",
		"kici-baseline: " + pool + " ip daddr 169.254.0.0/16 drop",
	}
}

// vmWant is the block of rules AllowVM writes for addr of test host n.
func vmWant(n int, addr netip.Addr, allow []string, denyAll bool) []string {
	p := fmt.Sprintf("kici-vm %v: ip saddr %v ", addr, addr)
	out := []string{p + fmt.Sprintf("ip daddr %v counter accept", poolAddr(n, 1))}
	for _, a := range allow {
		out = append(out, p+"ip daddr "+a+" counter accept")
	}
	for _, d := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} {
		out = append(out, p+"ip daddr "+d+" counter drop")
	}
	if denyAll {
		out = append(out, p+"counter drop")
	}
	return out
}

const jumpWant = "kici-baseline-jump: jump baseline"

// portBaselineWants are the two forms of vm_ports' last rule on test host
// n: scoped to its bridge, and the one a kernel without nft_meta_bridge
// gets.
func portBaselineWants(n int) []string {
	return []string{
		fmt.Sprintf(`kici-port-baseline: meta ibrname "ktbr%d" iifname "kici-*" counter drop`, n),
		`kici-port-baseline: iifname "kici-*" counter drop`,
	}
}

// vmPortsWant is the block of rules AllowVM writes in vm_ports for vm.
func vmPortsWant(vm VMRules) []string {
	p := fmt.Sprintf("kici-vm %v: iifname %q ether saddr %v ", vm.Addr, vm.Tap, vm.MAC)
	return []string{
		p + fmt.Sprintf("ether type ip ip saddr %v counter accept", vm.Addr),
		p + fmt.Sprintf("ether type arp arp htype 1 arp ptype ip arp hlen 6 arp plen 4 arp saddr ether %v arp saddr ip %v counter accept", vm.MAC, vm.Addr),
	}
}

// checkPorts checks that vm_ports holds want and then, if baseline, one
// of the forms of the baseline drop, and nothing else.
func checkPorts(t *testing.T, h *Host, n int, step string, want []string, baseline bool) {
	t.Helper()
	got := portRules(t, h)
	if baseline {
		if len(got) == 0 || !slices.Contains(portBaselineWants(n), got[len(got)-1]) {
			t.Fatalf("vm_ports after %s: got %q, want it to end with one of %q", step, got, portBaselineWants(n))
		}
		got = got[:len(got)-1]
	}
	if len(got) == 0 {
		got = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("vm_ports after %s (-want +got):\n%s", step, diff)
	}
}

func TestEnsureFirewall(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	for i := range 2 {
		if err := h.EnsureFirewall(t.Context()); err != nil {
			t.Fatalf("EnsureFirewall #%d: %v", i+1, err)
		}
		got := map[string]string{}
		for name, c := range chains(t, h) {
			got[name] = chainKind(c)
		}
		want := map[string]string{
			"forward":     "type filter hook forward priority 0 policy accept",
			"baseline":    "a regular chain",
			"postrouting": "type nat hook postrouting priority 100 policy accept",
			"input":       "type filter hook input priority 0 policy accept",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("chains after run #%d (-want +got):\n%s", i+1, diff)
		}
		if diff := cmp.Diff(baselineWant(n), chainRules(t, h, "baseline")); diff != "" {
			t.Fatalf("baseline after run #%d (-want +got):\n%s", i+1, diff)
		}
		if diff := cmp.Diff([]string{jumpWant}, chainRules(t, h, "forward")); diff != "" {
			t.Fatalf("forward after run #%d (-want +got):\n%s", i+1, diff)
		}
		input := chainRules(t, h, "input")
		if len(input) != 4 || !strings.Contains(input[0], "ct state established,related accept") ||
			!strings.Contains(input[len(input)-1], "counter *expr.Reject") {
			t.Fatalf("input after run #%d: %q, want replies accepted, DNS on the gateway, and a reject", i+1, input)
		}
		masq := fmt.Sprintf(`kici-masquerade: ip saddr %v/24 oifname != "ktbr%d" masquerade`, poolAddr(n, 0), n)
		if diff := cmp.Diff([]string{masq}, chainRules(t, h, "postrouting")); diff != "" {
			t.Fatalf("postrouting after run #%d (-want +got):\n%s", i+1, diff)
		}
		got = map[string]string{}
		for name, c := range chainsOf(t, h, h.bridgeTable()) {
			got[name] = chainKind(c)
		}
		if diff := cmp.Diff(map[string]string{"vm_ports": "type filter hook prerouting priority -200 policy accept"}, got); diff != "" {
			t.Fatalf("bridge table chains after run #%d (-want +got):\n%s", i+1, diff)
		}
		checkPorts(t, h, n, fmt.Sprintf("run #%d", i+1), nil, true)
	}
	t.Logf("port baseline on this kernel: %q", portRules(t, h))
	b, err := os.ReadFile(ipForwardPath)
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Fatalf("ip_forward: got %q, %v, want 1", b, err)
	}
	if ps := h.verifyFirewall(); len(ps) != 0 {
		t.Fatalf("verifyFirewall: got %v, want no problems", ps)
	}
}

func TestEnsureFirewallKeepsVMRules(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	g := guestVM(n, 2)
	g.DenyAll = true
	vm := g.Addr
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	if err := h.AllowVM(ctx, g); err != nil {
		t.Fatalf("AllowVM: %v", err)
	}
	// Litter the chains: a hand-written rule and a second jump in
	// forward, a stray rule in baseline, a second NAT rule, and in
	// vm_ports a hand-written rule at the head and a second drop.
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	tb := h.table()
	accept := []expr.Any{verdict(expr.VerdictAccept)}
	c.AddRule(&nftables.Rule{Table: tb, Chain: forwardChain(tb), Exprs: accept})
	c.AddRule(&nftables.Rule{Table: tb, Chain: forwardChain(tb), Exprs: jumpRule()})
	c.InsertRule(&nftables.Rule{Table: tb, Chain: forwardChain(tb), Exprs: jumpRule()})
	c.AddRule(&nftables.Rule{Table: tb, Chain: baselineChain(tb), Exprs: accept})
	c.AddRule(&nftables.Rule{Table: tb, Chain: postroutingChain(tb), Exprs: h.masqRule()})
	bt := h.bridgeTable()
	c.InsertRule(&nftables.Rule{Table: bt, Chain: vmPortsChain(bt), Exprs: accept})
	c.AddRule(&nftables.Rule{Table: bt, Chain: vmPortsChain(bt), Exprs: h.portBaseline(false)})
	if err := c.Flush(); err != nil {
		t.Fatalf("litter the table: %v", err)
	}
	if ps := h.verifyFirewall(); len(ps) != 4 {
		t.Fatalf("verifyFirewall of the littered tables: got %v, want 4 problems", ps)
	}
	for i := range 2 {
		if err := h.EnsureFirewall(ctx); err != nil {
			t.Fatalf("EnsureFirewall #%d: %v", i+1, err)
		}
		want := append(vmWant(n, vm, nil, true), jumpWant)
		if diff := cmp.Diff(want, chainRules(t, h, "forward")); diff != "" {
			t.Fatalf("forward after run #%d (-want +got):\n%s", i+1, diff)
		}
		if diff := cmp.Diff(baselineWant(n), chainRules(t, h, "baseline")); diff != "" {
			t.Fatalf("baseline after run #%d (-want +got):\n%s", i+1, diff)
		}
		if got := chainRules(t, h, "postrouting"); len(got) != 1 {
			t.Fatalf("postrouting after run #%d: got %q, want one rule", i+1, got)
		}
		checkPorts(t, h, n, fmt.Sprintf("run #%d", i+1), vmPortsWant(g), true)
	}
	if ps := h.verifyFirewall(); len(ps) != 0 {
		t.Fatalf("verifyFirewall: got %v, want no problems", ps)
	}
}

func TestAllowVM(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	g2, g20 := guestVM(n, 2), guestVM(n, 20)
	a2, a20 := g2.Addr, g20.Addr
	check := func(step string, wantForward, wantPorts []string, wantAddrs ...netip.Addr) {
		t.Helper()
		if diff := cmp.Diff(wantForward, chainRules(t, h, "forward")); diff != "" {
			t.Fatalf("forward after %s (-want +got):\n%s", step, diff)
		}
		checkPorts(t, h, n, step, wantPorts, true)
		got, err := h.VMAddrs(ctx)
		if err != nil {
			t.Fatalf("VMAddrs after %s: %v", step, err)
		}
		if diff := cmp.Diff(wantAddrs, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Fatalf("VMAddrs after %s (-want +got):\n%s", step, diff)
		}
	}
	g2.Allow = []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("10.99.7.7/16")}
	if err := h.AllowVM(ctx, g2); err != nil {
		t.Fatalf("AllowVM %v: %v", a2, err)
	}
	block2 := vmWant(n, a2, []string{"192.168.50.0/24", "10.99.0.0/16"}, false)
	ports2 := vmPortsWant(g2)
	check("allowing .2", append(block2, jumpWant), ports2, a2)

	g20.DenyAll = true
	if err := h.AllowVM(ctx, g20); err != nil {
		t.Fatalf("AllowVM %v: %v", a20, err)
	}
	block20 := vmWant(n, a20, nil, true)
	ports20 := vmPortsWant(g20)
	check("allowing .20", concat(block20, block2, []string{jumpWant}), concat(ports20, ports2), a2, a20)

	// The address is reused by another VM, on another TAP: the old rules
	// go, those of the old TAP in vm_ports included.
	reuse := VMRules{Addr: a2, Tap: tapName(n, 99), MAC: g2.MAC, DenyAll: true}
	if err := h.AllowVM(ctx, reuse); err != nil {
		t.Fatalf("AllowVM %v again: %v", a2, err)
	}
	block2 = vmWant(n, a2, nil, true)
	ports2 = vmPortsWant(reuse)
	check("allowing .2 again", concat(block2, block20, []string{jumpWant}), concat(ports2, ports20), a2, a20)

	for i := range 2 {
		if err := h.RemoveVM(ctx, a2); err != nil {
			t.Fatalf("RemoveVM %v #%d: %v", a2, i+1, err)
		}
		check(fmt.Sprintf("removing .2 #%d", i+1), concat(block20, []string{jumpWant}), ports20, a20)
	}
	if err := h.RemoveVM(ctx, a20); err != nil {
		t.Fatalf("RemoveVM %v: %v", a20, err)
	}
	check("removing .20", []string{jumpWant}, nil)
}

// TestVMRulesWithoutBridgeTable: a bridge table deleted under a VM's
// rules is no error for VMAddrs and RemoveVM, which still find and remove
// the ip table's rules; rules left only in the bridge table are found and
// removed too.
func TestVMRulesWithoutBridgeTable(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	g := guestVM(n, 7)
	if err := h.AllowVM(ctx, g); err != nil {
		t.Fatalf("AllowVM: %v", err)
	}
	nftBatch(t, func(c *nftables.Conn) { c.DelTable(h.bridgeTable()) })
	if got, err := h.VMAddrs(ctx); err != nil || len(got) != 1 || got[0] != g.Addr {
		t.Fatalf("VMAddrs without the bridge table: got %v, %v, want [%v]", got, err, g.Addr)
	}
	if err := h.RemoveVM(ctx, g.Addr); err != nil {
		t.Fatalf("RemoveVM without the bridge table: %v", err)
	}
	if got, err := h.VMAddrs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("VMAddrs after RemoveVM: got %v, %v, want none", got, err)
	}
	if diff := cmp.Diff([]string{jumpWant}, chainRules(t, h, "forward")); diff != "" {
		t.Fatalf("forward after RemoveVM (-want +got):\n%s", diff)
	}

	// Now the other way round: only the bridge table's rules are left.
	if err := h.AllowVM(ctx, g); err != nil {
		t.Fatalf("AllowVM again: %v", err)
	}
	nftBatch(t, func(c *nftables.Conn) { c.DelTable(h.table()) })
	if got, err := h.VMAddrs(ctx); err != nil || len(got) != 1 || got[0] != g.Addr {
		t.Fatalf("VMAddrs with the bridge table alone: got %v, %v, want [%v]", got, err, g.Addr)
	}
	if err := h.RemoveVM(ctx, g.Addr); err != nil {
		t.Fatalf("RemoveVM with the bridge table alone: %v", err)
	}
	checkPorts(t, h, n, "RemoveVM", nil, false)
}

func TestAllowVMWithoutBaseline(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	g := guestVM(n, 9)
	a := g.Addr
	if got, err := h.VMAddrs(ctx); err != nil || got != nil {
		t.Fatalf("VMAddrs of a missing table: got %v, %v, want none", got, err)
	}
	if err := h.RemoveVM(ctx, a); err != nil {
		t.Fatalf("RemoveVM in a missing table: %v", err)
	}
	if err := h.AllowVM(ctx, g); err != nil {
		t.Fatalf("AllowVM in a missing table: %v", err)
	}
	if diff := cmp.Diff(vmWant(n, a, nil, false), chainRules(t, h, "forward")); diff != "" {
		t.Fatalf("forward (-want +got):\n%s", diff)
	}
	checkPorts(t, h, n, "AllowVM", vmPortsWant(g), false)
	// Provisioning afterwards puts the baseline behind the VM's rules.
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	if diff := cmp.Diff(append(vmWant(n, a, nil, false), jumpWant), chainRules(t, h, "forward")); diff != "" {
		t.Fatalf("forward after EnsureFirewall (-want +got):\n%s", diff)
	}
	checkPorts(t, h, n, "EnsureFirewall", vmPortsWant(g), true)
}

func TestAllowVMRefuses(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	with := func(change func(*VMRules)) VMRules {
		vm := guestVM(n, 2)
		change(&vm)
		return vm
	}
	tests := []struct {
		name string
		vm   VMRules
		want string // in the error
	}{
		{name: "zero address", vm: with(func(v *VMRules) { v.Addr = netip.Addr{} }), want: "is not IPv4"},
		{name: "outside the pool", vm: with(func(v *VMRules) { v.Addr = netip.MustParseAddr("10.250.1.2") }), want: "not a guest address"},
		{name: "gateway", vm: with(func(v *VMRules) { v.Addr = h.cfg.Gateway }), want: "not a guest address"},
		{name: "network address", vm: with(func(v *VMRules) { v.Addr = poolAddr(n, 0) }), want: "not a guest address"},
		{name: "broadcast address", vm: with(func(v *VMRules) { v.Addr = poolAddr(n, 255) }), want: "not a guest address"},
		{name: "ipv6 allow", vm: with(func(v *VMRules) { v.Allow = []netip.Prefix{netip.MustParsePrefix("fd00::/8")} }), want: "allowed prefix"},
		{name: "zero allow", vm: with(func(v *VMRules) { v.Allow = []netip.Prefix{{}} }), want: "allowed prefix"},
		{name: "no tap", vm: with(func(v *VMRules) { v.Tap = "" }), want: `tap "" does not match`},
		{name: "tap of another pattern", vm: with(func(v *VMRules) { v.Tap = "eth0" }), want: `tap "eth0" does not match`},
		{name: "probe tap", vm: with(func(v *VMRules) { v.Tap = probeTap }), want: `tap "kici-isoprobe" does not match`},
		{name: "no MAC", vm: with(func(v *VMRules) { v.MAC = nil }), want: "MAC \"\" is 0 bytes"},
		{name: "long MAC", vm: with(func(v *VMRules) { v.MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0, 0, 1} }), want: "is 8 bytes"},
		{name: "multicast MAC", vm: with(func(v *VMRules) { v.MAC = net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1} }), want: "MAC 01:00:5e:00:00:01 is a multicast address"},
		{name: "broadcast MAC", vm: with(func(v *VMRules) { v.MAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }), want: "multicast"},
		{name: "zero MAC", vm: with(func(v *VMRules) { v.MAC = make(net.HardwareAddr, 6) }), want: "MAC 00:00:00:00:00:00 is all zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := h.AllowVM(t.Context(), tt.vm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AllowVM(%+v): got %v, want an error containing %q", tt.vm, err, tt.want)
			}
		})
	}
	t.Cleanup(func() {
		if got := chains(t, h); len(got) != 0 {
			t.Errorf("refused AllowVMs made chains %v", got)
		}
		if got := chainsOf(t, h, h.bridgeTable()); len(got) != 0 {
			t.Errorf("refused AllowVMs made bridge chains %v", got)
		}
	})
}

// concat joins string lists.
func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestFirewallConcurrent(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	var addrs []netip.Addr
	for i := range 12 {
		addrs = append(addrs, poolAddr(n, byte(10+i)))
	}
	errs := make(chan error, len(addrs)+3)
	var wg sync.WaitGroup
	for i := range addrs {
		vm := guestVM(n, byte(10+i))
		vm.DenyAll = i%2 == 0
		wg.Go(func() { errs <- h.AllowVM(ctx, vm) })
	}
	for range 3 {
		wg.Go(func() { errs <- h.EnsureFirewall(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent call: %v", err)
		}
	}
	got, err := h.VMAddrs(ctx)
	if err != nil {
		t.Fatalf("VMAddrs: %v", err)
	}
	if diff := cmp.Diff(addrs, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("VMAddrs (-want +got):\n%s", diff)
	}
	if ps := h.verifyFirewall(); len(ps) != 0 {
		t.Fatalf("verifyFirewall: got %q, want no problems", ps)
	}
	// Five rules a VM (the gateway, four private ranges), one more with
	// DenyAll, and the jump.
	if got, want := len(chainRules(t, h, chainForward)), 5*len(addrs)+len(addrs)/2+1; got != want {
		t.Fatalf("forward: got %d rules, want %d", got, want)
	}
	// Two rules a VM in vm_ports, and the drop.
	if got, want := len(portRules(t, h)), 2*len(addrs)+1; got != want {
		t.Fatalf("vm_ports: got %d rules, want %d", got, want)
	}
}

func TestCancelledContext(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"EnsureBridge":   func() error { return h.EnsureBridge(ctx) },
		"EnsureFirewall": func() error { return h.EnsureFirewall(ctx) },
		"CreateTap":      func() error { return h.CreateTap(ctx, tapName(n, 1), 1, 1) },
		"DeleteTap":      func() error { return h.DeleteTap(ctx, tapName(n, 1)) },
		"AllowVM":        func() error { return h.AllowVM(ctx, guestVM(n, 2)) },
		"RemoveVM":       func() error { return h.RemoveVM(ctx, poolAddr(n, 2)) },
		"ProbeIsolation": func() error { return h.ProbeIsolation(ctx) },
		"Taps":           func() error { _, err := h.Taps(ctx); return err },
		"VMAddrs":        func() error { _, err := h.VMAddrs(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: got %v, want context.Canceled", name, err)
		}
	}
	if l, _ := linkByName(h.cfg.Bridge); l != nil {
		t.Errorf("a cancelled EnsureBridge made the bridge")
	}
	if got := chains(t, h); len(got) != 0 {
		t.Errorf("cancelled calls made chains %v", got)
	}
	if got := chainsOf(t, h, h.bridgeTable()); len(got) != 0 {
		t.Errorf("cancelled calls made bridge chains %v", got)
	}
	if ps := h.Verify(ctx); len(ps) != 1 || !strings.Contains(ps[0].Miss, "stopped") {
		t.Errorf("Verify with a cancelled ctx: got %q, want one problem saying it stopped", ps)
	}
}
