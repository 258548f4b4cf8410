//go:build linux

package hostnet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
)

// describe renders a rule's expressions in nft's words for the shapes
// this package writes ("ip saddr 10.0.0.2 ip daddr 10.0.0.0/8 counter
// drop", `iifname "kici-1a2b3c4d" ether saddr 06:00:ac:00:00:02 ether
// type arp arp htype 1 ...`), and names any other expression by its type.
// Verify compares rules by their description, and its problems quote
// them.
func describe(exprs []expr.Any) string {
	var words []string
	var subject string // what the register holds: "ip saddr", "oifname", ...
	var mask []byte    // the bitwise mask applied to it, if any
	arp := false       // the rule matched ether type arp: the network header is ARP's
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Payload:
			subject, mask = payloadName(e, arp), nil
		case *expr.Meta:
			subject, mask = metaName(e.Key), nil
		case *expr.Ct:
			subject, mask = "ct key "+fmt.Sprint(e.Key), nil
			if e.Key == expr.CtKeySTATE {
				subject = "ct state"
			}
		case *expr.Bitwise:
			mask = e.Mask
		case *expr.Cmp:
			words = append(words, describeCmp(subject, mask, e))
			if subject == "ether type" && e.Op == expr.CmpOpEq && len(e.Data) == 2 && binary.BigEndian.Uint16(e.Data) == etherTypeARP {
				arp = true
			}
			subject, mask = "", nil
		case *expr.Counter:
			words = append(words, "counter")
		case *expr.Masq:
			words = append(words, "masquerade")
		case *expr.Verdict:
			words = append(words, describeVerdict(e))
		default:
			words = append(words, fmt.Sprintf("%T", e))
		}
	}
	return strings.Join(words, " ")
}

// payloadName names a payload load of the Ethernet header, or of the
// network header: ARP's when arp, else IPv4's.
func payloadName(p *expr.Payload, arp bool) string {
	type field struct {
		base     expr.PayloadBase
		off, len uint32
	}
	names := map[field]string{
		{expr.PayloadBaseLLHeader, offEtherSaddr, 6}: "ether saddr",
		{expr.PayloadBaseLLHeader, offEtherType, 2}:  "ether type",
	}
	if arp {
		names[field{expr.PayloadBaseNetworkHeader, offARPHType, 2}] = "arp htype"
		names[field{expr.PayloadBaseNetworkHeader, offARPPType, 2}] = "arp ptype"
		names[field{expr.PayloadBaseNetworkHeader, offARPHLen, 1}] = "arp hlen"
		names[field{expr.PayloadBaseNetworkHeader, offARPPLen, 1}] = "arp plen"
		names[field{expr.PayloadBaseNetworkHeader, offARPSHA, 6}] = "arp saddr ether"
		names[field{expr.PayloadBaseNetworkHeader, offARPSPA, 4}] = "arp saddr ip"
	} else {
		names[field{expr.PayloadBaseNetworkHeader, offSaddr, 4}] = "ip saddr"
		names[field{expr.PayloadBaseNetworkHeader, offDaddr, 4}] = "ip daddr"
	}
	if n, ok := names[field{p.Base, p.Offset, p.Len}]; ok {
		return n
	}
	return fmt.Sprintf("payload base %d offset %d len %d", p.Base, p.Offset, p.Len)
}

// metaName names a meta key.
func metaName(k expr.MetaKey) string {
	switch k {
	case expr.MetaKeyOIFNAME:
		return "oifname"
	case expr.MetaKeyIIFNAME:
		return "iifname"
	case expr.MetaKeyBRIIIFNAME:
		return "meta ibrname"
	}
	return fmt.Sprintf("meta key %d", k)
}

// describeCmp renders "subject [op] value".
func describeCmp(subject string, mask []byte, c *expr.Cmp) string {
	op := map[expr.CmpOp]string{
		expr.CmpOpEq: "", expr.CmpOpNeq: "!= ", expr.CmpOpLt: "< ",
		expr.CmpOpLte: "<= ", expr.CmpOpGt: "> ", expr.CmpOpGte: ">= ",
	}[c.Op]
	switch {
	case (strings.HasPrefix(subject, "ip ") || subject == "arp saddr ip") && len(c.Data) == 4:
		a := netip.AddrFrom4([4]byte(c.Data))
		if mask == nil {
			return fmt.Sprintf("%s %s%v", subject, op, a)
		}
		if n, ok := prefixLen(mask); ok {
			return fmt.Sprintf("%s %s%v", subject, op, netip.PrefixFrom(a, n))
		}
	case subject == "oifname" || subject == "iifname" || subject == "meta ibrname":
		if mask == nil && len(c.Data) < 16 && !bytes.ContainsRune(c.Data, 0) {
			// A comparison of the first bytes only: a prefix.
			return fmt.Sprintf("%s %s%q", subject, op, string(c.Data)+"*")
		}
		return fmt.Sprintf("%s %s%q", subject, op, strings.TrimRight(string(c.Data), "\x00"))
	case (subject == "ether saddr" || subject == "arp saddr ether") && mask == nil && len(c.Data) == 6:
		return fmt.Sprintf("%s %s%v", subject, op, net.HardwareAddr(c.Data))
	case (subject == "ether type" || subject == "arp ptype") && mask == nil && len(c.Data) == 2:
		return fmt.Sprintf("%s %s%s", subject, op, etherTypeName(binary.BigEndian.Uint16(c.Data)))
	case subject == "arp htype" && mask == nil && len(c.Data) == 2:
		return fmt.Sprintf("%s %s%d", subject, op, binary.BigEndian.Uint16(c.Data))
	case (subject == "arp hlen" || subject == "arp plen") && mask == nil && len(c.Data) == 1:
		return fmt.Sprintf("%s %s%d", subject, op, c.Data[0])
	case subject == "ct state" && c.Op == expr.CmpOpNeq && len(mask) == 4 && isZero(c.Data):
		return "ct state " + ctStates(binary.NativeEndian.Uint32(mask))
	}
	if subject == "" {
		subject = "register"
	}
	return fmt.Sprintf("%s & %x %s%x", subject, mask, op, c.Data)
}

// etherTypeName is nft's name of an EtherType kici matches, else its
// hex value.
func etherTypeName(t uint16) string {
	switch t {
	case etherTypeIPv4:
		return "ip"
	case etherTypeARP:
		return "arp"
	}
	return fmt.Sprintf("0x%04x", t)
}

// prefixLen is the length of a contiguous IPv4 netmask.
func prefixLen(mask []byte) (int, bool) {
	if len(mask) != 4 {
		return 0, false
	}
	m := binary.BigEndian.Uint32(mask)
	n := bits.LeadingZeros32(^m)
	return n, m<<n == 0
}

// isZero reports whether b is all zero bytes.
func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ctStates names the conntrack state bits of m, comma-separated.
func ctStates(m uint32) string {
	var names []string
	for _, s := range []struct {
		bit  uint32
		name string
	}{
		{expr.CtStateBitINVALID, "invalid"}, {expr.CtStateBitESTABLISHED, "established"},
		{expr.CtStateBitRELATED, "related"}, {expr.CtStateBitNEW, "new"}, {expr.CtStateBitUNTRACKED, "untracked"},
	} {
		if m&s.bit != 0 {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, ",")
}

// describeVerdict renders a verdict.
func describeVerdict(v *expr.Verdict) string {
	switch v.Kind {
	case expr.VerdictAccept:
		return "accept"
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictJump:
		return "jump " + v.Chain
	case expr.VerdictGoto:
		return "goto " + v.Chain
	}
	return fmt.Sprintf("verdict %d", v.Kind)
}
