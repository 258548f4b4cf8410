//go:build linux

package hostnet

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/testsvc"
)

func TestEnsureBridge(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	tests := []struct {
		name string
		// premade makes the link of the bridge's name before EnsureBridge
		// runs, if set.
		premade func(t *testing.T, h *Host)
		// wantAddrs are the bridge's addresses afterwards, besides the
		// gateway's.
		wantExtra []string
	}{
		{name: "absent"},
		{name: "bridge without address, down", premade: func(t *testing.T, h *Host) { addBridge(t, h.cfg.Bridge) }},
		{name: "bridge with the gateway, up", premade: func(t *testing.T, h *Host) {
			br := addBridge(t, h.cfg.Bridge)
			if err := netlink.AddrAdd(br, h.gatewayAddr()); err != nil {
				t.Fatalf("AddrAdd: %v", err)
			}
			if err := netlink.LinkSetUp(br); err != nil {
				t.Fatalf("LinkSetUp: %v", err)
			}
		}},
		{name: "bridge with another address", wantExtra: []string{"192.0.2.1/24"}, premade: func(t *testing.T, h *Host) {
			br := addBridge(t, h.cfg.Bridge)
			a, _ := netlink.ParseAddr("192.0.2.1/24")
			if err := netlink.AddrAdd(br, a); err != nil {
				t.Fatalf("AddrAdd: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := testHost(t)
			if tt.premade != nil {
				tt.premade(t, h)
			}
			for i := range 2 { // the second run must change nothing
				if err := h.EnsureBridge(t.Context()); err != nil {
					t.Fatalf("EnsureBridge #%d: %v", i+1, err)
				}
				br := mustLink(t, h.cfg.Bridge)
				if br.Type() != "bridge" {
					t.Fatalf("link %q: got type %q, want bridge", h.cfg.Bridge, br.Type())
				}
				if br.Attrs().Flags&net.FlagUp == 0 {
					t.Fatalf("bridge %q: got flags %v, want up", h.cfg.Bridge, br.Attrs().Flags)
				}
				want := []netip.Prefix{netip.PrefixFrom(h.cfg.Gateway, 24)}
				for _, s := range tt.wantExtra {
					want = append(want, netip.MustParsePrefix(s))
				}
				got := addrsOf(t, br)
				if diff := cmp.Diff(sortPrefixes(want), got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
					t.Fatalf("bridge %q addresses after run #%d (-want +got):\n%s", h.cfg.Bridge, i+1, diff)
				}
			}
			if ps := h.verifyBridge(); len(ps) != 0 {
				t.Fatalf("verifyBridge: got %v, want no problems", ps)
			}
		})
	}
}

func TestEnsureBridgeRefuses(t *testing.T) {
	testsvc.NetNS(t)
	t.Parallel()
	tests := []struct {
		name    string
		premade func(t *testing.T, h *Host)
		wantErr string
	}{
		{name: "not a bridge", wantErr: "is a veth, not a bridge", premade: func(t *testing.T, h *Host) { addVeth(t, h.cfg.Bridge, 0) }},
		{name: "gateway with another prefix length", wantErr: "/16, not", premade: func(t *testing.T, h *Host) {
			br := addBridge(t, h.cfg.Bridge)
			a := h.gatewayAddr()
			a.Mask = net.CIDRMask(16, 32)
			if err := netlink.AddrAdd(br, a); err != nil {
				t.Fatalf("AddrAdd: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := testHost(t)
			tt.premade(t, h)
			err := h.EnsureBridge(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), h.cfg.Bridge) {
				t.Fatalf("EnsureBridge: got %v, want an error naming %q and containing %q", err, h.cfg.Bridge, tt.wantErr)
			}
			t.Log(err)
		})
	}
}

// addBridge creates a bridge called name, down and without addresses.
func addBridge(t *testing.T, name string) netlink.Link {
	t.Helper()
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		t.Fatalf("LinkAdd bridge %q: %v", name, err)
	}
	deleteLinkAtEnd(t, name)
	return mustLink(t, name)
}

// sortPrefixes sorts ps by address, as addrsOf does.
func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return ps
}
