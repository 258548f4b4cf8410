package store

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

func testMAC(a netip.Addr) string { return "06:00:AC:" + a.String() }

func TestVMAddressesLowestFreeAndRelease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		r := AddressRange{First: netip.MustParseAddr("10.0.0.1"), Last: netip.MustParseAddr("10.0.0.4"), Skip: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
		lease := func(vm string) (VMAddress, error) {
			return db.AllocateVMAddress(ctx, VMAddress{Pool: "i1/kici-br0", Scaler: "fc", VMID: vm, TAP: "kici-" + vm}, r, testMAC)
		}
		for i, want := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"} {
			got, err := lease(fmt.Sprint("vm", i))
			if err != nil {
				t.Fatal(err)
			}
			if got.Address.String() != want || got.MAC != testMAC(got.Address) {
				t.Fatalf("lease %d: got %s %s, want %s (lowest free, gateway skipped)", i, got.Address, got.MAC, want)
			}
		}
		if _, err := lease("vm9"); !errors.Is(err, ErrPoolExhausted) {
			t.Fatalf("full pool: got %v, want ErrPoolExhausted", err)
		}
		// The same VM asking again gets its own address back.
		again, err := lease("vm1")
		if err != nil || again.Address.String() != "10.0.0.3" {
			t.Fatalf("re-lease of vm1: got %v %v, want 10.0.0.3", again.Address, err)
		}
		if err := db.ReleaseVMAddress(ctx, "vm0"); err != nil {
			t.Fatal(err)
		}
		if err := db.ReleaseVMAddress(ctx, "vm0"); err != nil {
			t.Fatalf("second release: %v, want nil", err)
		}
		got, err := lease("vm9")
		if err != nil || got.Address.String() != "10.0.0.2" {
			t.Fatalf("after release: got %v %v, want the freed 10.0.0.2", got.Address, err)
		}
		// Another pool (another host's bridge) reuses the subnet freely.
		other, err := db.AllocateVMAddress(ctx, VMAddress{Pool: "i2/kici-br0", Scaler: "fc", VMID: "elsewhere"}, r, testMAC)
		if err != nil || other.Address.String() != "10.0.0.2" {
			t.Fatalf("other pool: got %v %v", other.Address, err)
		}
		list, err := db.ListVMAddresses(ctx, "i1/kici-br0")
		if err != nil {
			t.Fatal(err)
		}
		var vms []string
		for _, l := range list {
			vms = append(vms, l.VMID+"="+l.Address.String())
		}
		if fmt.Sprint(vms) != "[vm9=10.0.0.2 vm1=10.0.0.3 vm2=10.0.0.4]" {
			t.Errorf("list: got %v", vms)
		}
	})
}

func TestVMAddressesConcurrentAllocationsAreDistinct(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		r := AddressRange{First: netip.MustParseAddr("10.0.0.1"), Last: netip.MustParseAddr("10.0.0.254"), Skip: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
		const n = 16
		var wg sync.WaitGroup
		got := make([]VMAddress, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				got[i], errs[i] = db.AllocateVMAddress(t.Context(), VMAddress{Pool: "p", Scaler: "fc", VMID: fmt.Sprint("vm", i)}, r, testMAC)
			})
		}
		wg.Wait()
		seen := map[netip.Addr]string{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("allocation %d: %v", i, errs[i])
			}
			if prev, dup := seen[got[i].Address]; dup {
				t.Fatalf("%s leased to both %s and vm%d", got[i].Address, prev, i)
			}
			seen[got[i].Address] = fmt.Sprint("vm", i)
		}
	})
}
