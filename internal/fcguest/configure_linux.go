package fcguest

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Configure moves a restored guest's interface to its own MAC and
// address (the kernel booted the template's, which every restore of the
// snapshot shares): the MAC first, then every other IPv4 address
// removed, then the address, then the default route. Each step is skipped
// when already so, so a cold-booted guest that got the same values on its
// kernel command line sees no change.
func Configure(n Network) error {
	link, err := netlink.LinkByName(n.Interface)
	if err != nil {
		return fmt.Errorf("find %s: %w", n.Interface, err)
	}
	mac, _ := net.ParseMAC(n.MAC)
	if link.Attrs().HardwareAddr.String() != mac.String() {
		if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("set the MAC of %s: %w", n.Interface, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring %s up: %w", n.Interface, err)
	}
	want := netip.MustParsePrefix(n.Address)
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list the addresses of %s: %w", n.Interface, err)
	}
	// Other addresses go first: deleting a primary address deletes the
	// secondaries of its subnet with it, and the new one would be one.
	have := false
	for _, a := range addrs {
		p, _ := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if p == want.Addr() && ones == want.Bits() {
			have = true
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return fmt.Errorf("remove the template's address %s from %s: %w", a.IPNet, n.Interface, err)
		}
	}
	if !have {
		ipn := &net.IPNet{IP: want.Addr().AsSlice(), Mask: net.CIDRMask(want.Bits(), 32)}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipn}); err != nil {
			return fmt.Errorf("add %s to %s: %w", want, n.Interface, err)
		}
	}
	gw := netip.MustParseAddr(n.Gateway)
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice(), Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route via %s on %s: %w", gw, n.Interface, err)
	}
	return nil
}
