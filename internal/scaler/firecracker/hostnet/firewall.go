//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// ipForwardPath is the IPv4 forwarding switch of the calling thread's
// network namespace.
const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

// EnsureFirewall makes the tables' layout right (see the package doc) in
// one transaction: it creates the ip table and its forward and postrouting
// chains when missing, refills the baseline chain, removes from forward
// every rule that is not a VM's (the tail jump included) and appends one
// jump to baseline, and replaces the postrouting chain's rules with the
// masquerade rule; it creates the bridge table and its vm_ports chain when
// missing, removes from vm_ports every rule that is not a VM's and
// appends the baseline drop of kici's ports. The VMs' rules are kept,
// ahead of the jump and of the drop. Then it turns IPv4 forwarding on in
// this network namespace, so that guests are routed only once the rules
// that confine them are in place. Running it again changes nothing.
func (h *Host) EnsureFirewall(ctx context.Context) error {
	h.fwMu.Lock()
	defer h.fwMu.Unlock()
	if err := h.ensureTables(ctx); err != nil {
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

// ensureTables sends EnsureFirewall's transaction. It asks for the
// port baseline scoped to the bridge first; a kernel that cannot match
// the input bridge (no nft_meta_bridge) refuses the whole transaction
// with EOPNOTSUPP, and it is sent again with the unscoped baseline.
func (h *Host) ensureTables(ctx context.Context) error {
	what := fmt.Sprintf("ensure nftables tables ip and bridge %q", h.cfg.Table)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("%s: open nftables: %w", what, err)
	}
	defer c.CloseLasting()
	var forwardRules, portRules []*nftables.Rule
	for _, t := range []struct {
		table *nftables.Table
		chain string
		rules *[]*nftables.Rule
	}{{h.table(), chainForward, &forwardRules}, {h.bridgeTable(), chainVMPorts, &portRules}} {
		st, err := h.readTableOf(c, t.table)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if st.chains[t.chain] != nil {
			if *t.rules, err = h.rulesIn(c, t.table, t.chain); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err = h.sendEnsure(c, forwardRules, portRules, true)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// The refused transaction changed nothing, so the rules read
		// above are still the kernel's. A connection of its own keeps
		// the retry clear of whatever the refusal left unread.
		c2, cerr := nftables.New(nftables.AsLasting())
		if cerr != nil {
			return fmt.Errorf("%s: open nftables: %w", what, cerr)
		}
		defer c2.CloseLasting()
		err = h.sendEnsure(c2, forwardRules, portRules, false)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// sendEnsure builds EnsureFirewall's transaction on c and sends it.
// forwardRules and portRules are the rules forward and vm_ports hold now;
// scoped says whether the port baseline matches the bridge's name.
func (h *Host) sendEnsure(c *nftables.Conn, forwardRules, portRules []*nftables.Rule, scoped bool) error {
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

	bt := c.AddTable(h.bridgeTable())
	ports := c.AddChain(vmPortsChain(bt))
	for _, r := range portRules {
		if _, ok := vmAddrOf(r); !ok {
			_ = c.DelRule(r) // as above
		}
	}
	c.AddRule(&nftables.Rule{Table: bt, Chain: ports, Exprs: h.portBaseline(scoped), UserData: tagged(portsTag)})
	return c.Flush()
}

// tableState is what the kernel holds of the Host's table.
type tableState struct {
	exists bool
	// chains are the table's chains by name.
	chains map[string]*nftables.Chain
}

// readTable reads the ip table's existence and chains.
func (h *Host) readTable(c *nftables.Conn) (tableState, error) { return h.readTableOf(c, h.table()) }

// readTableOf reads the existence and chains of the table of t's name and
// family. It uses dumps, which answer "none" for a missing table instead
// of an error.
func (h *Host) readTableOf(c *nftables.Conn, t *nftables.Table) (tableState, error) {
	st := tableState{chains: map[string]*nftables.Chain{}}
	tables, err := c.ListTablesOfFamily(t.Family)
	if err != nil {
		return st, fmt.Errorf("list tables of family %s: %w", familyName(t.Family), err)
	}
	for _, tb := range tables {
		if tb.Name == t.Name {
			st.exists = true
		}
	}
	if !st.exists {
		return st, nil
	}
	chains, err := c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return st, fmt.Errorf("list chains of family %s: %w", familyName(t.Family), err)
	}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == t.Name {
			st.chains[ch.Name] = ch
		}
	}
	return st, nil
}

// rulesOf returns the rules of the ip table's chain, head first.
func (h *Host) rulesOf(c *nftables.Conn, chain string) ([]*nftables.Rule, error) {
	return h.rulesIn(c, h.table(), chain)
}

// rulesIn returns the rules of t's chain, head first.
func (h *Host) rulesIn(c *nftables.Conn, t *nftables.Table, chain string) ([]*nftables.Rule, error) {
	rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		return nil, fmt.Errorf("list rules of chain %s %s %s: %w", familyName(t.Family), t.Name, chain, err)
	}
	return rules, nil
}

// familyName is nft's word for the table families kici uses.
func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyBridge:
		return "bridge"
	}
	return fmt.Sprintf("family %d", f)
}
