//go:build linux

package hostnet

import (
	"context"
	"fmt"
	"os"

	"github.com/google/nftables"
)

// ipForwardPath is the IPv4 forwarding switch of the calling thread's
// network namespace.
const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

// EnsureFirewall makes the table's layout right (see the package doc) in
// one transaction: it creates the table and the forward and postrouting
// chains when missing, refills the baseline chain, removes from forward
// every rule that is not a VM's (the tail jump included) and appends one
// jump to baseline, and replaces the postrouting chain's rules with the
// masquerade rule. The VMs' rules are kept, ahead of the jump. Then it
// turns IPv4 forwarding on in this network namespace, so that guests are
// routed only once the rules that confine them are in place. Running it
// again changes nothing.
func (h *Host) EnsureFirewall(ctx context.Context) error {
	h.fwMu.Lock()
	defer h.fwMu.Unlock()
	if err := h.ensureTable(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("enable ip forwarding: %w", err)
	}
	if err := os.WriteFile(ipForwardPath, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable ip forwarding: %w", err)
	}
	return nil
}

// ensureTable sends EnsureFirewall's transaction.
func (h *Host) ensureTable(ctx context.Context) error {
	what := fmt.Sprintf("ensure nftables table ip %q", h.cfg.Table)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("%s: open nftables: %w", what, err)
	}
	defer c.CloseLasting()
	st, err := h.readTable(c)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var forwardRules []*nftables.Rule
	if st.chains[chainForward] != nil {
		if forwardRules, err = h.rulesOf(c, chainForward); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}

	t := c.AddTable(h.table())
	fwd := c.AddChain(forwardChain(t))
	base := c.AddChain(baselineChain(t))
	c.FlushChain(base)
	for _, e := range h.baselineRules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: base, Exprs: e, UserData: tagged(baselineTag)})
	}
	for _, r := range forwardRules {
		if _, ok := vmAddrOf(r); !ok {
			_ = c.DelRule(r) // fails only for handle 0, which the kernel never reports
		}
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: jumpRule(), UserData: tagged(jumpTag)})
	post := c.AddChain(postroutingChain(t))
	c.FlushChain(post)
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: h.masqRule(), UserData: tagged(masqTag)})
	in := c.AddChain(inputChain(t))
	c.FlushChain(in)
	for _, e := range h.hostRules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: e, UserData: tagged(hostTag)})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// tableState is what the kernel holds of the Host's table.
type tableState struct {
	exists bool
	// chains are the table's chains by name.
	chains map[string]*nftables.Chain
}

// readTable reads the table's existence and chains. It uses dumps, which
// answer "none" for a missing table instead of an error.
func (h *Host) readTable(c *nftables.Conn) (tableState, error) {
	st := tableState{chains: map[string]*nftables.Chain{}}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return st, fmt.Errorf("list tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == h.cfg.Table {
			st.exists = true
		}
	}
	if !st.exists {
		return st, nil
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return st, fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == h.cfg.Table {
			st.chains[ch.Name] = ch
		}
	}
	return st, nil
}

// rulesOf returns the rules of the table's chain, head first.
func (h *Host) rulesOf(c *nftables.Conn, chain string) ([]*nftables.Rule, error) {
	t := h.table()
	rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		return nil, fmt.Errorf("list rules of chain %q: %w", chain, err)
	}
	return rules, nil
}
