//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// EnsureBridge makes the configured bridge ready: it creates it when
// absent, or adopts the link of that name when present, which must then
// be a bridge. It adds Gateway/Prefix.Bits() when the bridge lacks it and
// sets the bridge up. An adopted bridge that has the gateway with another
// prefix length is an error: the pool's routes would be wrong, and kici
// does not remove an address it did not add. Running it again changes
// nothing.
func (h *Host) EnsureBridge(ctx context.Context) error {
	h.bridgeMu.Lock()
	defer h.bridgeMu.Unlock()
	name := h.cfg.Bridge
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ensure bridge %q: %w", name, err)
	}
	br, err := h.bridge()
	if err != nil {
		return fmt.Errorf("ensure bridge %q: %w", name, err)
	}
	if br == nil {
		err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}})
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("create bridge %q: %w", name, err)
		}
		// Made by us, or by someone who just beat us to it: adopt it.
		if br, err = h.bridge(); err != nil {
			return fmt.Errorf("ensure bridge %q: %w", name, err)
		}
		if br == nil {
			return fmt.Errorf("create bridge %q: it is gone right after its creation", name)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ensure bridge %q: %w", name, err)
	}
	if err := h.ensureGateway(br); err != nil {
		return err
	}
	// A bridge without a MAC of its own takes the lowest of its ports',
	// so it changes as TAPs come and go, and every guest's ARP entry for
	// the gateway goes stale: frames to the old MAC are lost until the
	// guest probes again, seconds later (long enough to break an agent's
	// connection). A MAC set once stays.
	if mac := BridgeMAC(h.cfg.Gateway); br.Attrs().HardwareAddr.String() != mac.String() {
		if err := netlink.LinkSetHardwareAddr(br, mac); err != nil {
			return fmt.Errorf("set the MAC of bridge %q: %w", name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ensure bridge %q: %w", name, err)
	}
	if br.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(br); err != nil {
			return fmt.Errorf("set bridge %q up: %w", name, err)
		}
	}
	return nil
}

// BridgeMAC is the bridge's fixed MAC: 06:00:AC and the gateway's last
// three octets (locally administered, unicast), the scheme guests' MACs
// follow for their addresses; the gateway is never a guest's.
func BridgeMAC(gateway netip.Addr) net.HardwareAddr {
	b := gateway.As4()
	return net.HardwareAddr{0x06, 0x00, 0xAC, b[1], b[2], b[3]}
}

// bridge returns the configured bridge, nil if no link has its name, or
// an error if the link of that name is not a bridge.
func (h *Host) bridge() (netlink.Link, error) {
	l, err := linkByName(h.cfg.Bridge)
	if err != nil {
		return nil, fmt.Errorf("look up link %q: %w", h.cfg.Bridge, err)
	}
	if l == nil {
		return nil, nil
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("link %q is a %s, not a bridge: remove or rename it, or configure another bridge name", h.cfg.Bridge, l.Type())
	}
	return l, nil
}

// gatewayAddr is the bridge's address as netlink wants it.
func (h *Host) gatewayAddr() *netlink.Addr {
	gw := h.cfg.Gateway.As4()
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(gw[:]), Mask: net.CIDRMask(h.cfg.Prefix.Bits(), 32)}}
}

// gatewayState says whether br carries the gateway: with the pool's
// prefix length (ok), with another one (other, e.g. 10.0.0.1/16), or not
// at all (neither).
func (h *Host) gatewayState(br netlink.Link) (ok bool, other []netip.Prefix, err error) {
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(br, netlink.FAMILY_V4) })
	if err != nil {
		return false, nil, fmt.Errorf("list addresses of bridge %q: %w", h.cfg.Bridge, err)
	}
	for _, a := range addrs {
		ip, okIP := netip.AddrFromSlice(a.IP.To4())
		if !okIP || ip != h.cfg.Gateway {
			continue
		}
		bits, _ := a.Mask.Size()
		if bits == h.cfg.Prefix.Bits() {
			return true, nil, nil
		}
		other = append(other, netip.PrefixFrom(ip, bits))
	}
	return false, other, nil
}

// ensureGateway adds the gateway address to br unless it is there.
func (h *Host) ensureGateway(br netlink.Link) error {
	want := netip.PrefixFrom(h.cfg.Gateway, h.cfg.Prefix.Bits())
	ok, other, err := h.gatewayState(br)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	if len(other) > 0 {
		return fmt.Errorf("ensure bridge %q: it has %v, not %v: remove that address so that the bridge's subnet is the pool %v", h.cfg.Bridge, other[0], want, h.cfg.Prefix)
	}
	if err := netlink.AddrAdd(br, h.gatewayAddr()); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("add address %v to bridge %q: %w", want, h.cfg.Bridge, err)
	}
	return nil
}
