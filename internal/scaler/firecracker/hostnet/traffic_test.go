//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/kici-dev/kici/internal/testsvc"
)

// TestTraffic sends real packets: a guest namespace joined to the bridge
// by a veth pair (standing in for a VM's TAP) at a pool address, and an
// "outside" namespace on a private network routed by the host.
//
//	guest ns  10.<n>.0.2 ──veth── bridge ktbr<n> 10.<n>.0.1   (test's ns)
//	outside ns 192.168.<n>.2 ──veth── 192.168.<n>.1           (test's ns)
func TestTraffic(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := testHost(t)
	// A bound for the waits below, so that a packet that never comes
	// fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	provision(t, h)
	guestAddr := poolAddr(n, 2)
	outsideNet := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(n), 0}), 24)
	outsideHost := netip.AddrFrom4([4]byte{192, 168, byte(n), 1})
	outsideAddr := netip.AddrFrom4([4]byte{192, 168, byte(n), 2})

	guest := newNetNS(t)
	outside := newNetNS(t)
	br := mustLink(t, h.cfg.Bridge)
	plug(t, fmt.Sprintf("ktg%d", n), br.Attrs().Index, netip.Prefix{}, guest, netip.PrefixFrom(guestAddr, 24), h.cfg.Gateway)
	plug(t, fmt.Sprintf("kto%d", n), 0, netip.PrefixFrom(outsideHost, 24), outside, netip.PrefixFrom(outsideAddr, 24), netip.Addr{})

	gatewayLn, err := net.Listen("tcp", netip.AddrPortFrom(h.cfg.Gateway, 0).String())
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	t.Cleanup(func() { gatewayLn.Close() })
	// Only the gateway listener's port is open to guests; a second
	// listener on the host stands for every other host service.
	closedLn, err := net.Listen("tcp", netip.AddrPortFrom(h.cfg.Gateway, 0).String())
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	t.Cleanup(func() { closedLn.Close() })
	cfg := h.cfg
	cfg.HostPorts = []uint16{uint16(gatewayLn.Addr().(*net.TCPAddr).Port)}
	if h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	provision(t, h)
	var outsideLn net.Listener
	inNetNS(t, outside, func() { outsideLn, err = net.Listen("tcp", netip.AddrPortFrom(outsideAddr, 0).String()) })
	if err != nil {
		t.Fatalf("listen outside: %v", err)
	}
	t.Cleanup(func() { outsideLn.Close() })
	outsideAccepted := acceptAll(t, outsideLn)
	acceptAll(t, gatewayLn)

	// Allowed: the VM's accept of the outside network is ahead of the
	// baseline's drop of 192.168/16, and the host masquerades the guest.
	// The guest's veth is named outside the TAP pattern, so the bridge
	// table leaves its frames alone (TestTrafficBinding tests that
	// table); its rules there name a TAP that does not exist.
	vm := guestVM(n, 2)
	vm.Allow = []netip.Prefix{outsideNet}
	if err := h.AllowVM(ctx, vm); err != nil {
		t.Fatalf("AllowVM: %v", err)
	}
	dialFrom(t, ctx, guest, outsideLn.Addr().String()).Close()
	// A host port not opened to guests refuses them at once.
	var refused error
	inNetNS(t, guest, func() {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", closedLn.Addr().String())
		if err == nil {
			c.Close()
		}
		refused = err
	})
	if !errors.Is(refused, syscall.ECONNREFUSED) {
		t.Fatalf("dial a host port not opened to guests: got %v, want connection refused", refused)
	}
	select {
	case remote := <-outsideAccepted:
		if !strings.HasPrefix(remote, outsideHost.String()+":") {
			t.Fatalf("outside saw the guest as %s, want the host's %v (masquerade)", remote, outsideHost)
		}
	case <-ctx.Done():
		t.Fatal("the outside listener accepted nothing")
	}

	// Denied: the same VM, re-applied without the allow-list and with
	// DenyAll, still reaches the gateway (input, not forward), and its
	// SYN to the outside is dropped by its own private-range rule.
	vm.Allow, vm.DenyAll = nil, true
	if err := h.AllowVM(ctx, vm); err != nil {
		t.Fatalf("AllowVM again: %v", err)
	}
	dialFrom(t, ctx, guest, gatewayLn.Addr().String()).Close()

	dialCtx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	dialed := make(chan error, 1)
	go inNetNS(t, guest, func() {
		c, err := (&net.Dialer{}).DialContext(dialCtx, "tcp", outsideLn.Addr().String())
		if err == nil {
			c.Close()
		}
		dialed <- err
	})
	awaitDrops(t, ctx, h, guestAddr, "ip daddr 192.168.0.0/16")
	cancelDial()
	if err := <-dialed; !errors.Is(err, context.Canceled) {
		t.Fatalf("dial outside with the VM denied: got %v, want it pending until cancelled", err)
	}
	select {
	case remote := <-outsideAccepted:
		t.Fatalf("outside accepted %s although the VM is denied", remote)
	default:
	}
}

// awaitDrops waits until addr's rule matching match has counted a packet.
func awaitDrops(t *testing.T, ctx context.Context, h *Host, addr netip.Addr, match string) {
	t.Helper()
	want := fmt.Sprintf("ip saddr %v %s counter drop", addr, match)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range rawRules(t, h, chainForward) {
			if a, ok := vmAddrOf(r); !ok || a != addr || describe(r.Exprs) != want {
				continue
			}
			for _, e := range r.Exprs {
				if c, ok := e.(*expr.Counter); ok && c.Packets > 0 {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rule %q counted no packet", want)
		case <-tick.C:
		}
	}
}

// acceptAll accepts connections on ln until it is closed, sending each
// one's remote address.
func acceptAll(t *testing.T, ln net.Listener) <-chan string {
	t.Helper()
	remotes := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			remotes <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	return remotes
}

// dialFrom connects to addr from the namespace ns.
func dialFrom(t *testing.T, ctx context.Context, ns netns.NsHandle, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	inNetNS(t, ns, func() { c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr) })
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return c
}

// newNetNS makes a network namespace, closed when the test ends (and gone
// once nothing uses it).
func newNetNS(t *testing.T) netns.NsHandle {
	t.Helper()
	var ns netns.NsHandle
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, gerr := netns.Get()
		if gerr != nil {
			err = gerr
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		ns, err = netns.New() // moves this thread into the new namespace
		if serr := netns.Set(orig); serr != nil {
			err = errors.Join(err, serr)
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
	}()
	<-done
	if err != nil {
		t.Fatalf("make a network namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// inNetNS runs fn on a thread of its own in the namespace ns. Sockets fn
// opens stay in ns.
func inNetNS(t *testing.T, ns netns.NsHandle, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			t.Errorf("read this thread's namespace: %v", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			t.Errorf("enter a namespace: %v", err)
			return
		}
		fn()
		if err := netns.Set(orig); err != nil {
			t.Errorf("leave a namespace: %v", err)
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
	}()
	<-done
}

// plug makes a veth pair: name in the test's namespace, enslaved to the
// bridge of index master or given hostAddr, and name+"p" in ns with
// peerAddr and, if gw is valid, a default route through gw. Both are up.
func plug(t *testing.T, name string, master int, hostAddr netip.Prefix, ns netns.NsHandle, peerAddr netip.Prefix, gw netip.Addr) {
	t.Helper()
	peer := name + "p"
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MasterIndex: master}, PeerName: peer, PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(v); err != nil {
		t.Fatalf("LinkAdd veth %q: %v", name, err)
	}
	deleteLinkAtEnd(t, name)
	l := mustLink(t, name)
	if hostAddr.IsValid() {
		if err := netlink.AddrAdd(l, toNetlinkAddr(hostAddr)); err != nil {
			t.Fatalf("AddrAdd %v to %q: %v", hostAddr, name, err)
		}
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatalf("LinkSetUp %q: %v", name, err)
	}
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle in a namespace: %v", err)
	}
	defer nh.Close()
	p, err := nh.LinkByName(peer)
	if err != nil {
		t.Fatalf("LinkByName %q in its namespace: %v", peer, err)
	}
	if err := nh.AddrAdd(p, toNetlinkAddr(peerAddr)); err != nil {
		t.Fatalf("AddrAdd %v to %q: %v", peerAddr, peer, err)
	}
	if err := nh.LinkSetUp(p); err != nil {
		t.Fatalf("LinkSetUp %q: %v", peer, err)
	}
	if gw.IsValid() {
		gwb := gw.As4()
		if err := nh.RouteAdd(&netlink.Route{LinkIndex: p.Attrs().Index, Gw: net.IP(gwb[:])}); err != nil {
			t.Fatalf("default route via %v in %q's namespace: %v", gw, peer, err)
		}
	}
}

// toNetlinkAddr converts an address with its prefix length.
func toNetlinkAddr(p netip.Prefix) *netlink.Addr {
	a := p.Addr().As4()
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a[:]), Mask: net.CIDRMask(p.Bits(), 32)}}
}
