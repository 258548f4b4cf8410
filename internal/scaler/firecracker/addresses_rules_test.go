package firecracker

import (
	"net/netip"
	"strings"
	"testing"
)

// TestVMRulesBindTheGuestsMAC: the TAP binding uses the MAC the guest's
// interface gets (MAC), for every address byte.
func TestVMRulesBindTheGuestsMAC(t *testing.T) {
	for _, a := range []string{"10.0.0.2", "172.16.254.7", "192.168.1.255"} {
		addr := netip.MustParseAddr(a)
		r := vmRules(addr, "kici-0a1b2c3d")
		if !strings.EqualFold(r.MAC.String(), MAC(addr)) || r.Addr != addr || r.Tap != "kici-0a1b2c3d" {
			t.Errorf("vmRules(%s): %+v, want MAC %s", a, r, MAC(addr))
		}
	}
}
