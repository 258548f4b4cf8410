//go:build linux

package hostnet

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
)

// ErrNoIsolation is returned (wrapped) when the kernel does not keep
// bridge port isolation on a TAP. Without it guests on one bridge reach
// each other directly, so the caller must not run VMs on this host.
var ErrNoIsolation = errors.New("the kernel does not keep bridge port isolation")

// ProbeIsolation checks end to end that this host can isolate bridge
// ports: it creates the TAP kici-isoprobe, enslaves it to the bridge,
// turns isolation on, reads it back, and deletes the TAP, even after a
// failure. A kici-isoprobe TAP left by an earlier crash is deleted first.
// The bridge must exist (EnsureBridge). An error wrapping ErrNoIsolation
// means the kernel cannot isolate ports; any other error means the probe
// itself failed.
func (h *Host) ProbeIsolation(ctx context.Context) (err error) {
	h.bridgeMu.Lock()
	defer h.bridgeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("probe bridge port isolation: %w", err)
	}
	br, err := h.bridge()
	if err != nil {
		return fmt.Errorf("probe bridge port isolation: %w", err)
	}
	if br == nil {
		return fmt.Errorf("probe bridge port isolation: bridge %q does not exist", h.cfg.Bridge)
	}
	if err := deleteProbe(); err != nil {
		return fmt.Errorf("probe bridge port isolation: remove a leftover: %w", err)
	}
	tap := &netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: probeTap},
		Mode:      netlink.TUNTAP_MODE_TAP,
		Flags:     tapFlags,
	}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("probe bridge port isolation: create tap %q: %w", probeTap, err)
	}
	defer func() {
		if derr := deleteProbe(); derr != nil {
			err = errors.Join(err, fmt.Errorf("probe bridge port isolation: %w", derr))
		}
	}()
	if err := netlink.LinkSetMasterByIndex(tap, br.Attrs().Index); err != nil {
		return fmt.Errorf("probe bridge port isolation: enslave tap %q to bridge %q: %w", probeTap, h.cfg.Bridge, err)
	}
	if err := isolate(tap); err != nil {
		return fmt.Errorf("probe bridge port isolation: isolate tap %q on bridge %q: %w", probeTap, h.cfg.Bridge, err)
	}
	return nil
}

// deleteProbe deletes the probe TAP if there is one.
func deleteProbe() error {
	l, err := linkByName(probeTap)
	if err != nil || l == nil {
		return err
	}
	if !isTap(l) {
		return fmt.Errorf("link %q is a %s, not the probe's TAP", probeTap, l.Type())
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("delete tap %q: %w", probeTap, err)
	}
	return nil
}
