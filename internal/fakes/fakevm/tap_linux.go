package fakevm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// devNetTun is the TUN/TAP clone device; inside the jail it is the node
// the jailer made (10, 200).
const devNetTun = "/dev/net/tun"

// openHostTap attaches to the host TAP name as Firecracker does: open
// /dev/net/tun and TUNSETIFF with IFF_TAP|IFF_NO_PI. The TAP must exist
// (kici creates it, owned by the jailer's uid) or the caller must be
// allowed to create it. Unlike Firecracker the fake does not ask for
// IFF_VNET_HDR: it relays whole Ethernet frames and needs no virtio-net
// header.
func openHostTap(name string) (Tap, error) {
	return openTap(devNetTun, name)
}

// openTap opens the TAP name through the clone device dev, non-blocking,
// so that reads and writes go through Go's poller and Close unblocks them.
func openTap(dev, name string) (*os.File, error) {
	req, err := unix.NewIfreq(name)
	if err != nil {
		return nil, fmt.Errorf("tap name %q: %w", name, err)
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dev, err)
	}
	req.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, req); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %q: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "tap:"+name), nil
}
