//go:build linux

package hostnet

import (
	"context"
	"fmt"
	"net"
	"os"
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
// isolation on; IPv4 forwarding is on; and the table has its forward
// chain ending in exactly one jump to a baseline chain of the expected
// rules, and a postrouting chain with the masquerade rule. A part that
// cannot be read is a problem too. Verify changes nothing.
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

// verifyFirewall checks the table's chains and kici's own rules in them.
func (h *Host) verifyFirewall() []Problem {
	tobj := fmt.Sprintf("nftables table ip %s", h.cfg.Table)
	cobj := func(chain string) string { return fmt.Sprintf("nftables chain ip %s %s", h.cfg.Table, chain) }
	unreadable := func(obj string, err error) []Problem {
		return []Problem{{Object: obj, Miss: "cannot be read: " + err.Error(), Fix: "run as root or with CAP_NET_ADMIN"}}
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return unreadable(tobj, err)
	}
	defer c.CloseLasting()
	st, err := h.readTable(c)
	if err != nil {
		return unreadable(tobj, err)
	}
	if !st.exists {
		return []Problem{{Object: tobj, Miss: "does not exist, so guests are not confined", Fix: firewallFix("creates it"), Provisioned: true}}
	}
	missing := func(chain string) Problem {
		return Problem{Object: cobj(chain), Miss: "does not exist", Fix: firewallFix("creates it"), Provisioned: true}
	}
	var ps []Problem
	for _, want := range []*nftables.Chain{forwardChain(nil), baselineChain(nil), postroutingChain(nil), inputChain(nil)} {
		got := st.chains[want.Name]
		if got == nil {
			ps = append(ps, missing(want.Name))
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
		rules, err := h.rulesOf(c, want.Name)
		if err != nil {
			ps = append(ps, unreadable(cobj(want.Name), err)...)
			continue
		}
		var miss string
		switch want.Name {
		case chainForward:
			miss = checkForward(rules)
		case chainBaseline:
			miss = checkRules(rules, h.baselineRules())
		case chainPostrouting:
			miss = checkRules(rules, [][]expr.Any{h.masqRule()})
		case chainInput:
			miss = checkRules(rules, h.hostRules())
		}
		if miss != "" {
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
	want := describe(jumpRule())
	jumps := 0
	for _, r := range rules {
		if describe(r.Exprs) == want {
			jumps++
		}
	}
	switch {
	case jumps == 0:
		return "has no rule " + want + ", so the baseline is never evaluated"
	case jumps > 1:
		return fmt.Sprintf("has %d rules %s, want one", jumps, want)
	case describe(rules[len(rules)-1].Exprs) != want:
		return fmt.Sprintf("ends with %q, not %q, so some rules are evaluated after the baseline", describe(rules[len(rules)-1].Exprs), want)
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
