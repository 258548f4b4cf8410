//go:build unix

package baremetal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// supported: Spawn works on this system.
const supported = true

// setProcAttr starts cmd as the leader of a new session, and so of a new
// process group whose id is its PID.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// terminateGroup asks the process group pgid to stop (SIGTERM). A group
// that is already gone is not an error.
func terminateGroup(pgid int) error { return signalGroup(pgid, syscall.SIGTERM) }

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refuse to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// killGroup kills the process group pgid and every other process of the
// session the group's leader started (SIGKILL). Callers must know that pgid
// still names the agent's group: its leader runs, or is an unreaped zombie.
func killGroup(pgid int) error {
	err := signalGroup(pgid, syscall.SIGKILL)
	killSession(pgid)
	return err
}

// describeExit says how a process ended: "exited with code 2", "was killed
// by signal killed".
func describeExit(state *os.ProcessState) string {
	if state == nil {
		return "ended"
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %s", ws.Signal())
	}
	return fmt.Sprintf("exited with code %d", state.ExitCode())
}
