package container

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/kici-dev/kici/internal/scaler"
)

// outputDrainTimeout bounds how long a failure report waits for the
// agent's last output after the container exited.
const outputDrainTimeout = 2 * time.Second

// follow starts the goroutines that read the agent's output into its tail
// and watch for its exit. tail is how many earlier lines to read first
// ("" for all). It returns false, starting nothing, when the agent was
// destroyed meanwhile.
func (b *Backend) follow(a *agent, containerID, tail string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.destroyed {
		return false
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stop, a.logsDone = stop, make(chan struct{})
	b.wg.Add(2)
	go b.followOutput(ctx, a, containerID, tail)
	go b.watchExit(ctx, a, containerID)
	return true
}

// followOutput reads the container's stdout and stderr into the agent's
// tail until the container ends or ctx is cancelled. A failure to follow
// only costs the tail, so it is logged.
func (b *Backend) followOutput(ctx context.Context, a *agent, containerID, tail string) {
	defer b.wg.Done()
	defer close(a.logsDone)
	rc, err := b.cli.ContainerLogs(ctx, containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Tail: tail})
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("follow agent output", "agent_id", a.id, "container_id", shortID(containerID), "error", err)
		}
		return
	}
	defer rc.Close()
	stdout, stderr := a.tail.writer("stdout"), a.tail.writer("stderr")
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	stdout.flush()
	stderr.flush()
	if err != nil && ctx.Err() == nil {
		b.log.Warn("follow agent output", "agent_id", a.id, "container_id", shortID(containerID), "error", err)
	}
}

// watchExit waits for the container to stop running and records it. An
// agent that exits before it registered, without being destroyed, is
// reported with EventFailed once Spawn has returned (successfully: a
// failed Spawn reports its own failure).
func (b *Backend) watchExit(ctx context.Context, a *agent, containerID string) {
	defer b.wg.Done()
	resC, errC := b.cli.ContainerWait(ctx, containerID, container.WaitConditionNotRunning)
	var code int64
	select {
	case res := <-resC:
		code = res.StatusCode
	case err := <-errC:
		if ctx.Err() == nil {
			b.log.Warn("watch agent container exit", "agent_id", a.id, "container_id", shortID(containerID), "error", err)
		}
		return
	}
	b.log.Debug("agent container exited", "agent_id", a.id, "container_id", shortID(containerID), "exit_code", code)
	select {
	case <-a.spawnDone:
	case <-ctx.Done():
		return
	}
	b.waitOutput(a)
	b.mu.Lock()
	report := !a.registered && !a.destroyed
	b.mu.Unlock()
	if !report {
		return
	}
	detail := fmt.Sprintf("agent container exited with code %d before it registered", code)
	b.emit(a, scaler.EventFailed, withTail(detail, a.tail.String()))
}

// waitOutput waits a little for the output follower to read the end of
// the agent's output (it returns at the end of the stream).
func (b *Backend) waitOutput(a *agent) {
	b.mu.Lock()
	done := a.logsDone
	b.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(outputDrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// lineLogger logs each output line of an agent at debug level.
func (b *Backend) lineLogger(agentID string) func(stream, line string) {
	log := b.log.With("agent_id", agentID)
	return func(stream, line string) {
		log.Debug("agent output", "stream", stream, "line", line)
	}
}
