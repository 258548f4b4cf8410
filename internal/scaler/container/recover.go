package container

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/kici-dev/kici/internal/scaler"
)

// Recover re-attaches the agents of handles whose containers still run:
// it tracks them again (as registered: an exit is then a disconnect),
// follows their output (starting from their last 50 lines) and watches
// for their exit, and returns their handles. A container that exists but
// does not run is removed; one that is gone is dropped. A container whose
// labels do not name the handle's agent, this scaler and this instance is
// neither re-attached nor touched. A handle whose blob is unreadable
// falls back to its Ref. Errors (an engine that does not answer, an
// unreadable handle) are joined and returned with the handles that were
// recovered; the handles that failed are neither returned nor removed.
func (b *Backend) Recover(ctx context.Context, handles []scaler.Handle) ([]scaler.Handle, error) {
	var out []scaler.Handle
	var errs []error
	for _, h := range handles {
		rh, ok, err := b.recoverOne(ctx, h)
		if err != nil {
			errs = append(errs, fmt.Errorf("recover agent %q: %w", h.AgentID, err))
			continue
		}
		if ok {
			out = append(out, rh)
		}
	}
	return out, errors.Join(errs...)
}

func (b *Backend) recoverOne(ctx context.Context, h scaler.Handle) (scaler.Handle, bool, error) {
	containerID := h.Ref
	rec, err := decodeBlob(h.Blob)
	switch {
	case err == nil:
		containerID = rec.ContainerID
	case containerID == "":
		return h, false, err
	}
	info, err := b.cli.ContainerInspect(ctx, containerID)
	if cerrdefs.IsNotFound(err) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("inspect container %q: %w", shortID(containerID), err)
	}
	if info.Config == nil || !b.owns(info.Config.Labels) || info.Config.Labels[LabelAgentID] != h.AgentID {
		b.log.Warn("recovered handle names a container that is not its agent's; left alone",
			"agent_id", h.AgentID, "container_id", shortID(containerID))
		return h, false, nil
	}
	if info.State == nil || !info.State.Running {
		if err := b.removeContainer(ctx, info.ID, 0); err != nil {
			return h, false, err
		}
		return h, false, nil
	}

	done := make(chan struct{})
	close(done)
	a := &agent{id: h.AgentID, containerID: info.ID, registered: true, spawnDone: done, tail: newOutputTail(b.lineLogger(h.AgentID))}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return h, false, ErrClosed
	}
	if _, dup := b.agents[h.AgentID]; dup {
		b.mu.Unlock()
		return h, false, errors.New("already tracked")
	}
	b.agents[h.AgentID] = a
	b.mu.Unlock()
	b.follow(a, info.ID, strconv.Itoa(tailLines))

	h.Ref, h.Blob = info.ID, encodeBlob(info.ID)
	if h.Scaler == "" {
		h.Scaler = b.cfg.Name
	}
	return h, true, nil
}
