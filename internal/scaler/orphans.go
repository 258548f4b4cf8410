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
// instance's that the backend does not track is removed. Only start-up
// reaping uses it: an operator stops orphans one by one (OrphanStopper).
type Reaper interface {
	ReapLeftovers(ctx context.Context, keep []string) ([]string, error)
}

// OrphanStopper is implemented by backends that can stop one piece of
// untracked compute an operator named (StopOrphans). StopOrphan stops the
// compute of id only, and only when it is this backend's scaler's, runs,
// is confirmed to be the backend's own and is tracked neither by the
// backend nor by isTracked; it returns one of the Outcome constants and,
// for any outcome but OutcomeStopped, an error saying why (nil is allowed
// for OutcomeTracked, OutcomeNotFound and OutcomeNotLive).
//
// isTracked is the manager's view (its spawns and the orchestrator's
// trackers, read afresh on each call). The backend calls it again right
// before it kills, after its own checks, so that compute that became
// tracked meanwhile is spared (OutcomeTracked). StopOrphan may run
// concurrently with every other method, for different ids. A cancelled
// ctx aborts the stop: the backend returns OutcomeError, and what it had
// not removed yet is left to the start-up reaper.
type OrphanStopper interface {
	StopOrphan(ctx context.Context, id string, isTracked func(id string) bool) (outcome string, err error)
}

// Outcomes of stopping one named piece of compute (StopOrphans,
// OrphanStopper).
const (
	// OutcomeStopped: it was stopped and removed.
	OutcomeStopped = "stopped"
	// OutcomeTracked: something tracks it (it may be working); untouched.
	OutcomeTracked = "tracked"
	// OutcomeUnverified: it runs but the backend cannot confirm it is its
	// own; untouched.
	OutcomeUnverified = "unverified"
	// OutcomeNotLive: it exists but does not run; left to the start-up
	// reaper.
	OutcomeNotLive = "not-live"
	// OutcomeNotFound: no scaler's backend lists compute of that id.
	OutcomeNotFound = "not-found"
	// OutcomeError: the stop failed, or the backend cannot stop untracked
	// compute.
	OutcomeError = "error"
)

// Statuses of an Orphan.
const (
	// ComputeTracked: at least one tracker holds it (TrackedBy says which).
	ComputeTracked = "tracked"
	// ComputeOrphaned: nothing tracks it; an operator may stop it.
	ComputeOrphaned = "orphaned"
	// ComputeUnverified: nothing tracks it, but the backend cannot confirm
	// it is its own; it is never stopped.
	ComputeUnverified = "unverified"
)

// Trackers, the values of Orphan.TrackedBy.
const (
	// TrackedByBackend: the backend itself tracks it (Compute.Tracked),
	// e.g. a VM the firecracker backend spawned or re-attached.
	TrackedByBackend = "backend"
	// TrackedBySpawning: a spawn of the manager whose agent has not
	// registered yet (one adopted after a restart included).
	TrackedBySpawning = "spawning"
	// TrackedByRegistered: a registered agent the manager spawned, or an
	// agent the orchestrator has connected (Config.Trackers).
	TrackedByRegistered = "registered"
	// TrackedByBoundJob: a job not ended whose dispatch queue row is
	// dispatched to the agent or waits for it to come back
	// (Config.Trackers).
	TrackedByBoundJob = "bound-job"
)

// Orphan is one piece of live compute of a scaler, as GET
// /api/v1/scalers/orphans shows it, and what tracks it.
type Orphan struct {
	// ID is the agent id the compute runs (or was spawned for).
	ID      string `json:"id"`
	Scaler  string `json:"scaler"`
	Backend string `json:"backend"`
	// Ref is the backend's own reference (container id, PID).
	Ref     string    `json:"ref"`
	Started time.Time `json:"started"`
	// Status is ComputeTracked, ComputeOrphaned or ComputeUnverified.
	Status string `json:"status"`
	// TrackedBy lists the trackers holding it (TrackedBy constants), in
	// that order; empty, not nil, when none does. When the trackers could
	// not be read, Status is ComputeTracked and TrackedBy holds only what
	// the manager itself knows.
	TrackedBy []string `json:"tracked_by"`
}

// trackers is one reading of what tracks compute beyond the manager's
// own spawns (Config.Trackers).
type trackers struct {
	registered, boundJob map[string]bool
	// err is set when they could not be read: every compute then counts
	// as tracked.
	err error
}

// readTrackers calls Config.Trackers, if set.
func (m *Manager) readTrackers(ctx context.Context) trackers {
	m.mu.Lock()
	read := m.cfg.Trackers
	m.mu.Unlock()
	if read == nil {
		return trackers{}
	}
	registered, boundJob, err := read(ctx)
	if err != nil {
		return trackers{err: fmt.Errorf("read what tracks scaler compute: %w", err)}
	}
	return trackers{registered: registered, boundJob: boundJob}
}

// trackedBy lists what tracks id: the manager's own spawns, then t.
func (m *Manager) trackedBy(id string, t trackers) []string {
	by := []string{}
	m.mu.Lock()
	if sp, ok := m.agents[id]; ok {
		if sp.registered {
			by = append(by, TrackedByRegistered)
		} else {
			by = append(by, TrackedBySpawning)
		}
	}
	m.mu.Unlock()
	if t.registered[id] && !slices.Contains(by, TrackedByRegistered) {
		by = append(by, TrackedByRegistered)
	}
	if t.boundJob[id] {
		by = append(by, TrackedByBoundJob)
	}
	return by
}

// isTracked is the manager's view handed to OrphanStopper.StopOrphan:
// its own spawns and the trackers, read afresh; it fails closed.
func (m *Manager) isTracked(ctx context.Context, id string) bool {
	t := m.readTrackers(ctx)
	return t.err != nil || len(m.trackedBy(id, t)) > 0
}

// listed is one piece of compute a scaler's backend listed.
type listed struct {
	scaler  string
	backend Backend
	compute Compute
}

// listCompute lists the live compute of every scaler whose backend can
// list it, in scaler order, each id once (two scalers sharing a host may
// both see it: the first wins). A backend that cannot be listed is
// skipped and its error joined into err.
func (m *Manager) listCompute(ctx context.Context) ([]listed, error) {
	type entry struct {
		name string
		b    Backend
	}
	m.mu.Lock()
	var backends []entry
	for _, name := range m.order {
		if st := m.scalers[name]; st != nil && st.backend.Capabilities().ListsCompute {
			backends = append(backends, entry{name, st.backend})
		}
	}
	m.mu.Unlock()
	var out []listed
	var errs []error
	seen := map[string]bool{}
	for _, e := range backends {
		cs, err := e.b.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list compute of scaler %q: %w", e.name, err))
			continue
		}
		for _, c := range cs {
			if seen[c.AgentID] {
				continue
			}
			seen[c.AgentID] = true
			out = append(out, listed{scaler: e.name, backend: e.b, compute: c})
		}
	}
	return out, errors.Join(errs...)
}

// Orphans lists the live compute of every scaler whose backend can list
// it, tracked or not, with its status and what tracks it. The error says
// which scalers could not be listed (the rest is returned) and whether
// the trackers could not be read (every compute then counts as tracked).
func (m *Manager) Orphans(ctx context.Context) ([]Orphan, error) {
	t := m.readTrackers(ctx)
	list, err := m.listCompute(ctx)
	out := make([]Orphan, 0, len(list))
	for _, l := range list {
		o := Orphan{
			ID: l.compute.AgentID, Scaler: l.scaler, Backend: l.backend.Type(), Ref: l.compute.Ref,
			Started: l.compute.Started, TrackedBy: m.trackedBy(l.compute.AgentID, t),
		}
		if l.compute.Tracked {
			o.TrackedBy = append([]string{TrackedByBackend}, o.TrackedBy...)
		}
		switch {
		case len(o.TrackedBy) > 0 || t.err != nil:
			o.Status = ComputeTracked
		case l.compute.Unverified:
			o.Status = ComputeUnverified
		default:
			o.Status = ComputeOrphaned
		}
		out = append(out, o)
	}
	if t.err != nil {
		err = errors.Join(err, fmt.Errorf("%w; every compute counts as tracked", t.err))
	}
	return out, err
}
