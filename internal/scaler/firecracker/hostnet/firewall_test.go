//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
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
	}
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
	vm := poolAddr(n, 2)
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	if err := h.AllowVM(ctx, VMRules{Addr: vm, DenyAll: true}); err != nil {
		t.Fatalf("AllowVM: %v", err)
	}
	// Litter the chains: a hand-written rule and a second jump in
	// forward, a stray rule in baseline, a second NAT rule.
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
	if err := c.Flush(); err != nil {
		t.Fatalf("litter the table: %v", err)
	}
	if ps := h.verifyFirewall(); len(ps) != 3 {
		t.Fatalf("verifyFirewall of the littered table: got %v, want 3 problems", ps)
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
	a2, a20 := poolAddr(n, 2), poolAddr(n, 20)
	check := func(step string, wantForward []string, wantAddrs ...netip.Addr) {
		t.Helper()
		if diff := cmp.Diff(wantForward, chainRules(t, h, "forward")); diff != "" {
			t.Fatalf("forward after %s (-want +got):\n%s", step, diff)
		}
		got, err := h.VMAddrs(ctx)
		if err != nil {
			t.Fatalf("VMAddrs after %s: %v", step, err)
		}
		if diff := cmp.Diff(wantAddrs, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Fatalf("VMAddrs after %s (-want +got):\n%s", step, diff)
		}
	}
	allow := []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("10.99.7.7/16")}
	if err := h.AllowVM(ctx, VMRules{Addr: a2, Allow: allow}); err != nil {
		t.Fatalf("AllowVM %v: %v", a2, err)
	}
	block2 := vmWant(n, a2, []string{"192.168.50.0/24", "10.99.0.0/16"}, false)
	check("allowing .2", append(block2, jumpWant), a2)

	if err := h.AllowVM(ctx, VMRules{Addr: a20, DenyAll: true}); err != nil {
		t.Fatalf("AllowVM %v: %v", a20, err)
	}
	block20 := vmWant(n, a20, nil, true)
	check("allowing .20", concat(block20, block2, []string{jumpWant}), a2, a20)

	// The address is reused by another VM: the old rules go.
	if err := h.AllowVM(ctx, VMRules{Addr: a2, DenyAll: true}); err != nil {
		t.Fatalf("AllowVM %v again: %v", a2, err)
	}
	block2 = vmWant(n, a2, nil, true)
	check("allowing .2 again", concat(block2, block20, []string{jumpWant}), a2, a20)

	for i := range 2 {
		if err := h.RemoveVM(ctx, a2); err != nil {
			t.Fatalf("RemoveVM %v #%d: %v", a2, i+1, err)
		}
		check(fmt.Sprintf("removing .2 #%d", i+1), concat(block20, []string{jumpWant}), a20)
	}
	if err := h.RemoveVM(ctx, a20); err != nil {
		t.Fatalf("RemoveVM %v: %v", a20, err)
	}
	check("removing .20", []string{jumpWant})
}

func TestAllowVMWithoutBaseline(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	ctx := t.Context()
	a := poolAddr(n, 9)
	if got, err := h.VMAddrs(ctx); err != nil || got != nil {
		t.Fatalf("VMAddrs of a missing table: got %v, %v, want none", got, err)
	}
	if err := h.RemoveVM(ctx, a); err != nil {
		t.Fatalf("RemoveVM in a missing table: %v", err)
	}
	if err := h.AllowVM(ctx, VMRules{Addr: a}); err != nil {
		t.Fatalf("AllowVM in a missing table: %v", err)
	}
	if diff := cmp.Diff(vmWant(n, a, nil, false), chainRules(t, h, "forward")); diff != "" {
		t.Fatalf("forward (-want +got):\n%s", diff)
	}
	// Provisioning afterwards puts the baseline behind the VM's rules.
	if err := h.EnsureFirewall(ctx); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
	if diff := cmp.Diff(append(vmWant(n, a, nil, false), jumpWant), chainRules(t, h, "forward")); diff != "" {
		t.Fatalf("forward after EnsureFirewall (-want +got):\n%s", diff)
	}
}

func TestAllowVMRefuses(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	tests := []struct {
		name string
		vm   VMRules
	}{
		{name: "zero address", vm: VMRules{}},
		{name: "outside the pool", vm: VMRules{Addr: netip.MustParseAddr("10.250.1.2")}},
		{name: "gateway", vm: VMRules{Addr: h.cfg.Gateway}},
		{name: "network address", vm: VMRules{Addr: poolAddr(n, 0)}},
		{name: "broadcast address", vm: VMRules{Addr: poolAddr(n, 255)}},
		{name: "ipv6 allow", vm: VMRules{Addr: poolAddr(n, 2), Allow: []netip.Prefix{netip.MustParsePrefix("fd00::/8")}}},
		{name: "zero allow", vm: VMRules{Addr: poolAddr(n, 2), Allow: []netip.Prefix{{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := h.AllowVM(t.Context(), tt.vm); err == nil {
				t.Fatalf("AllowVM(%+v): got no error, want one", tt.vm)
			}
		})
	}
	if got := chains(t, h); len(got) != 0 {
		t.Fatalf("refused AllowVMs made chains %v", got)
	}
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
	for i, a := range addrs {
		wg.Go(func() { errs <- h.AllowVM(ctx, VMRules{Addr: a, DenyAll: i%2 == 0}) })
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
		"AllowVM":        func() error { return h.AllowVM(ctx, VMRules{Addr: poolAddr(n, 2)}) },
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
	if ps := h.Verify(ctx); len(ps) != 1 || !strings.Contains(ps[0].Miss, "stopped") {
		t.Errorf("Verify with a cancelled ctx: got %q, want one problem saying it stopped", ps)
	}
}
