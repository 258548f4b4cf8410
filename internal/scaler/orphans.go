package scaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Reaper is implemented by backends that can remove compute this
// orchestrator instance owns but no longer tracks (containers left by a
// crashed process). keep names agents to spare; everything else of the
// instance's that the backend does not track is removed.
type Reaper interface {
	ReapLeftovers(ctx context.Context, keep []string) ([]string, error)
}

// Orphan is one piece of live compute and whether the manager tracks it.
type Orphan struct {
	Scaler  string    `json:"scaler"`
	Backend string    `json:"backend"`
	AgentID string    `json:"agent_id"`
	Ref     string    `json:"ref"`
	Started time.Time `json:"started"`
	// Tracked is true when the manager knows the agent (spawning or
	// registered); an untracked one is an orphan an operator may stop.
	Tracked bool `json:"tracked"`
}

// Orphans lists the live compute of every scaler whose backend can list
// it, and whether each is tracked.
func (m *Manager) Orphans(ctx context.Context) ([]Orphan, error) {
	m.mu.Lock()
	type entry struct {
		name string
		b    Backend
	}
	var backends []entry
	for _, name := range m.order {
		if st := m.scalers[name]; st != nil && st.backend.Capabilities().ListsCompute {
			backends = append(backends, entry{name, st.backend})
		}
	}
	m.mu.Unlock()
	var out []Orphan
	var errs []error
	for _, e := range backends {
		list, err := e.b.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list compute of scaler %q: %w", e.name, err))
			continue
		}
		for _, c := range list {
			m.mu.Lock()
			_, tracked := m.agents[c.AgentID]
			m.mu.Unlock()
			out = append(out, Orphan{Scaler: e.name, Backend: e.b.Type(), AgentID: c.AgentID, Ref: c.Ref, Started: c.Started, Tracked: tracked})
		}
	}
	return out, errors.Join(errs...)
}

// StopOrphans stops the named untracked agents (an agent the manager
// tracks is refused: it is working). It returns the ids stopped.
func (m *Manager) StopOrphans(ctx context.Context, ids []string) ([]string, error) {
	orphans, err := m.Orphans(ctx)
	if err != nil {
		return nil, err
	}
	byScaler := map[string][]string{}
	keep := map[string][]string{}
	var refused []string
	for _, o := range orphans {
		named := slices.Contains(ids, o.AgentID)
		switch {
		case named && o.Tracked:
			refused = append(refused, o.AgentID)
			keep[o.Scaler] = append(keep[o.Scaler], o.AgentID)
		case named:
			byScaler[o.Scaler] = append(byScaler[o.Scaler], o.AgentID)
		default:
			keep[o.Scaler] = append(keep[o.Scaler], o.AgentID)
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("refusing to stop tracked agents %v: they are working", refused)
	}
	var stopped []string
	var errs []error
	for name, want := range byScaler {
		m.mu.Lock()
		st := m.scalers[name]
		m.mu.Unlock()
		r, ok := st.backend.(Reaper)
		if !ok {
			errs = append(errs, fmt.Errorf("scaler %q cannot stop untracked compute", name))
			continue
		}
		got, err := r.ReapLeftovers(ctx, keep[name])
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range got {
			if slices.Contains(want, id) {
				stopped = append(stopped, id)
			}
		}
	}
	for _, id := range ids {
		if !slices.Contains(stopped, id) && !slices.ContainsFunc(orphans, func(o Orphan) bool { return o.AgentID == id }) {
			errs = append(errs, fmt.Errorf("no live compute for agent %q", id))
		}
	}
	slices.Sort(stopped)
	return stopped, errors.Join(errs...)
}
