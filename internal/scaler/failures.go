package scaler

import (
	"errors"
	"fmt"
	"time"
)

// Failure tracking: every scaler.failed is kept in a ring for diagnose,
// whether the spawn was bound to a job or warm, before or after its agent
// registered.
const (
	// failureRing is how many failures are kept, over every scaler.
	failureRing = 256
	// FailureWindow is the window diagnose looks at.
	FailureWindow = 5 * time.Minute
	// consistentFailures is how many deferring failures in a row make the
	// manager warn that a scaler fails consistently.
	consistentFailures = 5
	// DefaultFailJobsAfter is how many deferring failures in a row of a
	// scaler fail the jobs waiting for it.
	DefaultFailJobsAfter = 3
)

// failure is one scaler.failed.
type failure struct {
	scaler, backend string
	bound           bool
	detail          string
	at              time.Time
}

// failures is a ring of the last failureRing failures. Guarded by the
// manager's mu.
type failures struct {
	ring [failureRing]failure
	next int
	n    int
}

func (f *failures) add(x failure) {
	f.ring[f.next] = x
	f.next = (f.next + 1) % failureRing
	f.n = min(f.n+1, failureRing)
}

// FailureSummary is what diagnose shows of a scaler's recent failures.
type FailureSummary struct {
	Backend   string
	Bound     int
	Unbound   int
	LastError string
	LastAt    time.Time
}

// RecentFailures summarises, per scaler, the spawn failures of the last
// window (FailureWindow when 0).
func (m *Manager) RecentFailures(window time.Duration) map[string]FailureSummary {
	if window <= 0 {
		window = FailureWindow
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	since := m.cfg.Now().Add(-window)
	out := map[string]FailureSummary{}
	for i := range m.failures.n {
		x := m.failures.ring[(m.failures.next-1-i+2*failureRing)%failureRing] // newest first
		if x.at.Before(since) {
			continue
		}
		s := out[x.scaler]
		if s.LastAt.IsZero() {
			s.Backend, s.LastError, s.LastAt = x.backend, x.detail, x.at
		}
		if x.bound {
			s.Bound++
		} else {
			s.Unbound++
		}
		out[x.scaler] = s
	}
	return out
}

// ErrUnknownScaler is Retry's answer for a name no scaler has.
var ErrUnknownScaler = errors.New("no such scaler")

// Retry lifts a scaler's deferral and forgets its failures in a row, so
// the next queued job is offered to it at once (after the operator fixed
// the host, say).
func (m *Manager) Retry(name string) error {
	m.mu.Lock()
	st := m.scalers[name]
	if st == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownScaler, name)
	}
	st.deferUntil, st.deferFor, st.failures = time.Time{}, 0, 0
	m.mu.Unlock()
	m.log.Info("scaler deferral lifted", "scaler", name)
	m.sink.CapacityFreed()
	return nil
}
