package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child if the bench process dies
// first (a crash, a SIGKILL), so no orchestrator or agent outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// raiseNofile raises this process's soft limit on open files to at least
// want (up to the hard limit); the children started afterwards inherit
// it. It returns the soft limit in force. It always calls Setrlimit: the
// Go runtime raises its own soft limit at startup but starts children with
// the original one, unless the program sets the limit itself.
func raiseNofile(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = max(lim.Cur, min(want, lim.Max))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}
