//go:build linux

package hostnet

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/testsvc"
)

// The tests run in a network namespace of the test binary's own, so they
// create bridges, TAPs and tables freely. Tests that run in parallel share
// it: each takes its own bridge, pool, table and TAP names from seq.
func TestMain(m *testing.M) { testsvc.MainInNetNS(m) }

// seq numbers the tests' Hosts.
var seq atomic.Int32

// testHost returns a Host of its own: bridge ktbr<n>, pool
// 10.<n/256>.<n%256>.0/24 with gateway .1, table kt<n>, and n to name the
// test's TAPs by (tapName). When the test ends its bridge, table and TAPs
// are deleted, so that -count=N runs start afresh.
func testHost(t *testing.T) (*Host, int) {
	t.Helper()
	n := int(seq.Add(1))
	if n >= 1<<16 {
		t.Fatal("out of test pools")
	}
	h, err := New(Config{
		Bridge:  fmt.Sprintf("ktbr%d", n),
		Gateway: poolAddr(n, 1),
		Prefix:  netip.PrefixFrom(poolAddr(n, 0), 24),
		Table:   fmt.Sprintf("kt%d", n),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		links, _ := netlink.LinkList()
		for _, l := range links {
			if name := l.Attrs().Name; name == h.cfg.Bridge || strings.HasPrefix(name, tapName(n, 0)[:11]) {
				_ = netlink.LinkDel(l)
			}
		}
		c, err := nftables.New()
		if err == nil {
			for _, tb := range []*nftables.Table{h.table(), h.bridgeTable()} {
				if st, _ := h.readTableOf(c, tb); st.exists {
					c.DelTable(tb)
				}
			}
			_ = c.Flush()
		}
	})
	return h, n
}

// guestVM is the VM at .<last> of test host n's pool, with TAP
// tapName(n, last) and the MAC guestMAC gives its address.
func guestVM(n int, last byte) VMRules {
	a := poolAddr(n, last)
	return VMRules{Addr: a, Tap: tapName(n, int(last)), MAC: guestMAC(a)}
}

// guestMAC is the MAC of a, by the scheme of the firecracker backend
// (06:00:AC and a's last three octets).
func guestMAC(a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x06, 0x00, 0xAC, b[1], b[2], b[3]}
}

// poolAddr is the address .<last> of test host n's pool.
func poolAddr(n int, last byte) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(n >> 8), byte(n), last})
}

// deleteLinkAtEnd deletes the link called name, if any, when the test
// ends.
func deleteLinkAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		if l, _ := linkByName(name); l != nil {
			_ = netlink.LinkDel(l)
		}
	})
}

// tapName is the i-th TAP name of test n.
func tapName(n, i int) string { return fmt.Sprintf("kici-%06x%02x", n, i) }

// mustLink returns the link called name.
func mustLink(t *testing.T, name string) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("LinkByName(%q): %v", name, err)
	}
	return l
}

// addrsOf returns l's IPv4 addresses as prefixes.
func addrsOf(t *testing.T, l netlink.Link) []netip.Prefix {
	t.Helper()
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("AddrList(%q): %v", l.Attrs().Name, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		bits, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, bits))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// chainRules reads the rules of the test table's chain back from the
// kernel, each rendered as "<comment>: <rule>".
func chainRules(t *testing.T, h *Host, chain string) []string {
	t.Helper()
	var out []string
	for _, r := range rawRules(t, h, chain) {
		c, _ := comment(r.UserData)
		out = append(out, c+": "+describe(r.Exprs))
	}
	return out
}

// portRules reads the rules of the test bridge table's vm_ports chain
// back from the kernel, rendered as chainRules does.
func portRules(t *testing.T, h *Host) []string {
	t.Helper()
	var out []string
	for _, r := range rawRulesIn(t, h.bridgeTable(), chainVMPorts) {
		c, _ := comment(r.UserData)
		out = append(out, c+": "+describe(r.Exprs))
	}
	return out
}

// rawRules reads the rules of the test table's chain.
func rawRules(t *testing.T, h *Host, chain string) []*nftables.Rule {
	t.Helper()
	return rawRulesIn(t, h.table(), chain)
}

// rawRulesIn reads the rules of tb's chain.
func rawRulesIn(t *testing.T, tb *nftables.Table, chain string) []*nftables.Rule {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	rules, err := c.GetRules(tb, &nftables.Chain{Name: chain, Table: tb})
	if err != nil {
		t.Fatalf("GetRules(%s %s %s): %v", familyName(tb.Family), tb.Name, chain, err)
	}
	return rules
}

// chains reads the test table's chains by name.
func chains(t *testing.T, h *Host) map[string]*nftables.Chain {
	t.Helper()
	return chainsOf(t, h, h.table())
}

// chainsOf reads the chains of the test table of tb's family by name.
func chainsOf(t *testing.T, h *Host, tb *nftables.Table) map[string]*nftables.Chain {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	st, err := h.readTableOf(c, tb)
	if err != nil {
		t.Fatalf("read table %s %s: %v", familyName(tb.Family), tb.Name, err)
	}
	return st.chains
}
