package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/kici-dev/kici/internal/scaler"
)

// errDestroyed is the cause a Destroy gives a spawn still in progress.
var errDestroyed = errors.New("agent destroyed while spawning")

// The agent's work directory inside the container, unless the label set's
// env says otherwise.
const (
	agentWorkdirVar = "KICI_AGENT_WORKDIR"
	agentWorkdir    = "/tmp/kici-agent"
)

// pidsLimit caps the processes of one agent container.
const pidsLimit = 4096

// cleanupTimeout bounds the removal of a container after a failure, which
// runs on a fresh context (the spawn's may be cancelled).
const cleanupTimeout = 30 * time.Second

// Spawn starts an agent container for req and returns once it runs. See
// the package documentation for the events it emits. A spawn that fails
// after the container was created sends EventFailed (the error and the
// agent's last output lines) and removes the container; a missing image
// that policy forbids pulling, or that cannot be pulled, is refused
// (scaler.IsDeterministic).
func (b *Backend) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	if req.AgentID == "" {
		return scaler.Handle{}, errors.New("spawn container agent: AgentID is empty")
	}
	if req.LabelSet.Image == "" {
		return scaler.Handle{}, scaler.Refused("label set %q has no image", req.LabelSet.Key())
	}
	policy, err := parsePullPolicy(req.LabelSet.PullPolicy)
	if err != nil {
		return scaler.Handle{}, scaler.Refused("label set %q: %w", req.LabelSet.Key(), err)
	}
	spawnCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	a := &agent{
		id:        req.AgentID,
		onEvent:   req.OnEvent,
		tail:      newOutputTail(b.lineLogger(req.AgentID)),
		abort:     abort,
		spawnDone: make(chan struct{}),
	}
	// Tracked before any I/O, so that a concurrent Destroy finds it.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, ErrClosed)
	}
	if _, dup := b.agents[req.AgentID]; dup {
		b.mu.Unlock()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: already tracked", req.AgentID)
	}
	b.agents[req.AgentID] = a
	b.spawns.Add(1)
	b.mu.Unlock()
	defer b.spawns.Done()
	defer close(a.spawnDone)

	started := b.cfg.Now()
	containerID, err := b.spawn(spawnCtx, a, req, policy)
	if err != nil {
		err = spawnError(ctx, spawnCtx, err)
		b.unwind(ctx, a, err)
		return scaler.Handle{}, err
	}
	name := req.Scaler
	if name == "" {
		name = b.cfg.Name
	}
	return scaler.Handle{AgentID: req.AgentID, Scaler: name, Ref: containerID, Blob: encodeBlob(containerID), SpawnedAt: started}, nil
}

// spawnError makes sure a spawn aborted by its caller's ctx, or by a
// Destroy, says so (errors.Is) whatever the engine client made of it.
func spawnError(parent, spawnCtx context.Context, err error) error {
	if perr := parent.Err(); perr != nil {
		if errors.Is(err, perr) {
			return err
		}
		return fmt.Errorf("%w: %w", perr, err)
	}
	if cause := context.Cause(spawnCtx); errors.Is(cause, errDestroyed) && !errors.Is(err, errDestroyed) {
		return fmt.Errorf("%w: %w", errDestroyed, err)
	}
	return err
}

// spawn does the work of Spawn and returns the container id.
func (b *Backend) spawn(ctx context.Context, a *agent, req scaler.SpawnRequest, policy pullPolicy) (string, error) {
	image := req.LabelSet.Image
	if err := b.ensureImage(ctx, a, image, policy); err != nil {
		return "", err
	}

	b.emit(a, scaler.EventProvisioning, "creating container")
	cfg, hostCfg := containerSpec(b.cfg, req)
	a.createTried = true
	resp, err := b.cli.ContainerCreate(ctx, cfg, hostCfg, nil, nil, containerName(req.AgentID))
	if err != nil {
		return "", fmt.Errorf("create container for agent %q: %w", req.AgentID, err)
	}
	for _, w := range resp.Warnings {
		b.log.Warn("container create warning", "agent_id", a.id, "container_id", shortID(resp.ID), "warning", w)
	}
	b.mu.Lock()
	a.containerID = resp.ID
	destroyed := a.destroyed
	b.mu.Unlock()
	if destroyed {
		return resp.ID, errDestroyed
	}

	b.emit(a, scaler.EventNetwork, "default network (no isolation)")
	if err := b.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return resp.ID, fmt.Errorf("start container %q: %w", shortID(resp.ID), err)
	}
	b.emit(a, scaler.EventReady, "container "+shortID(resp.ID))

	if !b.follow(a, resp.ID, "") {
		return resp.ID, errDestroyed
	}
	// An agent that exits from here on (even before Spawn returns) is
	// reported by the exit watch, after Spawn returned: the container
	// did start.
	b.emit(a, scaler.EventConnecting, "waiting for agent "+a.id+" to register")
	return resp.ID, nil
}

// unwind undoes a failed spawn: it stops following the agent, reports
// the failure with the agent's output (unless the agent registered or was
// destroyed meanwhile), removes the container and untracks the agent if
// it is still this spawn's.
func (b *Backend) unwind(ctx context.Context, a *agent, spawnErr error) {
	b.mu.Lock()
	if b.agents[a.id] == a {
		delete(b.agents, a.id)
	}
	containerID, stop := a.containerID, a.stop
	report := !a.registered && !a.destroyed
	a.destroyed = true
	b.mu.Unlock()

	cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	switch {
	case containerID != "":
		if err := b.removeContainer(cleanupCtx, containerID, 0); err != nil {
			b.log.Warn("remove container of failed spawn", "agent_id", a.id, "container_id", shortID(containerID), "error", err)
		}
		b.waitOutput(a) // the output ends with the container
		if stop != nil {
			stop()
		}
		if report {
			b.emit(a, scaler.EventFailed, withTail(spawnErr.Error(), a.tail.String()))
		}
	case a.createTried:
		// The create may have gone through even though its answer was
		// lost (a cancelled ctx): find the container by name, and
		// remove it only if its labels say it is this agent's.
		if err := b.removeByName(cleanupCtx, a.id); err != nil {
			b.log.Warn("remove container of failed spawn", "agent_id", a.id, "error", err)
		}
	}
}

// containerName is the name of an agent's container: its agent id.
func containerName(agentID string) string { return agentID }

// containerSpec builds the container's config from the spawn request.
func containerSpec(cfg Config, req scaler.SpawnRequest) (*container.Config, *container.HostConfig) {
	ls := req.LabelSet
	env := map[string]string{agentWorkdirVar: agentWorkdir}
	maps.Copy(env, req.Env)
	maps.Copy(env, ls.Env) // the label set wins
	envList := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}

	labels := map[string]string{
		LabelManaged:  "true",
		LabelInstance: cfg.Instance,
		LabelScaler:   cfg.Name,
		LabelAgentID:  req.AgentID,
		LabelLabels:   ls.Key(),
	}
	if req.BoundJobID != "" {
		labels[LabelBoundJobID] = req.BoundJobID
	}
	if req.RunID != "" {
		labels[LabelRunID] = req.RunID
	}

	limits := effectiveLimits(req.Limits, ls.Limits)
	pids := int64(pidsLimit)
	hostCfg := &container.HostConfig{
		Binds:      slices.Clone(ls.Volumes),
		ExtraHosts: slices.Clone(cfg.ExtraHosts),
		AutoRemove: false, // a failure report reads the exited container's output
		Resources: container.Resources{
			Memory:    limits.MemoryBytes,
			NanoCPUs:  int64(math.Round(limits.CPUs * 1e9)),
			PidsLimit: &pids,
		},
	}
	return &container.Config{Image: ls.Image, Env: envList, Labels: labels}, hostCfg
}

// effectiveLimits takes each field from req, or from the label set when
// req leaves it zero.
func effectiveLimits(req, labelSet scaler.Spec) scaler.Spec {
	if req.CPUs == 0 {
		req.CPUs = labelSet.CPUs
	}
	if req.MemoryBytes == 0 {
		req.MemoryBytes = labelSet.MemoryBytes
	}
	return req
}
