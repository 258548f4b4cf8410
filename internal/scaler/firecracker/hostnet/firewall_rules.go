//go:build linux

package hostnet

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The chains of the table.
const (
	chainForward     = "forward"
	chainBaseline    = "baseline"
	chainPostrouting = "postrouting"
	chainInput       = "input"
)

// chainVMPorts is the one chain of the bridge table.
const chainVMPorts = "vm_ports"

// The comments that say which rule is which. A per-VM rule's comment is
// vmTagPrefix and the VM's address.
const (
	vmTagPrefix = "kici-vm "
	baselineTag = "kici-baseline"
	jumpTag     = "kici-baseline-jump"
	masqTag     = "kici-masquerade"
	hostTag     = "kici-host-access"
	portsTag    = "kici-port-baseline"
)

// privateNets are the destinations no guest may reach unless allowed:
// the RFC 1918 ranges, then link-local (cloud metadata services).
var privateNets = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"),
}

// The IPv4 header offsets of the source and destination addresses.
const (
	offSaddr = 12
	offDaddr = 16
)

// The Ethernet header offsets of the source address and the EtherType,
// and the EtherTypes a guest may send.
const (
	offEtherSaddr = 6
	offEtherType  = 12
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
)

// The ARP header offsets (RFC 826) of the hardware and protocol types,
// their lengths, and, for Ethernet and IPv4, the sender's hardware and
// protocol addresses.
const (
	offARPHType = 0
	offARPPType = 2
	offARPHLen  = 4
	offARPPLen  = 5
	offARPSHA   = 8
	offARPSPA   = 14
)

// arpHTypeEther is the ARP hardware type of Ethernet.
const arpHTypeEther = 1

// vmTag is the comment of addr's per-VM rules.
func vmTag(addr netip.Addr) string { return vmTagPrefix + addr.String() }

// comment returns the nft comment in a rule's user data. It does its own
// bounds checks: the user data of a rule kici did not write may be
// anything.
func comment(ud []byte) (string, bool) {
	for len(ud) >= 2 {
		typ, n := userdata.Type(ud[0]), int(ud[1])
		if len(ud) < 2+n {
			return "", false
		}
		if typ == userdata.TypeComment {
			return strings.TrimSuffix(string(ud[2:2+n]), "\x00"), true
		}
		ud = ud[2+n:]
	}
	return "", false
}

// tagged returns the user data of a rule commented tag.
func tagged(tag string) []byte { return userdata.AppendString(nil, userdata.TypeComment, tag) }

// vmAddrOf returns the VM address a rule's comment names, if it is a
// per-VM rule.
func vmAddrOf(r *nftables.Rule) (netip.Addr, bool) {
	c, ok := comment(r.UserData)
	if !ok {
		return netip.Addr{}, false
	}
	s, ok := strings.CutPrefix(c, vmTagPrefix)
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// hasTag reports whether r's comment is tag.
func hasTag(r *nftables.Rule, tag string) bool {
	c, ok := comment(r.UserData)
	return ok && c == tag
}

// matchAddr matches the address at the IPv4 header offset off against p;
// a /32 is an exact comparison, so 10.0.0.2 never matches 10.0.0.20.
func matchAddr(off uint32, p netip.Prefix) []expr.Any {
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}}
	if p.Bits() < 32 {
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(p.Bits(), 32), Xor: make([]byte, 4)})
	}
	a := p.Masked().Addr().As4()
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

// host is the /32 of a.
func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, 32) }

// ctEstablished matches ct state established,related.
func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  make([]byte, 4),
		},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// ifname is an interface name as nft compares it: IFNAMSIZ bytes,
// NUL-padded.
func ifname(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

// iifname matches packets that came in by the interface called name.
func iifname(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

// iifnamePrefix matches packets that came in by an interface whose name
// starts with prefix: the comparison covers the prefix's bytes only, as
// nft compiles iifname "prefix*".
func iifnamePrefix(prefix string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(prefix)},
	}
}

// ibrname matches frames that came in by a port of the bridge called
// name (nft's meta ibrname). Only the bridge family has it, and only with
// the kernel's nft_meta_bridge.
func ibrname(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyBRIIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

// etherSaddr matches frames whose Ethernet source address is mac.
func etherSaddr(mac net.HardwareAddr) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: offEtherSaddr, Len: 6},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: slices.Clone(mac)},
	}
}

// etherType matches frames of the EtherType typ. A VLAN-tagged frame has
// the tag's type there, so it never matches IPv4 or ARP.
func etherType(typ uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: offEtherType, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(typ)},
	}
}

// netField matches the bytes at offset off of the network header against
// want.
func netField(off uint32, want []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(want))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: want},
	}
}

// arpEtherIPv4 matches ARP packets for Ethernet and IPv4, the only ones
// whose sender addresses are at offARPSHA and offARPSPA.
func arpEtherIPv4() []expr.Any {
	return rule(
		netField(offARPHType, binaryutil.BigEndian.PutUint16(arpHTypeEther)),
		netField(offARPPType, binaryutil.BigEndian.PutUint16(etherTypeIPv4)),
		netField(offARPHLen, []byte{6}),
		netField(offARPPLen, []byte{4}),
	)
}

// arpSender matches ARP packets (of arpEtherIPv4) whose sender is mac at
// addr.
func arpSender(mac net.HardwareAddr, addr netip.Addr) []expr.Any {
	a := addr.As4()
	return rule(netField(offARPSHA, slices.Clone(mac)), netField(offARPSPA, a[:]))
}

// notFrom matches packets whose source address is outside p.
func notFrom(p netip.Prefix) []expr.Any {
	e := matchAddr(offSaddr, p)
	e[len(e)-1].(*expr.Cmp).Op = expr.CmpOpNeq
	return e
}

// dport matches the transport protocol proto and destination port.
func dport(proto byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// oifnameNot matches packets leaving by an interface not called name.
func oifnameNot(name string) []expr.Any {
	b := make([]byte, 16) // IFNAMSIZ, NUL-padded as nft does
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: b},
	}
}

// verdict ends a rule.
func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

// rule joins expression groups into one rule's expressions.
func rule(parts ...[]expr.Any) []expr.Any {
	var e []expr.Any
	for _, p := range parts {
		e = append(e, p...)
	}
	return e
}

// table is the Host's nftables table.
func (h *Host) table() *nftables.Table {
	return &nftables.Table{Name: h.cfg.Table, Family: nftables.TableFamilyIPv4}
}

// bridgeTable is the Host's table of family bridge: the same name as
// table, where frames are seen per bridge port, before the bridge
// forwards them or hands them up to the host.
func (h *Host) bridgeTable() *nftables.Table {
	return &nftables.Table{Name: h.cfg.Table, Family: nftables.TableFamilyBridge}
}

// bridgePriorityFilter is what nft's "priority filter" means in a bridge
// table (NF_BR_PRI_FILTER_BRIDGED), -200, not the 0 of the ip family.
var bridgePriorityFilter = nftables.ChainPriorityRef(-200)

// vmPortsChain is the bridge table's hooked chain, which binds each VM's
// TAP to the VM's MAC and address. It hooks prerouting, which sees every
// frame a port brings in before the bridge learns its source MAC, forwards
// it or passes it up to the host (whose ARP table it might update).
func vmPortsChain(t *nftables.Table) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name: chainVMPorts, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: bridgePriorityFilter, Policy: &accept,
	}
}

// portBaseline is the expression of vm_ports' last rule: drop, counting
// them, the frames that came in by a port named tapPrefix-something and
// that no VM's rule accepted. With scoped, only ports of the configured
// bridge are concerned (meta ibrname), so that the Hosts of other bridges
// in the namespace keep their own guests' frames; without it (a kernel
// without nft_meta_bridge) every such port of every bridge is. The probe
// TAP is named so too: it never carries traffic.
func (h *Host) portBaseline(scoped bool) []expr.Any {
	var br []expr.Any
	if scoped {
		br = ibrname(h.cfg.Bridge)
	}
	return rule(br, iifnamePrefix(tapPrefix), []expr.Any{&expr.Counter{}, verdict(expr.VerdictDrop)})
}

// portBaselines are the descriptions Verify accepts for vm_ports' last
// rule: the scoped one first.
func (h *Host) portBaselines() []string {
	return []string{describe(h.portBaseline(true)), describe(h.portBaseline(false))}
}

// vmPortRules are the expressions of vm's rules in vm_ports: accept what
// comes in by vm.Tap from vm.MAC, if it is IPv4 from vm.Addr or ARP whose
// sender is vm.MAC at vm.Addr. Each counts the frames it matches. The
// rest of the TAP's frames (another source, IPv6, another EtherType, a
// VLAN tag) meet the baseline drop.
func vmPortRules(vm VMRules) [][]expr.Any {
	port := func() []expr.Any { return rule(iifname(vm.Tap), etherSaddr(vm.MAC)) }
	accept := func() []expr.Any { return []expr.Any{&expr.Counter{}, verdict(expr.VerdictAccept)} }
	return [][]expr.Any{
		rule(port(), etherType(etherTypeIPv4), matchAddr(offSaddr, host(vm.Addr)), accept()),
		rule(port(), etherType(etherTypeARP), arpEtherIPv4(), arpSender(vm.MAC, vm.Addr), accept()),
	}
}

// forwardChain is the hooked filter chain the per-VM rules live in.
func forwardChain(t *nftables.Table) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name: chainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	}
}

// baselineChain is the regular chain of the pool-wide rules.
func baselineChain(t *nftables.Table) *nftables.Chain {
	return &nftables.Chain{Name: chainBaseline, Table: t}
}

// inputChain is the hooked filter chain of what guests may reach on the
// host itself: packets to the host's own addresses take the input hook,
// never forward.
func inputChain(t *nftables.Table) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name: chainInput, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	}
}

// hostRules are the expressions of the input chain, in order, for
// packets that came from the bridge: replies to the host's own
// connections, the TCP ports of Config.HostPorts, DNS on the gateway,
// and a reject of everything else (a refused connection, not a silent
// wait, for the guest that tries).
func (h *Host) hostRules() [][]expr.Any {
	br := iifname(h.cfg.Bridge)
	accept := []expr.Any{verdict(expr.VerdictAccept)}
	rules := [][]expr.Any{rule(br, ctEstablished(), accept)}
	for _, p := range h.hostPorts() {
		rules = append(rules, rule(br, dport(unix.IPPROTO_TCP, p), accept))
	}
	gw := matchAddr(offDaddr, host(h.cfg.Gateway))
	rules = append(rules,
		rule(br, gw, dport(unix.IPPROTO_UDP, 53), accept),
		rule(br, gw, dport(unix.IPPROTO_TCP, 53), accept),
		rule(br, []expr.Any{&expr.Counter{}, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3 /* port unreachable */}}),
	)
	return rules
}

// postroutingChain is the NAT chain of the masquerade rule.
func postroutingChain(t *nftables.Table) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name: chainPostrouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept,
	}
}

// baselineRules are the expressions of the baseline chain, in order.
// A packet from the pool that none of them ends goes back to forward,
// whose policy accepts it.
func (h *Host) baselineRules() [][]expr.Any {
	pool := matchAddr(offSaddr, h.cfg.Prefix)
	rules := [][]expr.Any{
		// A guest that forges a source outside the pool is dropped
		// before anything could route it out.
		rule(iifname(h.cfg.Bridge), notFrom(h.cfg.Prefix), []expr.Any{&expr.Counter{}, verdict(expr.VerdictDrop)}),
		rule(pool, ctEstablished(), []expr.Any{verdict(expr.VerdictAccept)}),
		rule(pool, matchAddr(offDaddr, host(h.cfg.Gateway)), []expr.Any{verdict(expr.VerdictAccept)}),
	}
	for _, p := range privateNets {
		rules = append(rules, rule(pool, matchAddr(offDaddr, p), []expr.Any{verdict(expr.VerdictDrop)}))
	}
	return rules
}

// jumpRule is the expression of forward's last rule.
func jumpRule() []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chainBaseline}}
}

// masqRule is the expression of the postrouting rule: traffic of the pool
// that leaves by another interface than the bridge takes the address of
// that interface.
func (h *Host) masqRule() []expr.Any {
	return rule(matchAddr(offSaddr, h.cfg.Prefix), oifnameNot(h.cfg.Bridge), []expr.Any{&expr.Masq{}})
}

// vmRules are the expressions of vm's rules, head to tail: accept the
// gateway, accept each allowed prefix, drop the private ranges, drop
// everything when DenyAll. Each counts the packets it matches.
func (h *Host) vmRules(vm VMRules) [][]expr.Any {
	src := matchAddr(offSaddr, host(vm.Addr))
	end := func(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Counter{}, verdict(k)} }
	rules := [][]expr.Any{rule(src, matchAddr(offDaddr, host(h.cfg.Gateway)), end(expr.VerdictAccept))}
	for _, p := range vm.Allow {
		rules = append(rules, rule(src, matchAddr(offDaddr, p.Masked()), end(expr.VerdictAccept)))
	}
	for _, p := range privateNets {
		rules = append(rules, rule(src, matchAddr(offDaddr, p), end(expr.VerdictDrop)))
	}
	if vm.DenyAll {
		rules = append(rules, rule(src, end(expr.VerdictDrop)))
	}
	return rules
}
