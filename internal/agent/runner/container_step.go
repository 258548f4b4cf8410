package runner

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// pickShell is what a step in an image runs when it names no shell: bash
// with -e and pipefail when the image has bash, else sh -e. It runs as
// `sh -c pickShell SCRIPT`, so the choice costs no container of its own,
// and needs the image to have sh.
const pickShell = `if command -v bash >/dev/null 2>&1; then exec bash -eo pipefail "$0"; fi; exec sh -e "$0"`

// containerCommand returns the command line of a step in an image: the
// step's shell split into words, then the script; or, without a shell,
// pickShell.
func containerCommand(shell, script string) ([]string, error) {
	if strings.TrimSpace(shell) == "" {
		return []string{"sh", "-c", pickShell, script}, nil
	}
	return shellCommand(shell, script)
}

// runStep runs argv in a new container of the job's image, with the job's
// directory mounted at the same path, dir as its working directory, env
// added to the image's own, and its network the job's (or the engine's
// default bridge without services). It mirrors runProcess: stdout and
// stderr go to out as they come; started is called once the container
// runs; when ctx ends the container gets SIGTERM, then SIGKILL after
// CancelGrace (at once when kill is closed or the cause is Forced); it
// returns once the container has exited, its output has been read (or
// OutputDrain has passed), and the container is removed. A cancel that
// comes before the start returns a stopped result without starting.
//
// The container's first process is the engine's init (HostConfig.Init),
// which passes SIGTERM on to the step's shell: a shell as process 1 would
// ignore it.
func (c *jobContainers) runStep(ctx context.Context, kill <-chan struct{}, step int, argv []string, dir string, env []string, out *output, started func(time.Time)) procResult {
	defer out.close()
	// The calls to the engine run on a context the job's cancel does not
	// end: the watcher stops the container, which must still be waited on
	// and removed.
	after := context.WithoutCancel(ctx)
	init := true
	cfg := &container.Config{
		Image:        c.image,
		Entrypoint:   argv[:1],
		Cmd:          argv[1:],
		Env:          env,
		WorkingDir:   dir,
		User:         c.user,
		Labels:       c.labels,
		AttachStdout: true,
		AttachStderr: true,
	}
	host := &container.HostConfig{Init: &init, Mounts: c.mounts}
	if c.network != "" {
		host.NetworkMode = container.NetworkMode(c.network)
	}
	// Create and start run to their end, even when the job is cancelled
	// meanwhile: a create cut short may still make the container, unknown
	// to the runner. A cancel before the start stops the step there.
	call, endCall := context.WithTimeout(after, engineCallTimeout)
	created, err := c.cli.ContainerCreate(call, cfg, host, nil, nil, fmt.Sprintf("%s-step-%d", c.name, step))
	endCall()
	if err != nil {
		return procResult{startErr: fmt.Errorf("create the step's container (image %s): %w", c.image, err), exitCode: 127}
	}
	id := created.ID
	defer c.remove(after, id)
	// The attachment lives as long as the step: its context has no
	// deadline.
	att, err := c.cli.ContainerAttach(after, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return procResult{startErr: fmt.Errorf("attach to the step's container: %w", err), exitCode: 127}
	}
	defer att.Close()
	waitCtx, stopWait := context.WithCancel(after)
	defer stopWait()
	waited, waitErr := c.cli.ContainerWait(waitCtx, id, container.WaitConditionNextExit)
	if ctx.Err() != nil {
		return procResult{exitCode: -1, stopped: true}
	}
	call, endCall = context.WithTimeout(after, engineCallTimeout)
	err = c.cli.ContainerStart(call, id, container.StartOptions{})
	endCall()
	if err != nil {
		return procResult{startErr: fmt.Errorf("start the step's container (image %s): %w", c.image, err), exitCode: 127}
	}
	if started != nil {
		started(time.Now())
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(out, out, att.Reader) // one goroutine writes both streams: out is not shared
	}()

	exited := make(chan struct{})
	watched := make(chan struct{})
	var stopped atomic.Bool
	go func() {
		defer close(watched)
		c.watch(ctx, kill, id, exited, &stopped)
	}()
	res := procResult{exitCode: -1}
	select {
	case w := <-waited:
		res.exitCode = int(w.StatusCode)
		if w.Error != nil && w.Error.Message != "" {
			res.err = fmt.Errorf("wait for the step's container: %s", w.Error.Message)
		}
	case err := <-waitErr:
		res.err = fmt.Errorf("wait for the step's container: %w", err)
		c.kill(after, id) // its end is unknown: make sure of it
	}
	close(exited)
	<-watched

	drain := time.NewTimer(c.drain)
	defer drain.Stop()
	select {
	case <-copied:
	case <-drain.C:
		att.Close()
		<-copied
	}
	res.stopped = stopped.Load()
	return res
}

// watch stops container id when ctx ends (SIGTERM, then SIGKILL after the
// grace period) or when kill is closed (SIGKILL), unless it exits first.
func (c *jobContainers) watch(ctx context.Context, kill <-chan struct{}, id string, exited <-chan struct{}, stopped *atomic.Bool) {
	after := context.WithoutCancel(ctx)
	select {
	case <-exited:
		return
	case <-kill:
		stopped.Store(true)
		c.kill(after, id)
		return
	case <-ctx.Done():
	}
	stopped.Store(true)
	if isForced(context.Cause(ctx)) {
		c.kill(after, id)
		return
	}
	c.signal(after, id, "SIGTERM")
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	select {
	case <-exited:
		return
	case <-kill:
	case <-grace.C:
	}
	c.kill(after, id)
}

// kill sends SIGKILL to container id.
func (c *jobContainers) kill(ctx context.Context, id string) { c.signal(ctx, id, "SIGKILL") }

// signal sends sig to container id's first process. A container that has
// already stopped, or is gone, is not an error worth reporting.
func (c *jobContainers) signal(ctx context.Context, id, sig string) {
	ctx, cancel := context.WithTimeout(ctx, engineCallTimeout)
	defer cancel()
	_ = c.cli.ContainerKill(ctx, id, sig)
}

// remove force-removes container id and its anonymous volumes. A failure
// is logged; teardown tries again by label.
func (c *jobContainers) remove(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, engineCallTimeout)
	defer cancel()
	if err := c.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
		c.log.Warn("remove step container", "container", id, "error", err)
	}
}
