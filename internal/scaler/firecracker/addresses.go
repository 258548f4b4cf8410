package firecracker

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/store"
)

// Lease is one VM's address.
type Lease struct {
	VMID   string
	Scaler string
	Addr   netip.Addr
}

// Addresses leases the addresses of the bridge's pool. Allocate gives the
// lowest free address other than the gateway, the same one again to a VM
// that already holds one, and never one address to two VMs.
type Addresses interface {
	Allocate(ctx context.Context, vmID, scaler, tap string) (netip.Addr, error)
	Release(ctx context.Context, vmID string) error
	Leases(ctx context.Context) ([]Lease, error)
}

// StoreAddresses keeps the leases in the store's vm_addresses table, in
// the pool named pool (one bridge on one host: "<instance>/<bridge>").
func StoreAddresses(db *store.DB, pool string, prefix netip.Prefix, gateway netip.Addr) Addresses {
	return &storeAddresses{db: db, pool: pool, r: poolRange(prefix, gateway)}
}

type storeAddresses struct {
	db   *store.DB
	pool string
	r    store.AddressRange
}

func (s *storeAddresses) Allocate(ctx context.Context, vmID, scaler, tap string) (netip.Addr, error) {
	l, err := s.db.AllocateVMAddress(ctx, store.VMAddress{Pool: s.pool, Scaler: scaler, VMID: vmID, TAP: tap}, s.r, MAC)
	if err != nil {
		return netip.Addr{}, err
	}
	return l.Address, nil
}

func (s *storeAddresses) Release(ctx context.Context, vmID string) error {
	return s.db.ReleaseVMAddress(ctx, vmID)
}

func (s *storeAddresses) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := s.db.ListVMAddresses(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make([]Lease, len(rows))
	for i, r := range rows {
		out[i] = Lease{VMID: r.VMID, Scaler: r.Scaler, Addr: r.Address}
	}
	return out, nil
}

// poolRange is every guest address of prefix: from the network address
// plus one to the broadcast address less one, the gateway skipped.
func poolRange(prefix netip.Prefix, gateway netip.Addr) store.AddressRange {
	first := prefix.Masked().Addr().Next()
	b := prefix.Masked().Addr().As4()
	for i := prefix.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last := netip.AddrFrom4(b).Prev()
	return store.AddressRange{First: first, Last: last, Skip: []netip.Addr{gateway}}
}

// MAC is the guest MAC of an address: 06:00:AC and its last three octets
// (locally administered, unicast), e.g. 10.0.1.42 → 06:00:AC:00:01:2A.
func MAC(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("06:00:AC:%02X:%02X:%02X", b[1], b[2], b[3])
}

// vmRules are the host rules of a VM at addr behind tap: its traffic
// confined, and its TAP bound to its MAC (MAC(addr)) and address.
func vmRules(addr netip.Addr, tap string) hostnet.VMRules {
	b := addr.As4()
	mac := net.HardwareAddr{0x06, 0x00, 0xAC, b[1], b[2], b[3]}
	return hostnet.VMRules{Addr: addr, Tap: tap, MAC: mac}
}
