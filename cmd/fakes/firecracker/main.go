// Command firecracker is a FAKE of Firecracker for kici's tests and demos on
// hosts without KVM: it serves the real Firecracker REST API on its socket
// and boots no kernel. See internal/fakes/fakevm for what is faked.
package main

import (
	"os"
	"runtime"

	"github.com/kici-dev/kici/internal/fakes/fakevm"
)

// init keeps main.main on the process's main thread: the guest helper mode
// names itself with prctl(PR_SET_NAME), which names the calling thread,
// and the process's name is its main thread's.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(fakevm.FirecrackerMain(os.Args[1:], os.Stdout, os.Stderr))
}
