package container

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/kici-dev/kici/internal/scaler"
)

// List returns the containers of this scaler on this orchestrator
// instance, running or not (a stopped container still holds its disk
// until it is removed). Started is the container's creation time.
func (b *Backend) List(ctx context.Context) ([]scaler.Compute, error) {
	cs, err := b.listOwn(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]scaler.Compute, 0, len(cs))
	for _, c := range cs {
		out = append(out, scaler.Compute{
			AgentID:  c.Labels[LabelAgentID],
			Ref:      c.ID,
			Instance: c.Labels[LabelInstance],
			Started:  time.Unix(c.Created, 0),
		})
	}
	return out, nil
}

// ReapLeftovers removes the containers of this scaler on this
// orchestrator instance whose agent is neither in keep nor tracked by
// this backend (a spawn in progress, a recovered agent), typically at
// start-up after Recover, with keep the recovered agents. It never looks
// at a container labelled with another instance or scaler. It returns
// the agent ids reaped (a container's id when it has no agent id label);
// a container it failed to remove is left out and its error joined into
// err.
func (b *Backend) ReapLeftovers(ctx context.Context, keep []string) (reaped []string, err error) {
	cs, err := b.listOwn(ctx)
	if err != nil {
		return nil, err
	}
	spare := map[string]bool{}
	for _, id := range keep {
		spare[id] = true
	}
	b.mu.Lock()
	for id := range b.agents {
		spare[id] = true
	}
	b.mu.Unlock()
	// Leftovers are stopped in parallel: each may take the stop grace, and
	// a restarted orchestrator should be rid of all of them at once.
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, c := range cs {
		agentID := c.Labels[LabelAgentID]
		if agentID != "" && spare[agentID] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.removeContainer(ctx, c.ID, b.cfg.StopGrace)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("reap agent %q: %w", agentID, err))
				return
			}
			name := agentID
			if name == "" {
				name = c.ID
			}
			reaped = append(reaped, name)
			b.log.Info("leftover container reaped", "agent_id", agentID, "container_id", shortID(c.ID), "state", c.State)
		}()
	}
	wg.Wait()
	slices.Sort(reaped)
	return reaped, errors.Join(errs...)
}

var _ scaler.OrphanStopper = (*Backend)(nil)

// StopOrphan stops and removes the container of agent id, and no other:
// only a container labelled with this scaler, this orchestrator instance
// and that agent id is considered (else OutcomeNotFound). One this
// backend tracks is OutcomeTracked; one that does not run is
// OutcomeNotLive and is left to the start-up reaper (ReapLeftovers);
// isTracked is asked right before the stop, and a yes spares it too. The
// container gets Config.StopGrace before it is killed.
func (b *Backend) StopOrphan(ctx context.Context, id string, isTracked func(string) bool) (string, error) {
	cs, err := b.listOwn(ctx, filters.Arg("label", LabelAgentID+"="+id))
	if err != nil {
		return scaler.OutcomeError, err
	}
	cs = slices.DeleteFunc(cs, func(c container.Summary) bool { return c.Labels[LabelAgentID] != id })
	switch len(cs) {
	case 0:
		return scaler.OutcomeNotFound, nil
	case 1:
	default:
		return scaler.OutcomeError, fmt.Errorf("%d containers of scaler %q are labelled agent %q; remove them by hand", len(cs), b.cfg.Name, id)
	}
	c := cs[0]
	b.mu.Lock()
	_, tracked := b.agents[id]
	b.mu.Unlock()
	switch {
	case tracked:
		return scaler.OutcomeTracked, fmt.Errorf("the container backend tracks agent %q", id)
	case !live(c.State):
		return scaler.OutcomeNotLive, fmt.Errorf("container %s is %s; the start-up reaper removes it", shortID(c.ID), c.State)
	case isTracked(id):
		return scaler.OutcomeTracked, nil
	}
	if err := b.removeContainer(ctx, c.ID, b.cfg.StopGrace); err != nil {
		return scaler.OutcomeError, fmt.Errorf("stop agent %q: %w", id, err)
	}
	b.log.Info("orphaned container stopped", "agent_id", id, "container_id", shortID(c.ID))
	return scaler.OutcomeStopped, nil
}

// live reports whether a container in state s holds running processes.
func live(s container.ContainerState) bool {
	return s == container.StateRunning || s == container.StatePaused || s == container.StateRestarting
}

// listOwn lists every container (running or not) labelled with this
// scaler and instance, and matching more (a filter of the engine's list).
// The engine filters by label; the labels are checked again here, so that
// an engine that filtered loosely cannot make this backend touch another
// orchestrator's containers.
func (b *Backend) listOwn(ctx context.Context, more ...filters.KeyValuePair) ([]container.Summary, error) {
	args := filters.NewArgs(append([]filters.KeyValuePair{
		filters.Arg("label", LabelManaged+"=true"),
		filters.Arg("label", LabelInstance+"="+b.cfg.Instance),
		filters.Arg("label", LabelScaler+"="+b.cfg.Name),
	}, more...)...)
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("list containers of scaler %q: %w", b.cfg.Name, err)
	}
	own := cs[:0]
	for _, c := range cs {
		if b.owns(c.Labels) {
			own = append(own, c)
		}
	}
	return own, nil
}
