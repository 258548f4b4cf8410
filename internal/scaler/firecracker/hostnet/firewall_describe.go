//go:build linux

package hostnet

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
)

// describe renders a rule's expressions in nft's words for the shapes
// this package writes ("ip saddr 10.0.0.2 ip daddr 10.0.0.0/8 counter
// drop"), and names any other expression by its type. Verify compares
// rules by their description, and its problems quote them.
func describe(exprs []expr.Any) string {
	var words []string
	var subject string // what the register holds: "ip saddr", "oifname", ...
	var mask []byte    // the bitwise mask applied to it, if any
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Payload:
			subject, mask = payloadName(e), nil
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

// payloadName names a payload load of the IPv4 header.
func payloadName(p *expr.Payload) string {
	if p.Base == expr.PayloadBaseNetworkHeader && p.Len == 4 {
		switch p.Offset {
		case offSaddr:
			return "ip saddr"
		case offDaddr:
			return "ip daddr"
		}
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
	case strings.HasPrefix(subject, "ip ") && len(c.Data) == 4:
		a := netip.AddrFrom4([4]byte(c.Data))
		if mask == nil {
			return fmt.Sprintf("%s %s%v", subject, op, a)
		}
		if n, ok := prefixLen(mask); ok {
			return fmt.Sprintf("%s %s%v", subject, op, netip.PrefixFrom(a, n))
		}
	case subject == "oifname" || subject == "iifname":
		return fmt.Sprintf("%s %s%q", subject, op, strings.TrimRight(string(c.Data), "\x00"))
	case subject == "ct state" && c.Op == expr.CmpOpNeq && len(mask) == 4 && isZero(c.Data):
		return "ct state " + ctStates(binary.NativeEndian.Uint32(mask))
	}
	if subject == "" {
		subject = "register"
	}
	return fmt.Sprintf("%s & %x %s%x", subject, mask, op, c.Data)
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
