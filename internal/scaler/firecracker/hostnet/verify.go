//go:build linux

package hostnet

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
)

// Problem is one way the host differs from what its Config needs.
type Problem struct {
	// Object names what is wrong, e.g. `bridge "kici-br0"` or
	// `nftables chain ip kici forward`.
	Object string
	// Miss says what is wrong with it.
	Miss string
	// Fix says what repairs it.
	Fix string
	// Provisioned is true when EnsureBridge and EnsureFirewall repair it;
	// false when an operator must act (or, for a TAP, its VM be
	// destroyed).
	Provisioned bool
}

// String renders p in one line.
func (p Problem) String() string { return p.Object + ": " + p.Miss + "; fix: " + p.Fix }

// bridgeFix and firewallFix say what repairs a problem that
// provisioning repairs: "EnsureBridge sets it up (...)".
func bridgeFix(does string) string   { return "EnsureBridge " + does + provisionNote }
func firewallFix(does string) string { return "EnsureFirewall " + does + provisionNote }

const provisionNote = " (the orchestrator runs it at start-up under autoProvisionHost)"

// Verify reports how the host differs from what h's Config needs; none
// means healthy: the bridge exists, is a bridge, is administratively up
// (its operational state may be down while it has no ports), and has
// Gateway/Prefix.Bits(); every kici TAP enslaved to it has bridge port
// isolation on; IPv4 forwarding is on; the ip table has its forward
// chain ending in exactly one jump to a baseline chain of the expected
// rules, a postrouting chain with the masquerade rule and an input chain
// of the expected rules; and the bridge table has its vm_ports chain
// ending in exactly one drop of kici's ports. A part that cannot be read
// is a problem too. Verify changes nothing.
func (h *Host) Verify(ctx context.Context) []Problem {
	var ps []Problem
	for _, check := range []func() []Problem{h.verifyBridge, h.verifyForwarding, h.verifyFirewall} {
		if err := ctx.Err(); err != nil {
			return append(ps, Problem{Object: "host network", Miss: "verification stopped: " + err.Error(), Fix: "verify again"})
		}
		ps = append(ps, check()...)
	}
	return ps
}

// verifyBridge checks the bridge, its address and its TAPs.
func (h *Host) verifyBridge() []Problem {
	obj := fmt.Sprintf("bridge %q", h.cfg.Bridge)
	want := fmt.Sprintf("%v/%d", h.cfg.Gateway, h.cfg.Prefix.Bits())
	l, err := linkByName(h.cfg.Bridge)
	switch {
	case err != nil:
		return []Problem{{Object: obj, Miss: "cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"}}
	case l == nil:
		return []Problem{{Object: obj, Miss: "does not exist", Fix: bridgeFix("creates it with " + want), Provisioned: true}}
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return []Problem{{Object: obj, Miss: fmt.Sprintf("is a %s link, not a bridge", l.Type()), Fix: "remove or rename that link, or configure another bridge name"}}
	}
	var ps []Problem
	if l.Attrs().Flags&net.FlagUp == 0 {
		ps = append(ps, Problem{Object: obj, Miss: "is down", Fix: bridgeFix("sets it up"), Provisioned: true})
	}
	switch ok, other, err := h.gatewayState(l); {
	case err != nil:
		ps = append(ps, Problem{Object: obj, Miss: "addresses cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"})
	case len(other) > 0 && !ok:
		ps = append(ps, Problem{Object: obj, Miss: fmt.Sprintf("has %v, not %s", other[0], want), Fix: fmt.Sprintf("remove %v from the bridge; then EnsureBridge adds %s", other[0], want)})
	case !ok:
		ps = append(ps, Problem{Object: obj, Miss: "lacks its address " + want, Fix: bridgeFix("adds it"), Provisioned: true})
	}
	links, err := dump(netlink.LinkList)
	if err != nil {
		return append(ps, Problem{Object: obj, Miss: "ports cannot be listed: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"})
	}
	for _, t := range tapsOf(l, links) {
		tobj := fmt.Sprintf("tap %q", t.Attrs().Name)
		switch on, err := isolated(t); {
		case err != nil:
			ps = append(ps, Problem{Object: tobj, Miss: "bridge port flags cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"})
		case !on:
			ps = append(ps, Problem{Object: tobj, Miss: "bridge port isolation is off, so its guest can reach the other guests on " + h.cfg.Bridge, Fix: "destroy its VM (kici creates every TAP isolated)"})
		}
	}
	return ps
}

// verifyForwarding checks IPv4 forwarding.
func (h *Host) verifyForwarding() []Problem {
	obj := "sysctl net.ipv4.ip_forward"
	b, err := os.ReadFile(ipForwardPath)
	switch {
	case err != nil:
		return []Problem{{Object: obj, Miss: "cannot be read: " + err.Error(), Fix: "check that /proc is mounted"}}
	case strings.TrimSpace(string(b)) != "1":
		return []Problem{{Object: obj, Miss: "is off, so guests are not routed", Fix: firewallFix("turns it on"), Provisioned: true}}
	}
	return nil
}

// verifyFirewall checks both tables' chains and kici's own rules in them.
func (h *Host) verifyFirewall() []Problem {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return []Problem{{Object: fmt.Sprintf("nftables tables ip and bridge %s", h.cfg.Table), Miss: "cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"}}
	}
	defer c.CloseLasting()
	ps := h.verifyTable(c, h.table(), "so guests are not confined", []chainCheck{
		{forwardChain(nil), checkForward},
		{baselineChain(nil), func(r []*nftables.Rule) string { return checkRules(r, h.baselineRules()) }},
		{postroutingChain(nil), func(r []*nftables.Rule) string { return checkRules(r, [][]expr.Any{h.masqRule()}) }},
		{inputChain(nil), func(r []*nftables.Rule) string { return checkRules(r, h.hostRules()) }},
	})
	return append(ps, h.verifyTable(c, h.bridgeTable(), "so guests can send with other VMs' addresses and poison the host's ARP table", []chainCheck{
		{vmPortsChain(nil), func(r []*nftables.Rule) string {
			return checkTail(r, h.portBaselines(), "so frames of a TAP without a VM's rules pass")
		}},
	})...)
}

// chainCheck is a chain a table must have and what to check of its rules:
// check says what is wrong with them, "" when nothing.
type chainCheck struct {
	want  *nftables.Chain
	check func([]*nftables.Rule) string
}

// verifyTable checks that the table of t's name and family exists, and
// each chain of checks in it; absent says what a missing table costs.
func (h *Host) verifyTable(c *nftables.Conn, t *nftables.Table, absent string, checks []chainCheck) []Problem {
	fam := familyName(t.Family)
	tobj := fmt.Sprintf("nftables table %s %s", fam, t.Name)
	cobj := func(chain string) string { return fmt.Sprintf("nftables chain %s %s %s", fam, t.Name, chain) }
	unreadable := func(obj string, err error) Problem {
		return Problem{Object: obj, Miss: "cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"}
	}
	st, err := h.readTableOf(c, t)
	if err != nil {
		return []Problem{unreadable(tobj, err)}
	}
	if !st.exists {
		return []Problem{{Object: tobj, Miss: "does not exist, " + absent, Fix: firewallFix("creates it"), Provisioned: true}}
	}
	var ps []Problem
	for _, cc := range checks {
		want := cc.want
		got := st.chains[want.Name]
		if got == nil {
			ps = append(ps, Problem{Object: cobj(want.Name), Miss: "does not exist", Fix: firewallFix("creates it"), Provisioned: true})
			continue
		}
		if g, w := chainKind(got), chainKind(want); g != w {
			p := Problem{Object: cobj(want.Name), Miss: fmt.Sprintf("is %s, not %s", g, w), Fix: "delete that chain, then provision the host"}
			if samePolicyless(got, want) { // a base chain's policy can be changed in place
				p.Fix, p.Provisioned = firewallFix("resets its policy"), true
			}
			ps = append(ps, p)
			continue
		}
		rules, err := h.rulesIn(c, t, want.Name)
		if err != nil {
			ps = append(ps, unreadable(cobj(want.Name), err))
			continue
		}
		if miss := cc.check(rules); miss != "" {
			ps = append(ps, Problem{Object: cobj(want.Name), Miss: miss, Fix: firewallFix("rewrites kici's rules and keeps the VMs'"), Provisioned: true})
		}
	}
	return ps
}

// chainKind renders a chain's type, hook, priority and policy.
func chainKind(c *nftables.Chain) string {
	if c.Hooknum == nil {
		return "a regular chain"
	}
	hook := map[nftables.ChainHook]string{
		*nftables.ChainHookPrerouting: "prerouting", *nftables.ChainHookInput: "input", *nftables.ChainHookForward: "forward",
		*nftables.ChainHookOutput: "output", *nftables.ChainHookPostrouting: "postrouting",
	}[*c.Hooknum]
	if hook == "" {
		hook = fmt.Sprint(*c.Hooknum)
	}
	s := fmt.Sprintf("type %s hook %s priority %d", c.Type, hook, *c.Priority)
	if c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop {
		s += " policy drop"
	} else {
		s += " policy accept"
	}
	return s
}

// samePolicyless reports whether a and b are base chains that differ at
// most in their policy.
func samePolicyless(a, b *nftables.Chain) bool {
	return a.Hooknum != nil && b.Hooknum != nil && a.Type == b.Type && *a.Hooknum == *b.Hooknum && *a.Priority == *b.Priority
}

// checkForward says what is wrong with forward's rules: the last must be
// the only jump to baseline.
func checkForward(rules []*nftables.Rule) string {
	return checkTail(rules, []string{describe(jumpRule())}, "so the baseline is never evaluated")
}

// checkTail says what is wrong with a chain whose last rule must be the
// only one described as one of want; none says what its absence costs.
func checkTail(rules []*nftables.Rule, want []string, none string) string {
	tails := 0
	for _, r := range rules {
		if slices.Contains(want, describe(r.Exprs)) {
			tails++
		}
	}
	switch {
	case tails == 0:
		return "has no rule " + want[0] + ", " + none
	case tails > 1:
		return fmt.Sprintf("has %d rules %s, want one", tails, want[0])
	case !slices.Contains(want, describe(rules[len(rules)-1].Exprs)):
		return fmt.Sprintf("ends with %q, not %q, so some rules are evaluated after it", describe(rules[len(rules)-1].Exprs), want[0])
	}
	return ""
}

// checkRules says how got differs from want, rule by rule.
func checkRules(got []*nftables.Rule, want [][]expr.Any) string {
	for i, w := range want {
		if i >= len(got) {
			return fmt.Sprintf("lacks rule %d %q", i+1, describe(w))
		}
		if g, w := describe(got[i].Exprs), describe(w); g != w {
			return fmt.Sprintf("rule %d is %q, want %q", i+1, g, w)
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("has %d rules, want %d: rule %d is %q", len(got), len(want), len(want)+1, describe(got[len(want)].Exprs))
	}
	return ""
}
