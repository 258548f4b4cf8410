package fakevm

import (
	"fmt"
	"net/netip"
	"strings"
)

// IPConfig is the guest's static network configuration, read from the
// kernel's ip= boot argument as a Linux guest's kernel does
// (Documentation/admin-guide/nfs/nfsroot.rst):
//
//	ip=<client-ip>:<server-ip>:<gw-ip>:<netmask>:<hostname>:<device>:<autoconf>[:<dns0>:<dns1>]
//
// kici writes ip=<guest>::<gateway>:<netmask>::eth0:off.
type IPConfig struct {
	// Addr is the guest's address with the netmask's prefix length.
	Addr netip.Prefix
	// Gateway is the default route's next hop; invalid when empty.
	Gateway netip.Addr
	// Hostname is the hostname field (unused by the fake).
	Hostname string
	// Device is the interface to configure; "eth0" when empty.
	Device string
}

// parseIPArg finds the ip= argument in a kernel command line. It returns
// nil when there is none, or when it asks for autoconfiguration (dhcp and
// the like), which the fake guest cannot do.
func parseIPArg(cmdline string) (*IPConfig, error) {
	var arg string
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, "ip="); ok {
			arg = v // the last one wins, as in the kernel
		}
	}
	if arg == "" {
		return nil, nil
	}
	parts := strings.Split(arg, ":")
	field := func(i int) string {
		if i < len(parts) {
			return parts[i]
		}
		return ""
	}
	if len(parts) == 1 { // ip=dhcp, ip=off, ...
		return nil, nil
	}
	if auto := field(6); auto != "" && auto != "off" && auto != "none" {
		return nil, nil
	}
	client, err := netip.ParseAddr(field(0))
	if err != nil || !client.Is4() {
		return nil, fmt.Errorf("ip= boot argument %q: client address %q is not an IPv4 address", arg, field(0))
	}
	bits := 32
	if m := field(3); m != "" {
		mask, err := netip.ParseAddr(m)
		if err != nil || !mask.Is4() {
			return nil, fmt.Errorf("ip= boot argument %q: netmask %q is not an IPv4 netmask", arg, m)
		}
		if bits, err = maskBits(mask); err != nil {
			return nil, fmt.Errorf("ip= boot argument %q: %w", arg, err)
		}
	}
	cfg := &IPConfig{Addr: netip.PrefixFrom(client, bits), Hostname: field(4), Device: field(5)}
	if g := field(2); g != "" {
		if cfg.Gateway, err = netip.ParseAddr(g); err != nil || !cfg.Gateway.Is4() {
			return nil, fmt.Errorf("ip= boot argument %q: gateway %q is not an IPv4 address", arg, g)
		}
	}
	if cfg.Device == "" {
		cfg.Device = "eth0"
	}
	return cfg, nil
}

// maskBits returns the prefix length of a contiguous IPv4 netmask.
func maskBits(mask netip.Addr) (int, error) {
	b := mask.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n := 0
	for v&(1<<31) != 0 {
		n++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("netmask %s is not contiguous", mask)
	}
	return n, nil
}
