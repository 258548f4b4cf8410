//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// tableRE is an nftables table name kici accepts (the config file's rule).
var tableRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)

// Config says which bridge, address pool and nftables table a Host
// manages. Every field is required; the defaults of the configuration file
// (kici-br0, 10.0.0.0/24, 10.0.0.1, kici) are filled in by its parser.
type Config struct {
	// Bridge is the name of the host bridge the VMs' TAPs are enslaved
	// to, e.g. "kici-br0": 1 to 15 bytes (IFNAMSIZ less the NUL), no '/',
	// ':' or white space, and not a name of the TAP pattern.
	Bridge string
	// Gateway is the bridge's IPv4 address and the guests' default route.
	// It is inside Prefix and neither its network nor its broadcast
	// address.
	Gateway netip.Addr
	// Prefix is the VMs' IPv4 address pool, given by its network address
	// (10.0.0.0/24, not 10.0.0.7/24), /30 or wider so that it holds the
	// gateway and at least one guest. The bridge carries
	// Gateway/Prefix.Bits().
	Prefix netip.Prefix
	// HostPorts are the TCP ports of the host itself that guests may reach
	// (the orchestrator's); DNS on the gateway is allowed too, every other
	// connection from the bridge to the host is refused.
	HostPorts []uint16
	// Table names the two nftables tables: of family ip, with the
	// forward, baseline, postrouting and input chains, and of family
	// bridge, with the vm_ports chain. A letter, then up to 31 letters,
	// digits, '-' or '_'. They belong to this Host; they are never
	// deleted.
	Table string
}

// Validate reports the first field of c that is unusable, naming it.
func (c Config) Validate() error {
	if err := checkIfName(c.Bridge); err != nil {
		return fmt.Errorf("hostnet config: Bridge: %w", err)
	}
	if IsTapName(c.Bridge) || c.Bridge == probeTap {
		return fmt.Errorf("hostnet config: Bridge: %q is a TAP name of kici's pattern %s, which the sweeps would treat as a VM's TAP", c.Bridge, TapPattern)
	}
	if !c.Prefix.IsValid() || !c.Prefix.Addr().Is4() {
		return fmt.Errorf("hostnet config: Prefix: %v is not an IPv4 prefix", c.Prefix)
	}
	if c.Prefix.Masked() != c.Prefix {
		return fmt.Errorf("hostnet config: Prefix: %v has host bits set; the pool is %v", c.Prefix, c.Prefix.Masked())
	}
	if c.Prefix.Bits() > 30 {
		return fmt.Errorf("hostnet config: Prefix: %v is too small: a pool needs room for the gateway and a guest (/30 or wider)", c.Prefix)
	}
	if !c.Gateway.Is4() {
		return fmt.Errorf("hostnet config: Gateway: %v is not an IPv4 address", c.Gateway)
	}
	if !c.Prefix.Contains(c.Gateway) {
		return fmt.Errorf("hostnet config: Gateway: %v is not inside the pool %v", c.Gateway, c.Prefix)
	}
	if c.Gateway == c.Prefix.Addr() || c.Gateway == broadcast(c.Prefix) {
		return fmt.Errorf("hostnet config: Gateway: %v is the network or broadcast address of %v", c.Gateway, c.Prefix)
	}
	if !tableRE.MatchString(c.Table) {
		return fmt.Errorf("hostnet config: Table: invalid nftables table name %q: use a letter, then up to 31 letters, digits, '-' or '_'", c.Table)
	}
	return nil
}

// checkIfName applies the kernel's rules for an interface name.
func checkIfName(name string) error {
	switch {
	case name == "":
		return errors.New("empty interface name")
	case len(name) > 15:
		return fmt.Errorf("interface name %q is %d bytes, longer than 15", name, len(name))
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not allowed", name)
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fmt.Errorf("interface name %q contains '/', ':' or white space", name)
	}
	return nil
}

// broadcast is the last address of p.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

// Host manages the bridge, TAPs and nftables table of one Config in the
// calling process's network namespace. Make one with New; a *Host is safe
// for concurrent use.
type Host struct {
	cfg Config

	// fwMu serializes the firewall methods, each of which reads rule
	// handles and then sends a transaction built from them.
	fwMu sync.Mutex
	// bridgeMu serializes EnsureBridge and ProbeIsolation.
	bridgeMu sync.Mutex
	// portsMu guards ports, the host's TCP ports open to guests
	// (Config.HostPorts, then SetHostPorts).
	portsMu sync.Mutex
	ports   []uint16
}

// New returns a Host for cfg after validating it. It touches nothing on
// the host.
func New(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, ports: slices.Clone(cfg.HostPorts)}, nil
}

// hostPorts returns the TCP ports of the host open to guests.
func (h *Host) hostPorts() []uint16 {
	h.portsMu.Lock()
	defer h.portsMu.Unlock()
	return slices.Clone(h.ports)
}

// SetHostPorts replaces the TCP ports of the host that guests may reach
// and rewrites the input chain (EnsureFirewall). The VMs' rules are kept.
func (h *Host) SetHostPorts(ctx context.Context, ports []uint16) error {
	h.portsMu.Lock()
	h.ports = slices.Clone(ports)
	h.portsMu.Unlock()
	return h.EnsureFirewall(ctx)
}

// Config returns the configuration h was made with.
func (h *Host) Config() Config { return h.cfg }
