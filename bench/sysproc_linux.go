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
