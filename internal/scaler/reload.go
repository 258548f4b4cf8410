package scaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ReloadResult says what a reload changed, by scaler name.
type ReloadResult struct {
	Added     []string `json:"added"`
	Updated   []string `json:"updated"`
	Retired   []string `json:"retired"`
	Unchanged []string `json:"unchanged"`
}

// Reload replaces the configuration, all or nothing. added holds a
// backend, already built, for every scaler of cfg that is not running
// now; a scaler whose type changes is refused (it needs a restart). A
// scaler no longer configured retires: it takes no new work and its
// backend is closed once its last agent is gone. On error nothing
// changes and the caller closes the backends it built.
func (m *Manager) Reload(cfg Config, added map[string]Backend) (ReloadResult, error) {
	cfg.defaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	var res ReloadResult
	var errs []error
	seen := map[string]bool{}
	for _, sc := range cfg.Scalers {
		seen[sc.Name] = true
		st, running := m.scalers[sc.Name]
		switch {
		case running && st.cfg.Type != sc.Type:
			errs = append(errs, fmt.Errorf("scaler %q changes type from %s to %s; restart the orchestrator to apply", sc.Name, st.cfg.Type, sc.Type))
		case !running && added[sc.Name] == nil:
			errs = append(errs, fmt.Errorf("scaler %q is new but no backend was built for it", sc.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ReloadResult{}, err
	}
	// Commit: nothing below can fail.
	order := make([]string, 0, len(cfg.Scalers))
	for _, sc := range cfg.Scalers {
		if sc.MaxConcurrentSpawns <= 0 {
			sc.MaxConcurrentSpawns = DefaultMaxConcurrentSpawns
		}
		order = append(order, sc.Name)
		st, running := m.scalers[sc.Name]
		if !running {
			m.scalers[sc.Name] = &scalerState{cfg: sc, backend: added[sc.Name], sem: make(chan struct{}, sc.MaxConcurrentSpawns)}
			res.Added = append(res.Added, sc.Name)
			continue
		}
		if st.retiring || !sameConfig(st.cfg, sc) {
			res.Updated = append(res.Updated, sc.Name)
			// A changed entry is a fix worth trying at once.
			st.deferUntil, st.deferFor, st.failures = time.Time{}, 0, 0
		} else {
			res.Unchanged = append(res.Unchanged, sc.Name)
		}
		st.retiring = false
		if cap(st.sem) != sc.MaxConcurrentSpawns {
			st.sem = make(chan struct{}, sc.MaxConcurrentSpawns)
		}
		st.cfg = sc
	}
	for name, st := range m.scalers {
		if !seen[name] && !st.retiring {
			st.retiring = true
			res.Retired = append(res.Retired, name)
			order = append(order, name) // still listed while it drains
		} else if !seen[name] {
			order = append(order, name)
		}
	}
	m.cfg.GlobalMaxAgents, m.cfg.SpawnTimeout = cfg.GlobalMaxAgents, cfg.SpawnTimeout
	m.order = order
	for _, l := range [][]string{res.Added, res.Updated, res.Retired, res.Unchanged} {
		slices.Sort(l)
	}
	go m.sweepRetired()
	return res, nil
}

func sameConfig(a, b ScalerConfig) bool {
	if a.Name != b.Name || a.Type != b.Type || a.MaxAgents != b.MaxAgents || a.MaxConcurrentSpawns != b.MaxConcurrentSpawns ||
		a.OrchestratorURL != b.OrchestratorURL || !slices.Equal(a.MandatoryLabels, b.MandatoryLabels) || len(a.LabelSets) != len(b.LabelSets) ||
		a.WarmPool != b.WarmPool || a.ResourceCap != b.ResourceCap || a.FailJobsAfter != b.FailJobsAfter {
		return false
	}
	for i := range a.LabelSets {
		x, y := a.LabelSets[i], b.LabelSets[i]
		if x.Key() != y.Key() || x.Image != y.Image || x.BinaryPath != y.BinaryPath || x.PullPolicy != y.PullPolicy ||
			x.Requests != y.Requests || x.Limits != y.Limits || !slices.Equal(x.Volumes, y.Volumes) || fmt.Sprint(x.Env) != fmt.Sprint(y.Env) ||
			x.Firecracker != y.Firecracker {
			return false
		}
	}
	return true
}

// sweepRetired closes the backends of retired scalers that have no agent
// left, and forgets them.
func (m *Manager) sweepRetired() {
	m.mu.Lock()
	var done []*scalerState
	for name, st := range m.scalers {
		if st.retiring && st.active == 0 {
			done = append(done, st)
			delete(m.scalers, name)
			m.order = slices.DeleteFunc(m.order, func(n string) bool { return n == name })
		}
	}
	m.mu.Unlock()
	for _, st := range done {
		if err := st.backend.Close(context.Background()); err != nil {
			m.log.Warn("close retired scaler failed", "scaler", st.cfg.Name, "error", err)
		}
		m.log.Info("retired scaler removed", "scaler", st.cfg.Name)
	}
}

// Running reports whether the manager runs a scaler of that name,
// including one that is retiring (a reload that configures it again
// resurrects it with the same backend, so none must be built for it).
func (m *Manager) Running(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.scalers[name]
	return ok
}
