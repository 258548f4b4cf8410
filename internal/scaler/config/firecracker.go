package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Defaults of the firecracker network block and of a firecracker scaler.
const (
	DefaultFirecrackerCIDR      = "10.0.0.0/24"
	DefaultFirecrackerBridge    = "kici-br0"
	DefaultFirecrackerGateway   = "10.0.0.1"
	DefaultFirecrackerTable     = "kici"
	DefaultChrootBaseDir        = "/srv/jailer"
	DefaultVCPUCount            = 2
	DefaultMemSizeMib           = 512
	DefaultOverlayDriveSizeMib  = 2048
	maxVCPUCount                = 32
	maxMemSizeMib               = 1 << 20 // 1 TiB
	maxOverlayDriveSizeMib      = 1 << 20 // 1 TiB
	minFirecrackerPoolAddresses = 2       // the gateway and one guest
)

// FirecrackerNetwork is the top-level firecracker block: the host bridge
// and address pool shared by every firecracker scaler of the process.
type FirecrackerNetwork struct {
	// CIDR is the guests' address pool; default 10.0.0.0/24.
	CIDR netip.Prefix
	// Bridge is the host bridge the VMs' TAPs are enslaved to; default
	// kici-br0.
	Bridge string
	// Gateway is the bridge's address and the guests' default route;
	// default 10.0.0.1. It is inside CIDR and never given to a guest.
	Gateway netip.Addr
	// Netmask is the guests' netmask (the kernel's ip= argument); it is
	// CIDR's mask.
	Netmask netip.Addr
	// Table is the nftables table (family ip) of this bridge's rules;
	// default kici. Two orchestrators on one host use different tables.
	Table string
	// AutoProvisionHost makes the orchestrator create a missing bridge and
	// its rules at start-up (default true); false only verifies.
	AutoProvisionHost bool
}

// defaultFirecrackerNetwork is the block used when the file has none.
func defaultFirecrackerNetwork() FirecrackerNetwork {
	p := netip.MustParsePrefix(DefaultFirecrackerCIDR)
	return FirecrackerNetwork{
		CIDR: p, Bridge: DefaultFirecrackerBridge, Gateway: netip.MustParseAddr(DefaultFirecrackerGateway),
		Netmask: maskOf(p), Table: DefaultFirecrackerTable, AutoProvisionHost: true,
	}
}

// Firecracker holds the options of a firecracker scaler.
type Firecracker struct {
	// FirecrackerPath and JailerPath are the binaries; KernelPath the
	// guest kernel (uncompressed vmlinux on x86_64). All absolute; whether
	// they exist is checked at each spawn, not at load (a host may be
	// prepared after the orchestrator starts).
	FirecrackerPath string
	JailerPath      string
	KernelPath      string
	// UID and GID are the unprivileged identity the jailer drops the VMM
	// to; never 0.
	UID, GID int
	// ChrootBaseDir is the jailer's chroot base; default /srv/jailer. VMs
	// live under <ChrootBaseDir>/firecracker/<id>/root.
	ChrootBaseDir string
	// VCPUCount and MemSizeMib size a VM whose label set and job say
	// nothing; defaults 2 and 512.
	VCPUCount  int
	MemSizeMib int
}

// FirecrackerLabelSet holds a firecracker label set's own options.
type FirecrackerLabelSet struct {
	// RootfsPath is the guest's root filesystem image (ext4), required.
	RootfsPath string
	// KernelPath, VCPUCount and MemSizeMib override the scaler's; zero
	// means the scaler's.
	KernelPath string
	VCPUCount  int
	MemSizeMib int
	// OverlayDriveSizeMib is the size of the writable overlay drive;
	// default 2048.
	OverlayDriveSizeMib int
	// WarmStart serves spawns from a snapshot of a booted VM whose agent
	// waits for an identity; default false.
	WarmStart bool
}

// firecrackerKeys are the scaler keys only a firecracker scaler may set.
var firecrackerKeys = []string{"firecrackerPath", "jailerPath", "kernelPath", "uid", "gid", "chrootBaseDir", "vcpuCount", "memSizeMib"}

// firecrackerRequired are the firecracker keys without a default.
var firecrackerRequired = []string{"firecrackerPath", "jailerPath", "kernelPath", "uid", "gid"}

// firecrackerLabelSetKeys are the label-set keys only a firecracker
// scaler's label sets may set.
var firecrackerLabelSetKeys = []string{"rootfsPath", "kernelPath", "vcpuCount", "memSizeMib", "overlayDriveSizeMib", "warmStart"}

// ifnameRE is a Linux interface name the bridge may have: at most 15
// bytes (IFNAMSIZ less the NUL), no slash, colon or space.
var ifnameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// tableRE is an nftables table name.
var tableRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)

// firecrackerNetwork reads the top-level firecracker block.
func (p *parser) firecrackerNetwork(n *yaml.Node, path string, fn *FirecrackerNetwork) {
	pairs, _ := p.mapping(n, path)
	var cidrN, gatewayN, netmaskN *yaml.Node
	var netmask netip.Addr
	for _, kv := range p.check(pairs, path, schema{known: []string{"cidr", "bridgeName", "gateway", "netmask", "table", "autoProvisionHost"}}) {
		what := join(path, kv.key)
		switch kv.key {
		case "cidr":
			if s, ok := p.str(kv.value, what); ok {
				pr, err := netip.ParsePrefix(s)
				switch {
				case err != nil || !pr.Addr().Is4():
					p.errorf(kv.value, what, "%q is not an IPv4 CIDR such as 10.0.0.0/24", s)
				case pr.Masked() != pr:
					p.errorf(kv.value, what, "%q has host bits set: write the network address, %s", s, pr.Masked())
				case pr.Bits() > 32-minFirecrackerPoolAddresses:
					p.errorf(kv.value, what, "%q is too small: the pool needs room for the gateway and at least one VM (use /30 or wider)", s)
				default:
					fn.CIDR, cidrN = pr, kv.value
				}
			}
		case "bridgeName":
			if s, ok := p.str(kv.value, what); ok {
				if ifnameRE.MatchString(s) {
					fn.Bridge = s
				} else {
					p.errorf(kv.value, what, "invalid interface name %q: use 1 to 15 letters, digits, '.', '-' or '_'", s)
				}
			}
		case "gateway":
			if s, ok := p.str(kv.value, what); ok {
				if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
					fn.Gateway, gatewayN = a, kv.value
				} else {
					p.errorf(kv.value, what, "%q is not an IPv4 address", s)
				}
			}
		case "netmask":
			if s, ok := p.str(kv.value, what); ok {
				if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
					netmask, netmaskN = a, kv.value
				} else {
					p.errorf(kv.value, what, "%q is not a dotted IPv4 netmask such as 255.255.255.0", s)
				}
			}
		case "table":
			if s, ok := p.str(kv.value, what); ok {
				if tableRE.MatchString(s) {
					fn.Table = s
				} else {
					p.errorf(kv.value, what, "invalid nftables table name %q: use a letter, then up to 31 letters, digits, '-' or '_'", s)
				}
			}
		case "autoProvisionHost":
			fn.AutoProvisionHost, _ = p.boolean(kv.value, what)
		}
	}
	// A pool given without its gateway gets the pool's first address.
	if cidrN != nil && gatewayN == nil {
		fn.Gateway = fn.CIDR.Addr().Next()
	}
	if !fn.CIDR.Contains(fn.Gateway) {
		at := gatewayN
		if at == nil {
			at = cidrN
		}
		p.errorf(at, join(path, "gateway"), "%s is not inside the pool %s: the gateway is the bridge's address on the guests' network", fn.Gateway, fn.CIDR)
	} else if fn.Gateway == fn.CIDR.Addr() || fn.Gateway == lastAddr(fn.CIDR) {
		p.errorf(gatewayN, join(path, "gateway"), "%s is the network or broadcast address of %s", fn.Gateway, fn.CIDR)
	}
	fn.Netmask = maskOf(fn.CIDR)
	if netmaskN != nil && netmask != fn.Netmask {
		p.errorf(netmaskN, join(path, "netmask"), "%s does not match the pool %s, whose netmask is %s: guests and bridge must share one subnet", netmask, fn.CIDR, fn.Netmask)
	}
}

// firecrackerKey reads one of the firecracker-only scaler keys; whether
// the scaler is a firecracker scaler is checked once its type is known.
func (p *parser) firecrackerKey(kv pair, path string, fc *Firecracker) {
	switch kv.key {
	case "firecrackerPath", "jailerPath", "kernelPath", "chrootBaseDir":
		s, ok := p.hostPath(kv.value, path)
		if !ok {
			return
		}
		switch kv.key {
		case "firecrackerPath":
			// The jailer names the jail after the binary's file name, and kici
			// looks for VMs under <chrootBaseDir>/firecracker/.
			if filepath.Base(s) != "firecracker" {
				p.errorf(kv.value, path, "%q: the binary must be called firecracker (the jailer names each VM's jail after it); install it as .../firecracker", s)
				return
			}
			fc.FirecrackerPath = s
		case "jailerPath":
			fc.JailerPath = s
		case "kernelPath":
			fc.KernelPath = s
		case "chrootBaseDir":
			fc.ChrootBaseDir = s
		}
	case "uid", "gid":
		v, ok := p.integer(kv.value, path, 0, 1<<31-2)
		if !ok {
			return
		}
		if v == 0 {
			p.errorf(kv.value, path, "0 is root: the jailer must drop the VMM to an unprivileged %s, such as 10000", kv.key)
			return
		}
		if kv.key == "uid" {
			fc.UID = v
		} else {
			fc.GID = v
		}
	case "vcpuCount":
		if v, ok := p.integer(kv.value, path, 1, maxVCPUCount); ok {
			fc.VCPUCount = v
		}
	case "memSizeMib":
		if v, ok := p.integer(kv.value, path, 1, maxMemSizeMib); ok {
			fc.MemSizeMib = v
		}
	}
}

// firecrackerLabelSetKey reads one of a label set's firecracker keys.
func (p *parser) firecrackerLabelSetKey(kv pair, path string, fc *FirecrackerLabelSet) {
	switch kv.key {
	case "rootfsPath", "kernelPath":
		s, ok := p.hostPath(kv.value, path)
		if !ok {
			return
		}
		if kv.key == "rootfsPath" {
			fc.RootfsPath = s
		} else {
			fc.KernelPath = s
		}
	case "vcpuCount":
		fc.VCPUCount, _ = p.integer(kv.value, path, 1, maxVCPUCount)
	case "memSizeMib":
		fc.MemSizeMib, _ = p.integer(kv.value, path, 1, maxMemSizeMib)
	case "overlayDriveSizeMib":
		fc.OverlayDriveSizeMib, _ = p.integer(kv.value, path, 1, maxOverlayDriveSizeMib)
	case "warmStart":
		fc.WarmStart, _ = p.boolean(kv.value, path)
	}
}

// hostPath reads an absolute path on the orchestrator's host.
func (p *parser) hostPath(n *yaml.Node, path string) (string, bool) {
	s, ok := p.str(n, path)
	if !ok {
		return "", false
	}
	if msg := checkHostPath(s); msg != "" {
		p.errorf(n, path, "%s", msg)
		return "", false
	}
	return s, true
}

// checkFirecrackerScaler applies the firecracker rules once the type is
// known: the required keys are there, and the defaults are filled in.
func (p *parser) checkFirecrackerScaler(r *rawScaler, n *yaml.Node) {
	var missing []string
	for _, k := range firecrackerRequired {
		if _, ok := r.keys[k]; !ok {
			missing = append(missing, strconv.Quote(k))
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		p.errorf(n, r.path, "missing required key %s: a firecracker scaler needs firecrackerPath, jailerPath, kernelPath, uid and gid", missing[0])
	default:
		p.errorf(n, r.path, "missing required keys %s: a firecracker scaler needs firecrackerPath, jailerPath, kernelPath, uid and gid", strings.Join(missing, ", "))
	}
	fc := &r.s.Firecracker
	if fc.ChrootBaseDir == "" {
		fc.ChrootBaseDir = DefaultChrootBaseDir
	}
	if fc.VCPUCount == 0 {
		fc.VCPUCount = DefaultVCPUCount
	}
	if fc.MemSizeMib == 0 {
		fc.MemSizeMib = DefaultMemSizeMib
	}
}

// maskOf is p's netmask as a dotted address.
func maskOf(p netip.Prefix) netip.Addr {
	var b [4]byte
	for i := 0; i < p.Bits(); i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

// lastAddr is p's broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

// String renders the block for logs.
func (fn FirecrackerNetwork) String() string {
	return fmt.Sprintf("bridge %s gateway %s pool %s table %s", fn.Bridge, fn.Gateway, fn.CIDR, fn.Table)
}

// Equal reports whether two blocks are the same (go-cmp uses it: the
// netip types have unexported fields).
func (fn FirecrackerNetwork) Equal(o FirecrackerNetwork) bool { return fn == o }
