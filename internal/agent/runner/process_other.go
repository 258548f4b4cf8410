//go:build !unix

package runner

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing: process groups are a Unix feature. On other
// systems only the step's own process is stopped.
func setProcessGroup(*exec.Cmd) {}

// interruptGroup kills p: there is no portable polite signal.
func interruptGroup(p *os.Process) error { return p.Kill() }

// killGroup kills p.
func killGroup(p *os.Process) error { return p.Kill() }

// exitCode returns the process's exit code.
func exitCode(state *os.ProcessState) int { return state.ExitCode() }

// waitExited reports false; see process_unix_other.go.
func waitExited(*os.Process) bool { return false }

// startProcess starts cmd.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
