package scaler

import (
	"context"
	"fmt"
	"time"
)

// SpawnRecord is the durable record of one spawned agent.
type SpawnRecord struct {
	AgentID    string
	Scaler     string
	JobID      string
	RunID      string
	LabelKey   string
	Handle     Handle
	Registered bool
}

// StateStore keeps spawn records across restarts. Every method may be
// called from any goroutine.
type StateStore interface {
	SaveSpawn(ctx context.Context, r SpawnRecord) error
	DeleteSpawn(ctx context.Context, agentID string) error
	ListSpawns(ctx context.Context) ([]SpawnRecord, error)
}

// persist writes a spawn's record; a failure is logged, not fatal: the
// agent works, only its adoption after a restart is at stake.
func (m *Manager) persist(sp *spawn) {
	if m.state == nil {
		return
	}
	// Read and write under persistMu, so the last write carries the
	// spawn's latest state: an agent can register before its Spawn call
	// returns, and a record written from the registration's earlier read
	// (no handle yet) after the spawn's own write lost the handle, and
	// with it the agent's adoption after a restart.
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	m.mu.Lock()
	rec := SpawnRecord{AgentID: sp.agentID, Scaler: sp.scaler, JobID: sp.jobID, RunID: sp.runID,
		LabelKey: sp.labelSet.Key(), Handle: sp.handle, Registered: sp.registered}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.state.SaveSpawn(ctx, rec); err != nil {
		m.log.Warn("save spawn record failed", "agent_id", sp.agentID, "error", err)
	}
}

func (m *Manager) unpersist(agentID string) {
	if m.state == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.state.DeleteSpawn(ctx, agentID); err != nil {
			m.log.Warn("delete spawn record failed", "agent_id", agentID, "error", err)
		}
	}()
}

// Recover adopts the agents a previous process spawned: each scaler's
// backend is handed the saved handles, and the compute it still finds
// alive is tracked again (it counts against the caps, and its agent is
// accepted when it reconnects with its token). Records of compute that is
// gone, or of scalers no longer configured, are deleted. It returns the
// adopted agent ids; call it once, before any spawn.
func (m *Manager) Recover(ctx context.Context) ([]string, error) {
	if m.state == nil {
		return nil, nil
	}
	recs, err := m.state.ListSpawns(ctx)
	if err != nil {
		return nil, fmt.Errorf("list spawn records: %w", err)
	}
	byScaler := map[string][]SpawnRecord{}
	for _, r := range recs {
		byScaler[r.Scaler] = append(byScaler[r.Scaler], r)
	}
	var adopted []string
	for name, rs := range byScaler {
		m.mu.Lock()
		st := m.scalers[name]
		m.mu.Unlock()
		var alive []Handle
		if st != nil && st.backend.Capabilities().Recoverable {
			handles := make([]Handle, 0, len(rs))
			for _, r := range rs {
				handles = append(handles, r.Handle)
			}
			alive, err = st.backend.Recover(ctx, handles)
			if err != nil {
				m.log.Warn("recover agents failed", "scaler", name, "error", err)
			}
		}
		live := map[string]Handle{}
		for _, h := range alive {
			live[h.AgentID] = h
		}
		for _, r := range rs {
			h, ok := live[r.AgentID]
			if !ok {
				m.unpersist(r.AgentID)
				continue
			}
			m.mu.Lock()
			ls, found := findLabelSet(st.cfg, r.LabelKey)
			if found {
				st.active++
				st.usage.CPUs += ls.Requests.CPUs
				st.usage.MemoryBytes += ls.Requests.MemoryBytes
				m.agents[r.AgentID] = &spawn{
					agentID: r.AgentID, scaler: name, labelSet: ls, labels: enrichedLabels(st.cfg, ls),
					jobID: r.JobID, runID: r.RunID, requested: m.cfg.Now(), handle: h, cancel: func() {},
				}
				adopted = append(adopted, r.AgentID)
			}
			m.mu.Unlock()
			if !found {
				_ = st.backend.Destroy(ctx, r.AgentID)
				m.unpersist(r.AgentID)
			}
		}
	}
	if len(adopted) > 0 {
		m.log.Info("agents adopted after a restart", "agents", adopted)
	}
	return adopted, nil
}

func findLabelSet(sc ScalerConfig, key string) (LabelSet, bool) {
	for _, ls := range sc.LabelSets {
		if ls.Key() == key {
			return ls, true
		}
	}
	return LabelSet{}, false
}
