//go:build unix

package source

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts git in its own process group, and makes a
// cancelled context interrupt the whole group (git, and any transport
// helper or ssh it started) so git can remove its temporary files.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
}

// killGroup kills what is left of the command's process group once git
// has exited (a helper that ignored the interrupt).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // usually the group is gone: ESRCH
	}
}
