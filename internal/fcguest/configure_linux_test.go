package fcguest

import (
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/testsvc"
)

// The test binary runs in a network namespace of its own.

func TestMain(m *testing.M) { testsvc.MainInNetNS(m) }

// TestConfigureMovesTheTemplatesAddress: an interface with a template's
// MAC, address and route is moved to the restore's, and nothing of the
// template's address is left; a second call changes nothing.
func TestConfigureMovesTheTemplatesAddress(t *testing.T) {
	testsvc.NetNS(t)
	tmplMAC, _ := net.ParseMAC("06:00:ac:09:00:05")
	// A TAP, as a fake guest's eth0 is (a real guest's is virtio-net).
	link := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_NO_PI}
	if err := netlink.LinkAdd(link); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetHardwareAddr(link, tmplMAC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(link) })
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	tmpl, _ := netlink.ParseAddr("10.9.0.5/24")
	if err := netlink.AddrAdd(link, tmpl); err != nil {
		t.Fatal(err)
	}
	gw := net.ParseIP("10.9.0.1").To4()
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw}); err != nil {
		t.Fatal(err)
	}

	n := Network{Interface: "eth0", Address: "10.9.0.7/24", Gateway: "10.9.0.1", MAC: "06:00:AC:09:00:07"}
	for range 2 {
		if err := Configure(n); err != nil {
			t.Fatal(err)
		}
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Attrs().HardwareAddr.String(); got != "06:00:ac:09:00:07" {
			t.Errorf("MAC %s, want 06:00:ac:09:00:07", got)
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		if len(addrs) != 1 || addrs[0].IPNet.String() != "10.9.0.7/24" {
			t.Errorf("addresses %v, want only 10.9.0.7/24", addrs)
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		def := 0
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				def++
				if !r.Gw.Equal(gw) {
					t.Errorf("default route via %s, want %s", r.Gw, gw)
				}
			}
		}
		if def != 1 {
			t.Errorf("%d default routes on eth0, want 1: %v", def, routes)
		}
	}
}

func TestConfigureNamesAMissingInterface(t *testing.T) {
	testsvc.NetNS(t)
	err := Configure(Network{Interface: "eth9", Address: "10.9.0.7/24", Gateway: "10.9.0.1", MAC: "06:00:AC:09:00:07"})
	if err == nil || !strings.Contains(err.Error(), "eth9") {
		t.Fatalf("error %v, want one naming eth9", err)
	}
}
