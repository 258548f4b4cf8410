package runner

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// waitExited blocks until p has exited, without reaping it, and returns
// true. While the leader is an unreaped zombie its process group id cannot
// be reused, so killing the group afterwards cannot hit an unrelated
// process.
func waitExited(p *os.Process) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			// On any other error, Cmd.Wait reports what went wrong.
			return err == nil
		}
	}
}
