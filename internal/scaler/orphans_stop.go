package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrBadOrphanIDs is the error of StopOrphans for ids it refuses outright
// (none, too many, an empty one, one that is not an id); nothing was
// stopped. The API answers 400 with its message, which names the bad id.
var ErrBadOrphanIDs = errors.New("bad ids")

// MaxOrphanStops bounds the ids of one StopOrphans call.
const MaxOrphanStops = 100

// orphanStopWorkers bounds the stops in flight: each may take its
// backend's stop grace (10 s for a container), and a hundred named ids
// must end within the API's bound.
const orphanStopWorkers = 8

// StopOutcome is what StopOrphans did with one named id.
type StopOutcome struct {
	ID string `json:"id"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Error says why the compute was not stopped; empty for
	// OutcomeStopped.
	Error string `json:"error,omitempty"`
}

// ValidateOrphanIDs checks the ids of a StopOrphans call: 1 to
// MaxOrphanStops of them, none empty, none holding a "/", none "." or
// "..". The error wraps ErrBadOrphanIDs and names the first bad id.
func ValidateOrphanIDs(ids []string) error {
	if len(ids) == 0 || len(ids) > MaxOrphanStops {
		return fmt.Errorf("%w: want 1 to %d ids, got %d", ErrBadOrphanIDs, MaxOrphanStops, len(ids))
	}
	for i, id := range ids {
		switch {
		case id == "":
			return fmt.Errorf("%w: ids[%d] is empty", ErrBadOrphanIDs, i)
		case strings.Contains(id, "/"):
			return fmt.Errorf("%w: ids[%d] %q holds a \"/\"", ErrBadOrphanIDs, i, id)
		case id == "." || id == "..":
			return fmt.Errorf("%w: ids[%d] %q is not an id", ErrBadOrphanIDs, i, id)
		}
	}
	return nil
}

// StopOrphans stops the named untracked compute, and nothing else. It
// answers one outcome per id, in the order given (an id named twice is
// handled once and answered twice). Compute that any tracker holds is
// OutcomeTracked and its backend is not called; compute no scaler's
// backend lists is OutcomeNotFound; compute its backend cannot confirm as
// its own is OutcomeUnverified; a backend that is no OrphanStopper gives
// OutcomeError. Otherwise the backend's StopOrphan decides, re-checking
// the trackers right before it kills. When the trackers cannot be read,
// every id is OutcomeTracked. The error is set only for ids refused
// outright (ErrBadOrphanIDs); nothing is stopped then.
func (m *Manager) StopOrphans(ctx context.Context, ids []string) ([]StopOutcome, error) {
	if err := ValidateOrphanIDs(ids); err != nil {
		return nil, err
	}
	t := m.readTrackers(ctx)
	list, listErr := m.listCompute(ctx)
	var unique []string
	done := map[string]*StopOutcome{}
	for _, id := range ids {
		if done[id] == nil {
			done[id] = &StopOutcome{ID: id}
			unique = append(unique, id)
		}
	}
	sem := make(chan struct{}, orphanStopWorkers)
	var wg sync.WaitGroup
	for _, id := range unique {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			*done[id] = m.stopOrphan(ctx, id, t, list, listErr)
		})
	}
	wg.Wait()
	out := make([]StopOutcome, 0, len(ids))
	for _, id := range ids {
		out = append(out, *done[id])
	}
	return out, nil
}

// stopOrphan decides about one id, given the trackers and the listing
// read at the start of StopOrphans, and calls its backend if it may.
func (m *Manager) stopOrphan(ctx context.Context, id string, t trackers, list []listed, listErr error) StopOutcome {
	res := func(outcome, format string, args ...any) StopOutcome {
		return StopOutcome{ID: id, Outcome: outcome, Error: fmt.Sprintf(format, args...)}
	}
	if t.err != nil {
		return res(OutcomeTracked, "%v; every compute counts as tracked", t.err)
	}
	if by := m.trackedBy(id, t); len(by) > 0 {
		return res(OutcomeTracked, "tracked by %s: it may be working", strings.Join(by, ", "))
	}
	i := -1
	for j, l := range list {
		if l.compute.AgentID == id {
			i = j
			break
		}
	}
	if i < 0 {
		if listErr != nil {
			return res(OutcomeError, "no scaler lists compute of this id, and some could not be listed: %v", listErr)
		}
		return res(OutcomeNotFound, "no scaler lists live compute of this id")
	}
	l := list[i]
	if l.compute.Unverified {
		return res(OutcomeUnverified, "scaler %q: the %s backend cannot confirm this compute is its own; it is never stopped", l.scaler, l.backend.Type())
	}
	s, ok := l.backend.(OrphanStopper)
	if !ok {
		return res(OutcomeError, "scaler %q: the %s backend cannot stop untracked compute", l.scaler, l.backend.Type())
	}
	outcome, err := s.StopOrphan(ctx, id, func(id string) bool { return m.isTracked(ctx, id) })
	switch {
	case !knownOutcome(outcome):
		return res(OutcomeError, "scaler %q: stop %q: the backend answered outcome %q (err %v)", l.scaler, id, outcome, err)
	case outcome == OutcomeStopped:
		m.log.Info("orphan stopped", "scaler", l.scaler, "agent_id", id, "ref", l.compute.Ref)
		return StopOutcome{ID: id, Outcome: OutcomeStopped}
	case err != nil:
		return res(outcome, "scaler %q: %v", l.scaler, err)
	default:
		return res(outcome, "scaler %q: %s", l.scaler, backendReason[outcome])
	}
}

// backendReason explains an outcome a backend gave without an error.
var backendReason = map[string]string{
	OutcomeTracked:    "the backend tracks it, or it became tracked: it may be working",
	OutcomeUnverified: "the backend cannot confirm this compute is its own; it is never stopped",
	OutcomeNotLive:    "it does not run; the start-up reaper removes it",
	OutcomeNotFound:   "the backend no longer finds it",
	OutcomeError:      "the backend failed without saying why",
}

// knownOutcome reports whether o is one of the Outcome constants.
func knownOutcome(o string) bool {
	switch o {
	case OutcomeStopped, OutcomeTracked, OutcomeUnverified, OutcomeNotLive, OutcomeNotFound, OutcomeError:
		return true
	}
	return false
}
