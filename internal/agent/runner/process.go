package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
)

// procResult is how one process run ended.
type procResult struct {
	// startErr is set when the process could not start.
	startErr error
	// exitCode is the exit code (128+signal for a signal).
	exitCode int
	// stopped is true when the runner signalled the process group because
	// ctx ended or the job was killed.
	stopped bool
	// err, when set, says why the step's end is unknown although it
	// started: the Docker engine failed while a step in an image ran.
	err error
}

// runProcess runs argv in its own process group with its stdout and stderr
// merged into out, and returns when the process has exited, every other
// process of its group has been killed, and its output has been read (or
// OutputDrain has passed). started, if not nil, is called right after the
// process started, before any of its output reaches out.
//
// When ctx ends, the group gets SIGTERM, then SIGKILL after CancelGrace; when
// kill is closed, or ctx's cause was wrapped with Forced, it gets SIGKILL at
// once.
//
// The process's stdout is an *os.File (a pipe the runner reads itself), so
// Cmd.Wait returns as soon as the process exits, even while a background
// child still holds the pipe: Cmd.WaitDelay has nothing to bound here, and
// the drain after the group kill takes its place.
func (r *Runner) runProcess(ctx context.Context, kill <-chan struct{}, argv []string, dir string, env []string, out *output, started func(time.Time)) procResult {
	defer out.close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return procResult{startErr: fmt.Errorf("create output pipe: %w", err), exitCode: 127}
	}
	defer pr.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	guard := r.cfg.Guard
	if guard != nil {
		cmd.Env = append(env[:len(env):len(env)], guard.Env()...)
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	setProcessGroup(cmd)
	err = startProcess(cmd)
	pw.Close() // the child has its own copy; EOF comes when the last holder exits
	if err != nil {
		return procResult{startErr: err, exitCode: 127}
	}
	if guard != nil {
		guard.Started(cmd.Process.Pid)
		defer guard.Ended(cmd.Process.Pid) // runs after the group kills below
	}
	if started != nil {
		started(time.Now())
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr) // ends at EOF, or at the drain deadline
	}()

	exited := make(chan struct{})
	watched := make(chan struct{})
	var stopped atomic.Bool
	go func() {
		defer close(watched)
		r.watch(ctx, kill, cmd.Process, exited, &stopped)
	}()
	if waitExited(cmd.Process) {
		// The leader is a zombie: its group id is still reserved.
		close(exited)
		<-watched
		_ = killGroup(cmd.Process)
		_ = cmd.Wait()
	} else {
		_ = cmd.Wait()
		close(exited)
		<-watched
		_ = killGroup(cmd.Process)
	}

	drain := time.NewTimer(r.cfg.OutputDrain)
	defer drain.Stop()
	select {
	case <-copied:
	case <-drain.C:
		// A process that left the group still holds the pipe.
		_ = pr.SetReadDeadline(time.Now())
		<-copied
	}
	code := -1
	if cmd.ProcessState != nil {
		code = exitCode(cmd.ProcessState)
	}
	return procResult{exitCode: code, stopped: stopped.Load()}
}

// watch stops the process group led by p when ctx ends (politely, then by
// force after the grace period) or when kill is closed (by force), unless
// the process exits first.
func (r *Runner) watch(ctx context.Context, kill <-chan struct{}, p *os.Process, exited <-chan struct{}, stopped *atomic.Bool) {
	select {
	case <-exited:
		return
	case <-kill:
		stopped.Store(true)
		_ = killGroup(p)
		return
	case <-ctx.Done():
	}
	stopped.Store(true)
	if isForced(context.Cause(ctx)) {
		_ = killGroup(p)
		return
	}
	_ = interruptGroup(p)
	grace := time.NewTimer(r.cfg.CancelGrace)
	defer grace.Stop()
	select {
	case <-exited:
		return
	case <-kill:
	case <-grace.C:
	}
	_ = killGroup(p)
}
