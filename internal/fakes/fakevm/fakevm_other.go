//go:build !linux

package fakevm

import (
	"errors"
	"fmt"
	"io"
)

var errLinuxOnly = errors.New("the fake firecracker and jailer run on Linux only")

func openHostTap(string) (Tap, error) { return nil, errLinuxOnly }

// FirecrackerMain fails: the fake needs Linux.
func FirecrackerMain(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, errLinuxOnly)
	return ExitGenericError
}

// JailerMain fails: the fake needs Linux.
func JailerMain(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, errLinuxOnly)
	return 1
}
