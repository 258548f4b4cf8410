package container

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Destroy stops the agent's container (SIGTERM, then SIGKILL after
// Config.StopGrace) and removes it. The agent is untracked before any
// I/O. An unknown or already-destroyed agent is not an error, and neither
// is a container that is already gone. A Spawn still in progress is
// aborted and removes what it created itself. With a cancelled ctx the
// polite stop is skipped, but the container is still force-removed
// (on a fresh context bounded to 30 s).
func (b *Backend) Destroy(ctx context.Context, agentID string) error {
	b.mu.Lock()
	a := b.agents[agentID]
	if a == nil {
		b.mu.Unlock()
		return nil
	}
	delete(b.agents, agentID)
	a.destroyed = true
	containerID, stop, abort := a.containerID, a.stop, a.abort
	b.mu.Unlock()

	if abort != nil {
		abort(errDestroyed) // a no-op once Spawn returned
	}
	if stop != nil {
		stop()
	}
	if containerID == "" {
		return nil // not created yet: the spawn's unwind removes it
	}
	if err := b.removeContainer(ctx, containerID, b.cfg.StopGrace); err != nil {
		return fmt.Errorf("destroy agent %q: %w", agentID, err)
	}
	return nil
}

// removeContainer stops a container with grace (0: kill at once) and
// force-removes it. A container that is already gone is not an error.
func (b *Backend) removeContainer(ctx context.Context, containerID string, grace time.Duration) error {
	if grace > 0 && ctx.Err() == nil {
		secs := int(grace / time.Second)
		err := b.cli.ContainerStop(ctx, containerID, container.StopOptions{Timeout: &secs})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		// Any other stop failure: the forced removal below kills it.
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := b.cli.ContainerRemove(rctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || cerrdefs.IsNotFound(err) || removalInProgress(err) {
		return nil
	}
	return fmt.Errorf("remove container %q: %w", shortID(containerID), err)
}

// removalInProgress reports the engine's answer to a second remove of a
// container being removed: the first one will finish the job.
func removalInProgress(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// removeByName removes the container named for agentID, but only when its
// labels say it is that agent's, of this scaler and instance.
func (b *Backend) removeByName(ctx context.Context, agentID string) error {
	info, err := b.cli.ContainerInspect(ctx, containerName(agentID))
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect container %q: %w", containerName(agentID), err)
	}
	if info.Config == nil || !b.owns(info.Config.Labels) || info.Config.Labels[LabelAgentID] != agentID {
		return nil
	}
	return b.removeContainer(ctx, info.ID, 0)
}

// owns reports whether a container's labels say this backend (its scaler,
// on this orchestrator instance) created it.
func (b *Backend) owns(labels map[string]string) bool {
	return labels[LabelManaged] == "true" && labels[LabelInstance] == b.cfg.Instance && labels[LabelScaler] == b.cfg.Name
}
