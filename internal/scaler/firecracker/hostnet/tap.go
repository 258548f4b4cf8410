//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
)

// ErrExists is returned (wrapped) by CreateTap when a link of the TAP's
// name already exists, whoever made it. The caller decides: a leftover of
// the same VM is deleted and created again, anything else is a clash.
var ErrExists = errors.New("a link of that name exists")

// tapFlags are the TAP's flags: exclusive creation (an existing device of
// the name fails instead of being attached to), and the frame format
// Firecracker opens it with (no packet information, a virtio-net header).
const tapFlags = netlink.TUNTAP_TUN_EXCL | netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR

// CreateTap creates the persistent TAP name (which must match TapPattern)
// owned by uid and gid, so that only the jailed VMM running as that uid
// can attach to it; enslaves it to the bridge; turns bridge port
// isolation on and reads it back; and sets it up. The bridge must exist
// (EnsureBridge). If a link called name exists, the error wraps
// ErrExists and nothing is changed. On any later failure the new TAP is
// deleted again.
func (h *Host) CreateTap(ctx context.Context, name string, uid, gid int) error {
	if !IsTapName(name) {
		return fmt.Errorf("create tap %q: the name does not match %s", name, TapPattern)
	}
	if uid < 0 || int64(uid) >= math.MaxUint32 || gid < 0 || int64(gid) >= math.MaxUint32 {
		return fmt.Errorf("create tap %q: owner %d:%d is not a uid and gid", name, uid, gid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if l, err := linkByName(name); err != nil {
		return fmt.Errorf("create tap %q: look up the name: %w", name, err)
	} else if l != nil {
		return fmt.Errorf("create tap %q: %w (a %s)", name, ErrExists, l.Type())
	}
	br, err := h.bridge()
	if err != nil {
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if br == nil {
		return fmt.Errorf("create tap %q: bridge %q does not exist", name, h.cfg.Bridge)
	}
	tap := &netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: name},
		Mode:      netlink.TUNTAP_MODE_TAP,
		Flags:     tapFlags,
		Owner:     uint32(uid),
		Group:     uint32(gid),
	}
	if err := netlink.LinkAdd(tap); err != nil {
		// TUNSETIFF's EBUSY is not wrapped by netlink; look again.
		if l, _ := linkByName(name); l != nil {
			return fmt.Errorf("create tap %q: %w (a %s)", name, ErrExists, l.Type())
		}
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if err := h.setUpTap(ctx, tap, br); err != nil {
		if derr := netlink.LinkDel(tap); derr != nil && !errors.Is(derr, syscall.ENODEV) {
			err = errors.Join(err, fmt.Errorf("delete tap %q after the failure: %w", name, derr))
		}
		return err
	}
	return nil
}

// setUpTap enslaves the new tap to br, isolates it and sets it up.
func (h *Host) setUpTap(ctx context.Context, tap netlink.Link, br netlink.Link) error {
	name := tap.Attrs().Name
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if err := netlink.LinkSetMasterByIndex(tap, br.Attrs().Index); err != nil {
		return fmt.Errorf("enslave tap %q to bridge %q: %w", name, h.cfg.Bridge, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if err := isolate(tap); err != nil {
		return fmt.Errorf("isolate tap %q on bridge %q: %w", name, h.cfg.Bridge, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create tap %q: %w", name, err)
	}
	if err := netlink.LinkSetUp(tap); err != nil {
		return fmt.Errorf("set tap %q up: %w", name, err)
	}
	return nil
}

// isolate turns bridge port isolation on for the bridge port l and reads
// the flag back; a kernel that accepts the request but does not keep the
// flag fails with ErrNoIsolation.
func isolate(l netlink.Link) error {
	if err := netlink.LinkSetIsolated(l, true); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("%w: %w", ErrNoIsolation, err)
		}
		return err
	}
	on, err := isolated(l)
	if err != nil {
		return fmt.Errorf("read the flag back: %w", err)
	}
	if !on {
		return ErrNoIsolation
	}
	return nil
}

// DeleteTap deletes the TAP name. A name that is not there is not an
// error. It refuses a name outside TapPattern (and so the bridge), a link
// of that name that is not a TAP, and a TAP enslaved to a bridge other
// than the configured one: those are not this Host's.
func (h *Host) DeleteTap(ctx context.Context, name string) error {
	if !IsTapName(name) || name == h.cfg.Bridge {
		return fmt.Errorf("delete tap %q: refused: the name does not match %s", name, TapPattern)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete tap %q: %w", name, err)
	}
	l, err := linkByName(name)
	if err != nil {
		return fmt.Errorf("delete tap %q: %w", name, err)
	}
	if l == nil {
		return nil
	}
	if !isTap(l) {
		return fmt.Errorf("delete tap %q: refused: it is a %s, not a TAP", name, l.Type())
	}
	if m := l.Attrs().MasterIndex; m != 0 {
		br, err := h.bridge()
		if err != nil {
			return fmt.Errorf("delete tap %q: %w", name, err)
		}
		if br == nil || br.Attrs().Index != m {
			return fmt.Errorf("delete tap %q: refused: it is enslaved to another bridge than %q", name, h.cfg.Bridge)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete tap %q: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("delete tap %q: %w", name, err)
	}
	return nil
}

// Taps returns, sorted, the names of the TAPs enslaved to the configured
// bridge whose names match TapPattern: the VMs' TAPs, and nothing an
// orphan sweep must not reap. With no bridge there are none.
func (h *Host) Taps(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list taps of bridge %q: %w", h.cfg.Bridge, err)
	}
	br, err := h.bridge()
	if err != nil {
		return nil, fmt.Errorf("list taps of bridge %q: %w", h.cfg.Bridge, err)
	}
	if br == nil {
		return nil, nil
	}
	links, err := dump(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list taps of bridge %q: %w", h.cfg.Bridge, err)
	}
	var names []string
	for _, l := range tapsOf(br, links) {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names, nil
}

// tapsOf picks the TAPs of br out of links: TAP devices named by
// TapPattern and enslaved to br.
func tapsOf(br netlink.Link, links []netlink.Link) []netlink.Link {
	var taps []netlink.Link
	for _, l := range links {
		a := l.Attrs()
		if IsTapName(a.Name) && isTap(l) && a.MasterIndex == br.Attrs().Index {
			taps = append(taps, l)
		}
	}
	return taps
}
