// Command jailer is a FAKE of Firecracker's jailer for kici's tests and
// demos: it takes the real jailer's command line and builds the real jail
// layout, then starts the fake firecracker in it. See internal/fakes/fakevm
// for what is faked.
package main

import (
	"os"

	"github.com/kici-dev/kici/internal/fakes/fakevm"
)

func main() {
	os.Exit(fakevm.JailerMain(os.Args[1:], os.Stdout, os.Stderr))
}
