//go:build unix && !linux

package runner

import (
	"os"
	"os/exec"
)

// waitExited reports false: this system has no portable wait that leaves
// the process unreaped, so the caller waits with Cmd.Wait and kills the
// group after it.
func waitExited(*os.Process) bool { return false }

// startProcess starts cmd. This system has no parent-death signal; the
// step's processes outlive a killed runner.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
