//go:build unix

package container

import "golang.org/x/sys/unix"

// accessRW checks, as the kernel would for this process, that path may be
// read and written.
func accessRW(path string) error {
	return unix.Access(path, unix.R_OK|unix.W_OK)
}
