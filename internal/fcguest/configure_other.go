//go:build !linux

package fcguest

import (
	"errors"
)

// Configure needs Linux: only a Firecracker guest has kici-network.
func Configure(Network) error {
	return errors.New("kici-network in MMDS needs a Linux guest")
}
