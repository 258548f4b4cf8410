package runner

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

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

// spawner starts every process of the runner from one goroutine locked to
// its OS thread for the life of the program; see startProcess.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

// startProcess starts cmd with SIGKILL as its parent-death signal, so that
// a step's direct child dies with the runner's process, however that ends
// (SIGKILL included). Linux sends that signal when the *thread* that forked
// the child exits, not the process, and the Go runtime may end a thread
// (a goroutine that exits while locked to it takes it along). So every start
// runs on one goroutine that locks its thread and never returns: the thread
// lives exactly as long as the process. Starts are serialized; a start is a
// fork and exec, far shorter than any step.
//
// The signal reaches only the direct child (the step's shell); its own
// children are the reaper's business (internal/agent/reaper). It is also
// cleared when the child execs a set-user-ID program.
func startProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: see above
			for req := range spawner.reqs {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}
