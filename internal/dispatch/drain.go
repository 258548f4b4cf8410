package dispatch

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/store"
)

// LoadDrains reads the agent drains from the database, so that drained
// agents stay drained across restarts. Call it once before agents connect.
func (d *Dispatcher) LoadDrains(ctx context.Context) error {
	list, err := d.db.ListAgentDrains(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drains = make(map[string]store.AgentDrain, len(list))
	for _, dr := range list {
		d.drains[dr.AgentID] = dr
	}
	return nil
}

// Drain stops giving agentID new jobs, for host maintenance: the jobs it
// runs finish normally. The drain is stored first, so it holds across the
// agent's reconnects and the orchestrator's restarts until Undrain. The
// agent need not be connected. Draining a drained agent replaces the
// reason and author.
func (d *Dispatcher) Drain(ctx context.Context, agentID, reason, by string) (store.AgentDrain, error) {
	dr, err := d.db.PutAgentDrain(ctx, store.AgentDrain{AgentID: agentID, Reason: strings.TrimSpace(reason), DrainedBy: by})
	if err != nil {
		return store.AgentDrain{}, err
	}
	d.mu.Lock()
	d.drains[agentID] = dr
	d.mu.Unlock()
	if a := d.reg.get(agentID); a != nil {
		a.setDraining(true)
	}
	d.log.Info("agent drained", "agent_id", agentID, "reason", dr.Reason, "by", by)
	return dr, nil
}

// Undrain lets agentID take jobs again; store.ErrNotFound if it was not
// drained.
func (d *Dispatcher) Undrain(ctx context.Context, agentID string) error {
	if err := d.db.DeleteAgentDrain(ctx, agentID); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.drains, agentID)
	d.mu.Unlock()
	if a := d.reg.get(agentID); a != nil {
		a.setDraining(false)
	}
	d.log.Info("agent undrained", "agent_id", agentID)
	d.JobsQueued()
	return nil
}

// Drains returns every drain, by agent id.
func (d *Dispatcher) Drains() []store.AgentDrain {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := slices.Sorted(maps.Keys(d.drains))
	out := make([]store.AgentDrain, 0, len(ids))
	for _, id := range ids {
		out = append(out, d.drains[id])
	}
	return out
}

// drainOf returns the drain of agentID, if it is drained.
func (d *Dispatcher) drainOf(agentID string) (store.AgentDrain, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dr, ok := d.drains[agentID]
	return dr, ok
}
