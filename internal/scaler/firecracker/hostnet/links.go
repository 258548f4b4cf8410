//go:build linux

package hostnet

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpAttempts bounds the retries of a netlink dump the kernel reports as
// interrupted (the link table changed while it was being read).
const dumpAttempts = 5

// dump runs a netlink dump, retrying while the kernel reports it
// interrupted; the last attempt's result is returned as it is.
func dump[T any](read func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := read()
		if err == nil || !errors.Is(err, netlink.ErrDumpInterrupted) || i == dumpAttempts {
			return v, err
		}
	}
}

// linkByName returns the link called name, or nil and no error when there
// is none.
func linkByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return nil, nil
		}
		return nil, err
	}
	return l, nil
}

// isTap reports whether l is a TAP device (not a TUN).
func isTap(l netlink.Link) bool {
	t, ok := l.(*netlink.Tuntap)
	return ok && t.Mode == netlink.TUNTAP_MODE_TAP
}

// isolated reads back l's bridge port isolation flag.
func isolated(l netlink.Link) (bool, error) {
	pi, err := dump(func() (netlink.Protinfo, error) { return netlink.LinkGetProtinfo(l) })
	if err != nil {
		return false, err
	}
	return pi.Isolated, nil
}
