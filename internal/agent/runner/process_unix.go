//go:build unix

package runner

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd as the leader of a new process group, so that
// the step's whole process tree can be signalled at once.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// interruptGroup asks the process group led by p to stop (SIGTERM).
func interruptGroup(p *os.Process) error { return signalGroup(p.Pid, syscall.SIGTERM) }

// killGroup kills the process group led by p (SIGKILL).
func killGroup(p *os.Process) error { return signalGroup(p.Pid, syscall.SIGKILL) }

// signalGroup signals every process of the group pgid. A group that is
// already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// exitCode returns the exit code of a finished process, or 128+signal when
// a signal ended it, as shells report it.
func exitCode(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}
