// Package fcguest holds what the firecracker backend and the kici-agent in
// a microVM agree on for a warm start from a snapshot: the MMDS keys of a
// template VM and of a restored one, and the line the template's agent
// prints on the serial console when it is ready to be snapshotted.
//
// A template VM's MMDS holds only TemplateKey. Its agent prints
// ReadyMarker and polls MMDS until an identity appears (the
// kici-orchestrator-url key). The host pauses and snapshots the VM at the
// marker, so every restore resumes inside that poll; the host then fills
// MMDS with the restore's identity and its Network, and the agent moves
// the guest's interface to the restore's own address before it dials.
package fcguest

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
)

// TemplateKey is "1" in the meta-data of a template VM.
const TemplateKey = "kici-warm-template"

// NetworkKey holds the Network of a restored VM, whose kernel still has
// the template's address.
const NetworkKey = "kici-network"

// ReadyMarker is the line (without its newline) a template VM's agent
// prints once it waits for an identity.
const ReadyMarker = "kici-agent: warm-start template ready; waiting for an identity in MMDS"

// Network is the guest interface configuration of a restored VM.
type Network struct {
	// Interface is the guest's interface, eth0.
	Interface string `json:"interface"`
	// Address is the guest's address with its prefix length (10.0.0.7/24).
	Address string `json:"address"`
	// Gateway is the default route.
	Gateway string `json:"gateway"`
	// MAC is the interface's hardware address (every restore of one
	// snapshot starts with the template's).
	MAC string `json:"mac"`
}

// ifaceName is a guest interface name a Network may name.
var ifaceName = regexp.MustCompile(`^[a-z][a-z0-9]{0,14}$`)

// Validate checks n: an interface name, an IPv4 address with a prefix
// length of 1-30, a gateway that is another address of that prefix, a
// unicast MAC. The error names the bad field.
func (n Network) Validate() error {
	if !ifaceName.MatchString(n.Interface) {
		return fmt.Errorf("interface %q is not an interface name", n.Interface)
	}
	p, err := netip.ParsePrefix(n.Address)
	if err != nil || !p.Addr().Is4() || p.Bits() < 1 || p.Bits() > 30 {
		return fmt.Errorf("address %q is not an IPv4 address with a prefix length of 1-30", n.Address)
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !gw.Is4() || !p.Masked().Contains(gw) || gw == p.Addr() {
		return fmt.Errorf("gateway %q is not another IPv4 address of %s", n.Gateway, p.Masked())
	}
	mac, err := net.ParseMAC(n.MAC)
	if err != nil || len(mac) != 6 || mac[0]&1 != 0 {
		return fmt.Errorf("mac %q is not a unicast Ethernet address", n.MAC)
	}
	return nil
}
