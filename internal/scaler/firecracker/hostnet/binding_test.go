//go:build linux

package hostnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/testsvc"
)

// TestTrafficBinding sends real frames from two guests, each a namespace
// behind a veth named like a VM's TAP, isolated on the bridge and bound by
// AllowVM to its own MAC and address:
//
//	guest A ns  10.<n>.0.2 06:00:ac:..:02 ──kici-<n>02── bridge ktbr<n> 10.<n>.0.1
//	guest B ns  10.<n>.0.3 06:00:ac:..:03 ──kici-<n>03──┘      (test's ns)
//
// A and B reach the gateway; then A claims B's address by ARP, sends
// with B's address, and with B's MAC, and none of it gets through or
// changes what the host believes of B. Last, with the bridge table's
// rules flushed, the same ARP and connection from A succeed: the
// assertions before could fail.
//
// It does not run in parallel: on a kernel without nft_meta_bridge each
// test Host's port baseline drops the frames of every kici- port in the
// namespace, so it runs while no other test has tables (Go runs it
// before any parallel test resumes).
func TestTrafficBinding(t *testing.T) {
	testsvc.NetNS(t)
	h, n := testHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	provision(t, h)
	ln, err := net.Listen("tcp", netip.AddrPortFrom(h.cfg.Gateway, 0).String())
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := h.cfg
	cfg.HostPorts = []uint16{uint16(ln.Addr().(*net.TCPAddr).Port)}
	if h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	provision(t, h)
	accepted := acceptAll(t, ln)
	br := mustLink(t, h.cfg.Bridge)
	bridgeMAC := BridgeMAC(h.cfg.Gateway)

	a, b := guestVM(n, 2), guestVM(n, 3)
	nsA, nsB := newGuestNetNS(t), newGuestNetNS(t)
	for _, g := range []struct {
		vm VMRules
		ns netns.NsHandle
	}{{a, nsA}, {b, nsB}} {
		plug(t, g.vm.Tap, br.Attrs().Index, netip.Prefix{}, g.ns, netip.PrefixFrom(g.vm.Addr, 24), h.cfg.Gateway)
		if err := netlink.LinkSetIsolated(mustLink(t, g.vm.Tap), true); err != nil {
			t.Fatalf("isolate %s: %v", g.vm.Tap, err)
		}
		setGuestMAC(t, g.ns, g.vm.Tap+"p", g.vm.MAC)
		if err := h.AllowVM(ctx, g.vm); err != nil {
			t.Fatalf("AllowVM %v: %v", g.vm.Addr, err)
		}
	}
	peerA := a.Tap + "p"
	gotRemote := func(step string, want netip.Addr) {
		t.Helper()
		select {
		case remote := <-accepted:
			if !strings.HasPrefix(remote, want.String()+":") {
				t.Fatalf("%s: the gateway accepted %s, want %v", step, remote, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the gateway accepted nothing", step)
		}
	}
	noRemote := func(step string) {
		t.Helper()
		select {
		case remote := <-accepted:
			t.Fatalf("%s: the gateway accepted %s", step, remote)
		default:
		}
	}
	wantNeigh := func(step string, addr netip.Addr, want net.HardwareAddr) {
		t.Helper()
		if got := hostNeigh(t, br, addr); !bytes.Equal(got, want) {
			t.Fatalf("%s: the host's neighbour entry of %v is %v, want %v", step, addr, got, want)
		}
	}

	// Each guest, from its own MAC and address, reaches the gateway, and
	// the host learns them.
	dialFrom(t, ctx, nsA, ln.Addr().String()).Close()
	gotRemote("A from its own address", a.Addr)
	dialFrom(t, ctx, nsB, ln.Addr().String()).Close()
	gotRemote("B from its own address", b.Addr)
	wantNeigh("after the guests connected", a.Addr, a.MAC)
	wantNeigh("after the guests connected", b.Addr, b.MAC)
	for _, typ := range []string{"ip", "arp"} {
		if got := portAccepts(t, h, a, typ); got == 0 {
			t.Fatalf("A's ether type %s rule counted no frame", typ)
		}
	}
	if ports := fdbPorts(t, br, b.MAC); len(ports) != 1 || ports[0] != b.Tap {
		t.Fatalf("the bridge has B's MAC on ports %q, want [%s]", ports, b.Tap)
	}

	// A sends, from its own MAC and address, what no rule lets through:
	// an IPv6 packet, and an IPv4 one in a VLAN tag.
	step := "A sending IPv6 and VLAN-tagged IPv4"
	drops, ips := portDrops(t, h), portAccepts(t, h, a, "ip")
	ipv6 := etherFrame(bridgeMAC, a.MAC, 0x86dd, make([]byte, 40))
	ipv6[14] = 0x60 // version 6
	sendFrame(t, nsA, peerA, ipv6)
	tagged := etherFrame(bridgeMAC, a.MAC, 0x8100, binary.BigEndian.AppendUint16([]byte{0, 1}, etherTypeIPv4))
	tagged = append(tagged, ipv4Header(a.Addr, h.cfg.Gateway)...)
	sendFrame(t, nsA, peerA, tagged)
	awaitPortDrops(t, h, step, drops+2, func() string {
		if got := portAccepts(t, h, a, "ip"); got != ips {
			return fmt.Sprintf("A's IPv4 rule accepted %d frames", got-ips)
		}
		return ""
	})

	// A claims B's address: a gratuitous ARP, and a reply to the host.
	// Both are dropped, neither counted as A's, and the host's entry of
	// B stays.
	step = "A claiming B's address by ARP"
	drops, arps := portDrops(t, h), portAccepts(t, h, a, "arp")
	sendARP(t, nsA, peerA, arpFrame{op: 1, ethDst: broadcastMAC, sha: a.MAC, spa: b.Addr, tpa: b.Addr})
	sendARP(t, nsA, peerA, arpFrame{op: 2, ethDst: bridgeMAC, sha: a.MAC, spa: b.Addr, tha: bridgeMAC, tpa: h.cfg.Gateway})
	awaitPortDrops(t, h, step, drops+2, func() string {
		if got := hostNeigh(t, br, b.Addr); !bytes.Equal(got, b.MAC) {
			return fmt.Sprintf("the host's neighbour entry of %v became %v", b.Addr, got)
		}
		if got := portAccepts(t, h, a, "arp"); got != arps {
			return fmt.Sprintf("A's ARP rule accepted %d frames", got-arps)
		}
		return ""
	})
	wantNeigh("after "+step, b.Addr, b.MAC)

	// A sends with B's address. Its entry of the gateway is made
	// permanent, so that it sends its SYN without asking by ARP first:
	// the only frame it sends is dropped.
	addGuestAddr(t, nsA, peerA, b.Addr)
	addGuestNeigh(t, nsA, peerA, h.cfg.Gateway, bridgeMAC)
	spoofedDial(t, ctx, h, a, nsA, b.Addr, ln.Addr().String(), "A with B's address")
	noRemote("A with B's address")
	wantNeigh("after A sent with B's address", b.Addr, b.MAC)

	// A sends with B's MAC, from its own address: the bridge drops the
	// frames before it learns B's MAC on A's port (which would send B's
	// frames to A). A new MAC flushes the guest's neighbour entries, the
	// permanent one too: it is made again.
	setGuestMAC(t, nsA, peerA, b.MAC)
	addGuestNeigh(t, nsA, peerA, h.cfg.Gateway, bridgeMAC)
	spoofedDial(t, ctx, h, a, nsA, a.Addr, ln.Addr().String(), "A with B's MAC")
	noRemote("A with B's MAC")
	wantNeigh("after A sent with B's MAC", b.Addr, b.MAC)
	if ports := fdbPorts(t, br, b.MAC); len(ports) != 1 || ports[0] != b.Tap {
		t.Fatalf("after A sent with B's MAC, the bridge has B's MAC on ports %q, want [%s]", ports, b.Tap)
	}
	setGuestMAC(t, nsA, peerA, a.MAC)

	// The control: without the bridge table's rules the same ARP moves
	// the host's entry of B to A, and A's connection with B's address
	// is accepted.
	nftBatch(t, func(c *nftables.Conn) { c.FlushChain(vmPortsChain(h.bridgeTable())) })
	sendARP(t, nsA, peerA, arpFrame{op: 1, ethDst: broadcastMAC, sha: a.MAC, spa: b.Addr, tpa: b.Addr})
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(hostNeigh(t, br, b.Addr), a.MAC) {
		if time.Now().After(deadline) {
			t.Fatalf("control: without the bridge rules, A's gratuitous ARP left the host's entry of %v at %v, want %v", b.Addr, hostNeigh(t, br, b.Addr), a.MAC)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var c net.Conn
	inNetNS(t, nsA, func() {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: b.Addr.AsSlice()}, Timeout: 10 * time.Second}
		c, err = d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	if err != nil {
		t.Fatalf("control: without the bridge rules, dial from A with B's address: %v", err)
	}
	c.Close()
	gotRemote("control: A with B's address", b.Addr)
}

// spoofedDial dials addr from ns, the namespace of the guest vm, with
// the local address from: it waits until the bridge table's baseline has
// dropped a frame, failing if vm's IPv4 rule accepts one first or the
// dial ends, and checks that the dial is still pending then.
func spoofedDial(t *testing.T, ctx context.Context, h *Host, vm VMRules, ns netns.NsHandle, from netip.Addr, addr, step string) {
	t.Helper()
	drops, accepts := portDrops(t, h), portAccepts(t, h, vm, "ip")
	dialCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	dialed := make(chan error, 1)
	go inNetNS(t, ns, func() {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
		c, err := d.DialContext(dialCtx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		dialed <- err
	})
	awaitPortDrops(t, h, step, drops+1, func() string {
		if got := portAccepts(t, h, vm, "ip"); got != accepts {
			return fmt.Sprintf("the guest's IPv4 rule accepted %d frames", got-accepts)
		}
		select {
		case err := <-dialed:
			return fmt.Sprintf("the dial ended (%v)", err)
		default:
			return ""
		}
	})
	cancel()
	if err := <-dialed; !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: dial the gateway: got %v, want it pending until cancelled", step, err)
	}
}

// broadcastMAC is the Ethernet broadcast address.
var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// arpFrame is an ARP packet for Ethernet and IPv4, in its Ethernet
// frame, whose source is the sender hardware address.
type arpFrame struct {
	op       uint16
	ethDst   net.HardwareAddr
	sha, tha net.HardwareAddr // tha nil is all zero
	spa, tpa netip.Addr
}

// bytes frames f.
func (f arpFrame) bytes() []byte {
	b := make([]byte, 0, 28)
	b = binary.BigEndian.AppendUint16(b, arpHTypeEther)
	b = binary.BigEndian.AppendUint16(b, etherTypeIPv4)
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, f.op)
	b = append(b, f.sha...)
	b = append(b, f.spa.AsSlice()...)
	tha := f.tha
	if tha == nil {
		tha = make(net.HardwareAddr, 6)
	}
	b = append(b, tha...)
	b = append(b, f.tpa.AsSlice()...)
	return etherFrame(f.ethDst, f.sha, etherTypeARP, b)
}

// etherFrame is an Ethernet frame from src to dst of the EtherType typ
// carrying payload.
func etherFrame(dst, src net.HardwareAddr, typ uint16, payload []byte) []byte {
	b := append(slices.Clone(dst), src...)
	b = binary.BigEndian.AppendUint16(b, typ)
	return append(b, payload...)
}

// ipv4Header is the header of an IPv4 packet from src to dst of an
// experimental protocol (253) and no payload. Its checksum is left zero:
// the bridge does not check it.
func ipv4Header(src, dst netip.Addr) []byte {
	b := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 253, 0, 0}
	b = append(b, src.AsSlice()...)
	return append(b, dst.AsSlice()...)
}

// sendARP sends f out of the interface called ifname in ns.
func sendARP(t *testing.T, ns netns.NsHandle, ifname string, f arpFrame) {
	t.Helper()
	sendFrame(t, ns, ifname, f.bytes())
}

// sendFrame sends the Ethernet frame out of the interface called ifname
// in ns, through a packet socket.
func sendFrame(t *testing.T, ns netns.NsHandle, ifname string, frame []byte) {
	t.Helper()
	var err error
	inNetNS(t, ns, func() {
		var l *net.Interface
		if l, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		var fd int
		// Protocol 0: the socket sends and receives nothing.
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: l.Index, Protocol: htons(binary.BigEndian.Uint16(frame[12:14])), Halen: 6}
		copy(to.Addr[:], frame[:6])
		err = unix.Sendto(fd, frame, 0, to)
	})
	if err != nil {
		t.Fatalf("send a frame out of %s: %v", ifname, err)
	}
}

// htons puts v in network byte order, as a packet socket address wants
// its protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// newGuestNetNS makes a network namespace for a guest, IPv6 off so that
// the guest sends nothing the test does not ask for.
func newGuestNetNS(t *testing.T) netns.NsHandle {
	t.Helper()
	ns := newNetNS(t)
	var err error
	inNetNS(t, ns, func() {
		for _, p := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"} {
			if werr := os.WriteFile(p, []byte("1\n"), 0o644); werr != nil && !errors.Is(werr, os.ErrNotExist) {
				err = werr
			}
		}
	})
	if err != nil {
		t.Fatalf("turn IPv6 off in a guest namespace: %v", err)
	}
	return ns
}

// guestLink returns a netlink handle in ns and its link called name.
func guestLink(t *testing.T, ns netns.NsHandle, name string) (*netlink.Handle, netlink.Link) {
	t.Helper()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle in a namespace: %v", err)
	}
	l, err := nh.LinkByName(name)
	if err != nil {
		nh.Close()
		t.Fatalf("LinkByName %q in its namespace: %v", name, err)
	}
	return nh, l
}

// setGuestMAC sets the MAC of the link called name in ns.
func setGuestMAC(t *testing.T, ns netns.NsHandle, name string, mac net.HardwareAddr) {
	t.Helper()
	nh, l := guestLink(t, ns, name)
	defer nh.Close()
	if err := nh.LinkSetHardwareAddr(l, mac); err != nil {
		t.Fatalf("set the MAC of %q to %v: %v", name, mac, err)
	}
}

// addGuestAddr adds a/32 to the link called name in ns.
func addGuestAddr(t *testing.T, ns netns.NsHandle, name string, a netip.Addr) {
	t.Helper()
	nh, l := guestLink(t, ns, name)
	defer nh.Close()
	if err := nh.AddrAdd(l, toNetlinkAddr(netip.PrefixFrom(a, 32))); err != nil {
		t.Fatalf("add %v to %q: %v", a, name, err)
	}
}

// addGuestNeigh gives the link called name in ns a permanent neighbour
// entry: a is at mac.
func addGuestNeigh(t *testing.T, ns netns.NsHandle, name string, a netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	nh, l := guestLink(t, ns, name)
	defer nh.Close()
	err := nh.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: mac})
	if err != nil {
		t.Fatalf("neighbour %v at %v on %q: %v", a, mac, name, err)
	}
}

// hostNeigh is the MAC of the host's neighbour entry of a on br; nil
// when it has none, or one without a MAC.
func hostNeigh(t *testing.T, br netlink.Link, a netip.Addr) net.HardwareAddr {
	t.Helper()
	neighs, err := netlink.NeighList(br.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("list the neighbours of %s: %v", br.Attrs().Name, err)
	}
	for _, nb := range neighs {
		if ip, ok := netip.AddrFromSlice(nb.IP.To4()); ok && ip == a {
			return nb.HardwareAddr
		}
	}
	return nil
}

// fdbPorts names the ports of br on which its forwarding database has
// mac.
func fdbPorts(t *testing.T, br netlink.Link, mac net.HardwareAddr) []string {
	t.Helper()
	entries, err := netlink.NeighList(0, unix.AF_BRIDGE)
	if err != nil {
		t.Fatalf("list the forwarding database: %v", err)
	}
	var ports []string
	for _, e := range entries {
		if e.MasterIndex != br.Attrs().Index || !bytes.Equal(e.HardwareAddr, mac) {
			continue
		}
		name := fmt.Sprint(e.LinkIndex)
		if l, err := netlink.LinkByIndex(e.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		ports = append(ports, name)
	}
	return ports
}

// portCounter is the packet count of the first rule of vm_ports that
// pick accepts.
func portCounter(t *testing.T, h *Host, pick func(*nftables.Rule) bool) (uint64, bool) {
	t.Helper()
	for _, r := range rawRulesIn(t, h.bridgeTable(), chainVMPorts) {
		if !pick(r) {
			continue
		}
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				return c.Packets, true
			}
		}
	}
	return 0, false
}

// portDrops is the count of vm_ports' baseline drop.
func portDrops(t *testing.T, h *Host) uint64 {
	t.Helper()
	n, ok := portCounter(t, h, func(r *nftables.Rule) bool { return hasTag(r, portsTag) })
	if !ok {
		t.Fatal("vm_ports has no counted baseline drop")
	}
	return n
}

// portAccepts is the count of vm's rule in vm_ports for the ether type
// typ ("ip" or "arp").
func portAccepts(t *testing.T, h *Host, vm VMRules, typ string) uint64 {
	t.Helper()
	n, ok := portCounter(t, h, func(r *nftables.Rule) bool {
		a, ok := vmAddrOf(r)
		return ok && a == vm.Addr && strings.Contains(describe(r.Exprs), "ether type "+typ+" ")
	})
	if !ok {
		t.Fatalf("vm_ports has no ether type %s rule of %v", typ, vm.Addr)
	}
	return n
}

// awaitPortDrops waits until vm_ports' baseline has dropped at least
// want frames; it fails as soon as bad says what went wrong instead.
func awaitPortDrops(t *testing.T, h *Host, step string, want uint64, bad func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if why := bad(); why != "" {
			t.Fatalf("%s: %s", step, why)
		}
		got := portDrops(t, h)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: vm_ports' baseline dropped %d frames, want at least %d", step, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
