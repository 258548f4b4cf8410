package scaler

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Run keeps the warm pools at their size until ctx ends: every WarmTick
// (and once at the start) it destroys idle warm agents above a pool's
// size that were idle longer than its idle timeout, oldest first, and
// spawns unbound agents for each label set below its size, within the
// caps. A warm agent is an ordinary registered agent: the dispatcher hands
// it any job its labels cover, after which it is no longer warm.
//
// Every SweepInterval it also sweeps each backend that can reap leftovers
// (Reaper), sparing what the manager tracks; the sweep runs in this loop,
// so it never overlaps itself.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	tick, every := m.cfg.WarmTick, m.cfg.SweepInterval
	m.mu.Unlock()
	t := time.NewTicker(tick)
	defer t.Stop()
	sweep := time.NewTicker(every)
	defer sweep.Stop()
	for {
		m.tendWarmPools(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-sweep.C:
			m.SweepLeftovers(ctx)
		}
	}
}

// SweepLeftovers asks every backend that can reap leftovers to remove the
// compute of this instance that nothing tracks, sparing the manager's own
// spawns and agents, and logs what went.
func (m *Manager) SweepLeftovers(ctx context.Context) {
	type job struct {
		name string
		r    Reaper
		keep []string
	}
	m.mu.Lock()
	var jobs []job
	for _, name := range m.order {
		st := m.scalers[name]
		r, ok := st.backend.(Reaper)
		if !ok {
			continue
		}
		j := job{name: name, r: r}
		for id, sp := range m.agents {
			if sp.scaler == name {
				j.keep = append(j.keep, id)
			}
		}
		jobs = append(jobs, j)
	}
	m.mu.Unlock()
	for _, j := range jobs {
		reaped, err := j.r.ReapLeftovers(ctx, j.keep)
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("periodic leftover sweep", "scaler", j.name, "error", err)
		case len(reaped) > 0:
			m.log.Info("leftover compute reaped", "scaler", j.name, "agents", reaped)
		}
	}
}

// OnAgentBusy records that an agent took a job.
func (m *Manager) OnAgentBusy(agentID string) {
	m.mu.Lock()
	if sp, ok := m.agents[agentID]; ok {
		sp.busy = true
	}
	// Whatever job it took, the job it was spawned for (if another agent
	// took that one) may need an agent of its own again.
	for job, id := range m.byJob {
		if id == agentID {
			delete(m.byJob, job)
		}
	}
	m.mu.Unlock()
}

// boundIdleTimeout is how long an agent spawned for a job may sit idle
// after registering before it is destroyed (its job went to another).
const boundIdleTimeout = time.Minute

// warmKey identifies a pool: a scaler and one of its label sets.
type warmKey struct{ scaler, labels string }

func (m *Manager) tendWarmPools(ctx context.Context) {
	type idle struct {
		sp    *spawn
		since time.Time
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return
	}
	now := m.cfg.Now()
	// Count each pool's warm agents: idle registered ones and spawns in
	// flight that are bound to no job.
	ready := map[warmKey][]idle{}
	inFlight := map[warmKey]int{}
	for _, sp := range m.agents {
		if sp.jobID != "" || sp.busy {
			continue
		}
		k := warmKey{sp.scaler, sp.labelSet.Key()}
		if sp.registered {
			ready[k] = append(ready[k], idle{sp, sp.registeredAt})
		} else {
			inFlight[k]++
		}
	}
	var reap []*spawn
	var spawns []struct {
		st *scalerState
		ls LabelSet
	}
	for _, name := range m.order {
		st := m.scalers[name]
		size := st.cfg.WarmPool.Size
		if st.retiring {
			size = 0
		}
		for _, ls := range st.cfg.LabelSets {
			k := warmKey{name, ls.Key()}
			agents := ready[k]
			sort.Slice(agents, func(i, j int) bool { return agents[i].since.Before(agents[j].since) })
			for i := 0; i < len(agents)-size; i++ {
				if now.Sub(agents[i].since) >= st.cfg.WarmPool.IdleTimeout || st.retiring {
					reap = append(reap, agents[i].sp)
				}
			}
			deficit := size - len(agents) - inFlight[k]
			for ; deficit > 0; deficit-- {
				if m.totalActive()+len(spawns) >= m.cfg.GlobalMaxAgents || st.active+countFor(spawns, st) >= st.cfg.MaxAgents ||
					countFor(spawns, st) == 0 && st.resourceRefusal(ls.Requests) != "" {
					break
				}
				spawns = append(spawns, struct {
					st *scalerState
					ls LabelSet
				}{st, ls})
			}
		}
	}
	for _, w := range spawns {
		if now.Before(w.st.deferUntil) {
			continue
		}
		m.startSpawnLocked(w.st, w.ls, enrichedLabels(w.st.cfg, w.ls), ScaleRequest{})
	}
	// A spawn whose agent never registered (it cannot reach the
	// orchestrator, say) would hold its slot forever: past the spawn
	// deadline after Spawn returned, it counts as failed.
	var stale []*spawn
	for _, sp := range m.agents {
		if !sp.registered && sp.handle.AgentID != "" && now.Sub(sp.requested) > m.cfg.SpawnTimeout {
			stale = append(stale, sp)
		}
		// An agent spawned for a job that another agent took sits idle:
		// it is one-shot and unbound to any pool, so it goes.
		if sp.registered && !sp.busy && sp.jobID != "" && now.Sub(sp.registeredAt) > boundIdleTimeout {
			reap = append(reap, sp)
		}
	}
	m.mu.Unlock()
	for _, sp := range stale {
		m.mu.Lock()
		st := m.scalers[sp.scaler]
		m.mu.Unlock()
		if st == nil {
			continue
		}
		detail := fmt.Sprintf("agent %s did not register within the spawn deadline of %s", sp.agentID, m.cfg.SpawnTimeout)
		m.event(sp, Event{AgentID: sp.agentID, Type: EventFailed, Detail: detail})
	}
	for _, sp := range reap {
		if !m.sink.RetireAgent(sp.agentID) {
			continue // it took a job meanwhile
		}
		m.log.Info("idle warm agent reaped", "scaler", sp.scaler, "agent_id", sp.agentID)
		m.OnAgentDisconnected(sp.agentID)
	}
	_ = ctx
}

func countFor(spawns []struct {
	st *scalerState
	ls LabelSet
}, st *scalerState) int {
	n := 0
	for _, s := range spawns {
		if s.st == st {
			n++
		}
	}
	return n
}
