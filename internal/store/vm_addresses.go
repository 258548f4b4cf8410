package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// VMAddress is the lease of one address of a Firecracker bridge's pool to
// one VM.
type VMAddress struct {
	// Pool names the address pool: one bridge on one host.
	Pool    string
	Address netip.Addr
	Scaler  string
	VMID    string
	// TAP and MAC are the VM's host device and guest MAC, both derived
	// from the id and the address; kept for whoever reads the table.
	TAP         string
	MAC         string
	AllocatedAt time.Time
}

// AddressRange is what AllocateVMAddress may hand out: every address from
// First to Last, in order, except those in Skip (the gateway).
type AddressRange struct {
	First, Last netip.Addr
	Skip        []netip.Addr
}

// ErrPoolExhausted is returned when every address of the range is leased.
var ErrPoolExhausted = errors.New("address pool exhausted")

// maxAllocationRaces bounds the addresses one allocation tries that a
// concurrent one took between the read and the insert.
const maxAllocationRaces = 64

const vmAddressColumns = "pool, address, scaler, vm_id, tap, mac, allocated_at"

// AllocateVMAddress leases the lowest free address of r in a.Pool to
// a.VMID, in one transaction, and returns the lease. a.Address is ignored;
// mac derives the MAC from the chosen address. A VM that already holds an
// address of the pool gets that one back (a retried spawn). Two
// allocations racing for one address never both get it: the insert of the
// loser does nothing and it takes the next free one.
func (db *DB) AllocateVMAddress(ctx context.Context, a VMAddress, r AddressRange, mac func(netip.Addr) string) (VMAddress, error) {
	if !r.First.Is4() || !r.Last.Is4() || r.Last.Less(r.First) {
		return VMAddress{}, fmt.Errorf("allocate an address for VM %q: bad range %s-%s", a.VMID, r.First, r.Last)
	}
	var out VMAddress
	err := db.Tx(ctx, func(tx *Tx) error {
		taken := map[netip.Addr]bool{}
		for _, s := range r.Skip {
			taken[s] = true
		}
		rows, err := tx.listVMAddresses(ctx, "WHERE pool = ?", a.Pool)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.VMID == a.VMID {
				out = row
				return nil
			}
			taken[row.Address] = true
		}
		races := 0
		for addr := r.First; addr.IsValid() && !r.Last.Less(addr); addr = addr.Next() {
			if taken[addr] {
				continue
			}
			lease := a
			lease.Address, lease.MAC = addr, mac(addr)
			lease.AllocatedAt = normTime(tx.clock.Now())
			won, err := tx.execChanged(ctx,
				"INSERT INTO vm_addresses ("+vmAddressColumns+") VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
				lease.Pool, addr.String(), lease.Scaler, lease.VMID, lease.TAP, lease.MAC, timeArg(lease.AllocatedAt))
			if err != nil {
				return fmt.Errorf("lease %s to VM %q: %w", addr, a.VMID, classify(err))
			}
			if won {
				out = lease
				return nil
			}
			// Taken by a concurrent allocation (or the VM id got a lease
			// from one: the next pass returns it).
			if races++; races >= maxAllocationRaces {
				return fmt.Errorf("allocate an address for VM %q: %d addresses were taken while trying them", a.VMID, races)
			}
		}
		return fmt.Errorf("allocate an address for VM %q in %s-%s: %w", a.VMID, r.First, r.Last, ErrPoolExhausted)
	})
	return out, err
}

// ReleaseVMAddress deletes the VM's lease; a VM without one is no error.
func (q *queries) ReleaseVMAddress(ctx context.Context, vmID string) error {
	if _, err := q.exec(ctx, "DELETE FROM vm_addresses WHERE vm_id = ?", vmID); err != nil {
		return fmt.Errorf("release the address of VM %q: %w", vmID, classify(err))
	}
	return nil
}

// ListVMAddresses returns the leases of a pool, lowest address first.
func (q *queries) ListVMAddresses(ctx context.Context, pool string) ([]VMAddress, error) {
	return q.listVMAddresses(ctx, "WHERE pool = ?", pool)
}

func (q *queries) listVMAddresses(ctx context.Context, where string, args ...any) ([]VMAddress, error) {
	rows, err := q.query(ctx, "SELECT "+vmAddressColumns+" FROM vm_addresses "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list VM addresses: %w", classify(err))
	}
	defer rows.Close()
	var out []VMAddress
	for rows.Next() {
		var a VMAddress
		var addr string
		if err := rows.Scan(&a.Pool, &addr, &a.Scaler, &a.VMID, &a.TAP, &a.MAC, timeCol{&a.AllocatedAt}); err != nil {
			return nil, fmt.Errorf("list VM addresses: %w", err)
		}
		if a.Address, err = netip.ParseAddr(addr); err != nil {
			return nil, fmt.Errorf("list VM addresses: row of VM %q: %w", a.VMID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list VM addresses: %w", classify(err))
	}
	// By address, not by text: text order puts .10 before .2.
	slices.SortFunc(out, func(a, b VMAddress) int { return a.Address.Compare(b.Address) })
	return out, nil
}
