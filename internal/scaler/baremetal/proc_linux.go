package baremetal

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// canRecover: this system has /proc, so a process can be found again after
// a restart.
const canRecover = true

func procStat(pid int) (procInfo, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(data)
}

var bootIDOnce = sync.OnceValue(func() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
})

// bootID identifies this boot of the host; "" if unknown.
func bootID() string { return bootIDOnce() }

// waitExited blocks until the child pid has exited, without reaping it, and
// returns true. While the child is an unreaped zombie, its PID, process
// group id and session id cannot be reused.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			// On any other error, Cmd.Wait reports what went wrong.
			return err == nil
		}
	}
}

// killSession kills every process of session sid: the agent's job steps,
// each in a process group of its own, are in the agent's session.
func killSession(sid int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if info, err := procStat(pid); err == nil && info.Session == sid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
