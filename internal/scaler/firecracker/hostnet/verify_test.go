//go:build linux

package hostnet

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/testsvc"
)

// provision runs EnsureBridge and EnsureFirewall.
func provision(t *testing.T, h *Host) {
	t.Helper()
	if err := h.EnsureBridge(t.Context()); err != nil {
		t.Fatalf("EnsureBridge: %v", err)
	}
	if err := h.EnsureFirewall(t.Context()); err != nil {
		t.Fatalf("EnsureFirewall: %v", err)
	}
}

// nftBatch sends the changes fill makes as one transaction.
func nftBatch(t *testing.T, fill func(c *nftables.Conn)) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	fill(c)
	if err := c.Flush(); err != nil {
		t.Fatalf("nftables batch: %v", err)
	}
}

// wantProblem checks that ps is one problem about object whose Miss
// contains miss and whose Provisioned flag is provisioned.
func wantProblem(t *testing.T, ps []Problem, object, miss string, provisioned bool) {
	t.Helper()
	if len(ps) != 1 || !strings.Contains(ps[0].Object, object) || !strings.Contains(ps[0].Miss, miss) || ps[0].Provisioned != provisioned || ps[0].Fix == "" {
		t.Fatalf("Verify: got %q, want one problem of %q containing %q, provisioned %v, with a fix", ps, object, miss, provisioned)
	}
	t.Log(ps[0])
}

func TestVerifyHealthy(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	provision(t, h)
	vm := guestVM(n, 2)
	if err := h.CreateTap(t.Context(), vm.Tap, 10000, 10000); err != nil {
		t.Fatalf("CreateTap: %v", err)
	}
	if err := h.AllowVM(t.Context(), vm); err != nil {
		t.Fatalf("AllowVM: %v", err)
	}
	if ps := h.Verify(t.Context()); len(ps) != 0 {
		t.Fatalf("Verify: got %q, want no problems", ps)
	}
}

func TestVerifyReports(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	tests := []struct {
		name string
		// plant breaks one thing on a provisioned host.
		plant       func(t *testing.T, h *Host, n int)
		object      string
		miss        string
		provisioned bool
	}{
		{
			name: "bridge absent", object: "bridge", miss: "does not exist", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				if err := netlink.LinkDel(mustLink(t, h.cfg.Bridge)); err != nil {
					t.Fatalf("LinkDel: %v", err)
				}
			},
		},
		{
			name: "not a bridge", object: "bridge", miss: "is a veth link, not a bridge",
			plant: func(t *testing.T, h *Host, _ int) {
				if err := netlink.LinkDel(mustLink(t, h.cfg.Bridge)); err != nil {
					t.Fatalf("LinkDel: %v", err)
				}
				addVeth(t, h.cfg.Bridge, 0)
			},
		},
		{
			name: "bridge down", object: "bridge", miss: "is down", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				if err := netlink.LinkSetDown(mustLink(t, h.cfg.Bridge)); err != nil {
					t.Fatalf("LinkSetDown: %v", err)
				}
			},
		},
		{
			name: "gateway address missing", object: "bridge", miss: "lacks its address", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				if err := netlink.AddrDel(mustLink(t, h.cfg.Bridge), h.gatewayAddr()); err != nil {
					t.Fatalf("AddrDel: %v", err)
				}
			},
		},
		{
			name: "gateway with another prefix length", object: "bridge", miss: "/25, not",
			plant: func(t *testing.T, h *Host, _ int) {
				br := mustLink(t, h.cfg.Bridge)
				if err := netlink.AddrDel(br, h.gatewayAddr()); err != nil {
					t.Fatalf("AddrDel: %v", err)
				}
				a := h.gatewayAddr()
				a.Mask = net.CIDRMask(25, 32)
				if err := netlink.AddrAdd(br, a); err != nil {
					t.Fatalf("AddrAdd: %v", err)
				}
			},
		},
		{
			name: "tap not isolated", object: "tap", miss: "isolation is off",
			plant: func(t *testing.T, h *Host, n int) {
				if err := h.CreateTap(t.Context(), tapName(n, 1), 10000, 10000); err != nil {
					t.Fatalf("CreateTap: %v", err)
				}
				if err := netlink.LinkSetIsolated(mustLink(t, tapName(n, 1)), false); err != nil {
					t.Fatalf("LinkSetIsolated: %v", err)
				}
			},
		},
		{
			name: "table absent", object: "table", miss: "does not exist", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) { c.DelTable(h.table()) })
			},
		},
		{
			name: "forward chain absent", object: "chain ip kt", miss: "does not exist", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) {
					c.FlushChain(forwardChain(h.table()))
					c.DelChain(forwardChain(h.table()))
				})
			},
		},
		{
			name: "forward policy drop", object: "forward", miss: "policy drop", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				drop := nftables.ChainPolicyDrop
				ch := forwardChain(h.table())
				ch.Policy = &drop
				nftBatch(t, func(c *nftables.Conn) { c.AddChain(ch) })
			},
		},
		{
			name: "baseline rule missing", object: "baseline", miss: "rule 3 is", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				r := rawRules(t, h, chainBaseline)[2]
				nftBatch(t, func(c *nftables.Conn) { _ = c.DelRule(r) })
			},
		},
		{
			name: "no tail jump", object: "forward", miss: "has no rule jump baseline", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) { c.FlushChain(forwardChain(h.table())) })
			},
		},
		{
			name: "rule after the tail jump", object: "forward", miss: "ends with", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				tb := h.table()
				nftBatch(t, func(c *nftables.Conn) {
					c.AddRule(&nftables.Rule{Table: tb, Chain: forwardChain(tb), Exprs: []expr.Any{verdict(expr.VerdictAccept)}})
				})
			},
		},
		{
			name: "nat rule missing", object: "postrouting", miss: "lacks rule 1", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) { c.FlushChain(postroutingChain(h.table())) })
			},
		},
		{
			name: "bridge table absent", object: "nftables table bridge kt", miss: "does not exist, so guests can send with other VMs' addresses", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) { c.DelTable(h.bridgeTable()) })
			},
		},
		{
			name: "vm_ports chain absent", object: "nftables chain bridge kt", miss: "does not exist", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) {
					c.FlushChain(vmPortsChain(h.bridgeTable()))
					c.DelChain(vmPortsChain(h.bridgeTable()))
				})
			},
		},
		{
			name: "vm_ports of another priority", object: "vm_ports", miss: "priority 0 policy accept, not type filter hook prerouting priority -200",
			plant: func(t *testing.T, h *Host, _ int) {
				ch := vmPortsChain(h.bridgeTable())
				nftBatch(t, func(c *nftables.Conn) {
					c.FlushChain(ch)
					c.DelChain(ch)
					ch.Priority = nftables.ChainPriorityFilter
					c.AddChain(ch)
				})
			},
		},
		{
			name: "port baseline missing", object: "vm_ports", miss: `has no rule meta ibrname "ktbr`, provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				nftBatch(t, func(c *nftables.Conn) { c.FlushChain(vmPortsChain(h.bridgeTable())) })
			},
		},
		{
			name: "second port baseline", object: "vm_ports", miss: "has 2 rules", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				bt := h.bridgeTable()
				nftBatch(t, func(c *nftables.Conn) {
					c.InsertRule(&nftables.Rule{Table: bt, Chain: vmPortsChain(bt), Exprs: h.portBaseline(false)})
				})
			},
		},
		{
			name: "rule after the port baseline", object: "vm_ports", miss: "ends with", provisioned: true,
			plant: func(t *testing.T, h *Host, _ int) {
				bt := h.bridgeTable()
				nftBatch(t, func(c *nftables.Conn) {
					c.AddRule(&nftables.Rule{Table: bt, Chain: vmPortsChain(bt), Exprs: []expr.Any{verdict(expr.VerdictAccept)}})
				})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n := testHost(t)
			provision(t, h)
			tt.plant(t, h, n)
			wantProblem(t, h.Verify(t.Context()), tt.object, tt.miss, tt.provisioned)
			if !tt.provisioned {
				return
			}
			provision(t, h)
			if ps := h.Verify(t.Context()); len(ps) != 0 {
				t.Fatalf("Verify after provisioning again: got %q, want no problems", ps)
			}
		})
	}
}

// TestVerifyForwarding turns IPv4 forwarding off in the namespace every
// test shares, so it does not run in parallel: Go runs it before any
// parallel test resumes.
func TestVerifyForwarding(t *testing.T) {
	testsvc.NetNS(t)
	h, _ := testHost(t)
	provision(t, h)
	if err := os.WriteFile(ipForwardPath, []byte("0\n"), 0o644); err != nil {
		t.Fatalf("turn ip_forward off: %v", err)
	}
	wantProblem(t, h.Verify(t.Context()), "ip_forward", "is off", true)
	provision(t, h)
	if ps := h.Verify(t.Context()); len(ps) != 0 {
		t.Fatalf("Verify after provisioning again: got %q, want no problems", ps)
	}
}
