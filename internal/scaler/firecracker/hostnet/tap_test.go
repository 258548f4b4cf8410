//go:build linux

package hostnet

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/testsvc"
)

// readyHost is a testHost whose bridge exists.
func readyHost(t *testing.T) (*Host, int) {
	t.Helper()
	h, n := testHost(t)
	if err := h.EnsureBridge(t.Context()); err != nil {
		t.Fatalf("EnsureBridge: %v", err)
	}
	return h, n
}

func TestCreateTap(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	name := tapName(n, 1)
	if err := h.CreateTap(t.Context(), name, 10000, 10001); err != nil {
		t.Fatalf("CreateTap: %v", err)
	}
	l := mustLink(t, name)
	tap, ok := l.(*netlink.Tuntap)
	if !ok {
		t.Fatalf("link %q: got %T, want a TAP", name, l)
	}
	type owned struct {
		Mode          netlink.TuntapMode
		Owner, Group  uint32
		Persist       bool
		NoPI, VnetHdr bool
		Master        int
		Up            bool
	}
	got := owned{
		Mode: tap.Mode, Owner: tap.Owner, Group: tap.Group, Persist: !tap.NonPersist,
		NoPI: tap.Flags&netlink.TUNTAP_NO_PI != 0, VnetHdr: tap.Flags&netlink.TUNTAP_VNET_HDR != 0,
		Master: tap.MasterIndex, Up: tap.Attrs().Flags&net.FlagUp != 0,
	}
	want := owned{
		Mode: netlink.TUNTAP_MODE_TAP, Owner: 10000, Group: 10001, Persist: true, NoPI: true, VnetHdr: true,
		Master: mustLink(t, h.cfg.Bridge).Attrs().Index, Up: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tap %q (-want +got):\n%s", name, diff)
	}
	if on, err := isolated(tap); err != nil || !on {
		t.Fatalf("tap %q isolation: got %v, %v, want on", name, on, err)
	}
}

func TestCreateTapRefuses(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	taken := tapName(n, 1)
	if err := h.CreateTap(t.Context(), taken, 10000, 10000); err != nil {
		t.Fatalf("CreateTap: %v", err)
	}
	veth := tapName(n, 2)
	addVeth(t, veth, 0)
	noBridge, m := testHost(t) // its bridge is never made
	tests := []struct {
		name       string
		host       *Host
		tap        string
		uid, gid   int
		wantExists bool
		wantErr    string
	}{
		{name: "tap exists", host: h, tap: taken, uid: 10000, gid: 10000, wantExists: true},
		{name: "other link exists", host: h, tap: veth, uid: 10000, gid: 10000, wantExists: true},
		{name: "name outside the pattern", host: h, tap: "kici-nothex2", uid: 10000, gid: 10000, wantErr: "does not match"},
		{name: "negative uid", host: h, tap: tapName(n, 3), uid: -1, gid: 10000, wantErr: "not a uid"},
		{name: "no bridge", host: noBridge, tap: tapName(m, 1), uid: 10000, gid: 10000, wantErr: "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.host.CreateTap(t.Context(), tt.tap, tt.uid, tt.gid)
			if tt.wantExists {
				if !errors.Is(err, ErrExists) {
					t.Fatalf("CreateTap(%q): got %v, want ErrExists", tt.tap, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.tap) {
				t.Fatalf("CreateTap(%q): got %v, want an error naming it and containing %q", tt.tap, err, tt.wantErr)
			}
			if l, _ := linkByName(tt.tap); l != nil {
				t.Fatalf("CreateTap(%q) failed but left a %s of that name", tt.tap, l.Type())
			}
		})
	}
	// The TAP that was there is untouched.
	if tap := mustLink(t, taken).(*netlink.Tuntap); tap.Owner != 10000 || tap.MasterIndex == 0 {
		t.Fatalf("tap %q after the refusals: owner %d master %d, want 10000 and the bridge", taken, tap.Owner, tap.MasterIndex)
	}
}

func TestDeleteTap(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	ctx := t.Context()
	name := tapName(n, 1)
	if err := h.CreateTap(ctx, name, 10000, 10000); err != nil {
		t.Fatalf("CreateTap: %v", err)
	}
	for i := range 2 {
		if err := h.DeleteTap(ctx, name); err != nil {
			t.Fatalf("DeleteTap #%d: %v", i+1, err)
		}
		if l, err := linkByName(name); l != nil || err != nil {
			t.Fatalf("after DeleteTap #%d: got link %v, %v, want none", i+1, l, err)
		}
	}
	// A TAP with no bridge (its bridge was deleted) is still this Host's.
	loose := tapName(n, 2)
	addTap(t, loose, 0)
	if err := h.DeleteTap(ctx, loose); err != nil {
		t.Fatalf("DeleteTap of a TAP without master: %v", err)
	}
}

func TestDeleteTapRefuses(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	ctx := t.Context()
	veth := tapName(n, 1)
	addVeth(t, veth, 0)
	other := addBridge(t, h.cfg.Bridge+"x")
	foreign := tapName(n, 2)
	addTap(t, foreign, other.Attrs().Index)
	outside := "kici-nothex1"
	addTap(t, outside, 0)
	for _, name := range []string{h.cfg.Bridge, outside, veth, foreign} {
		err := h.DeleteTap(ctx, name)
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), name) {
			t.Fatalf("DeleteTap(%q): got %v, want a refusal naming it", name, err)
		}
		mustLink(t, name) // still there
	}
}

func TestTaps(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	ctx := t.Context()
	if got, err := h.Taps(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Taps of an empty bridge: got %v, %v, want none", got, err)
	}
	br := mustLink(t, h.cfg.Bridge).Attrs().Index
	for _, name := range []string{tapName(n, 2), tapName(n, 1)} {
		if err := h.CreateTap(ctx, name, 10000, 10000); err != nil {
			t.Fatalf("CreateTap: %v", err)
		}
	}
	other := addBridge(t, h.cfg.Bridge+"x")
	addTap(t, "kici-deadbeef", other.Attrs().Index) // another bridge's
	addTap(t, "kici-other", br)                     // outside the pattern
	addTap(t, tapName(n, 3), 0)                     // on no bridge
	addVeth(t, tapName(n, 4), br)                   // not a TAP
	got, err := h.Taps(ctx)
	if err != nil {
		t.Fatalf("Taps: %v", err)
	}
	if diff := cmp.Diff([]string{tapName(n, 1), tapName(n, 2)}, got); diff != "" {
		t.Fatalf("Taps (-want +got):\n%s", diff)
	}
	if got, err := h.Taps(ctx); err != nil || len(got) != 2 {
		t.Fatalf("Taps again: got %v, %v", got, err)
	}
	noBridge, _ := testHost(t)
	if got, err := noBridge.Taps(ctx); err != nil || got != nil {
		t.Fatalf("Taps without a bridge: got %v, %v, want none", got, err)
	}
}

func TestProbeIsolation(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, _ := readyHost(t)
	ctx := t.Context()
	addTap(t, probeTap, 0) // a leftover of a crashed probe
	for i := range 2 {
		if err := h.ProbeIsolation(ctx); err != nil {
			t.Fatalf("ProbeIsolation #%d: %v", i+1, err)
		}
		if l, err := linkByName(probeTap); l != nil || err != nil {
			t.Fatalf("after ProbeIsolation #%d: got link %v, %v, want none", i+1, l, err)
		}
	}
	noBridge, _ := testHost(t)
	if err := noBridge.ProbeIsolation(ctx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("ProbeIsolation without a bridge: got %v, want an error", err)
	}
}

// addTap creates a persistent TAP called name, enslaved to the bridge of
// index master unless that is 0, without isolation.
func addTap(t *testing.T, name string, master int) {
	t.Helper()
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TAP, Flags: tapFlags}
	if err := netlink.LinkAdd(tap); err != nil {
		t.Fatalf("LinkAdd tap %q: %v", name, err)
	}
	deleteLinkAtEnd(t, name)
	if master != 0 {
		if err := netlink.LinkSetMasterByIndex(tap, master); err != nil {
			t.Fatalf("enslave tap %q: %v", name, err)
		}
	}
}

// addVeth creates a veth pair, name and name+"p", with name enslaved to
// the bridge of index master unless that is 0.
func addVeth(t *testing.T, name string, master int) {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MasterIndex: master}, PeerName: name + "p"}
	if err := netlink.LinkAdd(v); err != nil {
		t.Fatalf("LinkAdd veth %q: %v", name, err)
	}
	deleteLinkAtEnd(t, name)
}

// TestBridgeMACStaysAsTapsComeAndGo: the bridge's MAC is its own, not
// its lowest port's, so guests' ARP entries for the gateway stay right
// while other VMs' TAPs are added and removed.
func TestBridgeMACStaysAsTapsComeAndGo(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	h, n := readyHost(t)
	want := BridgeMAC(h.cfg.Gateway).String()
	mac := func() string { return mustLink(t, h.cfg.Bridge).Attrs().HardwareAddr.String() }
	if got := mac(); got != want {
		t.Fatalf("bridge MAC after EnsureBridge: got %s, want %s", got, want)
	}
	for i := 1; i <= 3; i++ {
		if err := h.CreateTap(t.Context(), tapName(n, i), 10000, 10000); err != nil {
			t.Fatal(err)
		}
		if got := mac(); got != want {
			t.Fatalf("bridge MAC with %d TAPs: got %s, want %s", i, got, want)
		}
	}
	for i := 1; i <= 3; i++ {
		if err := h.DeleteTap(t.Context(), tapName(n, i)); err != nil {
			t.Fatal(err)
		}
		if got := mac(); got != want {
			t.Fatalf("bridge MAC after deleting TAP %d: got %s, want %s", i, got, want)
		}
	}
}
