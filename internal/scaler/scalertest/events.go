package scalertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// recorder is a SpawnRequest.OnEvent that keeps the events.
type recorder struct {
	mu      sync.Mutex
	events  []scaler.Event
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(ev scaler.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, ev := range r.events {
		out[i] = ev.Type
	}
	return out
}

func (r *recorder) failures() []scaler.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []scaler.Event
	for _, ev := range r.events {
		if ev.Type == scaler.EventFailed {
			out = append(out, ev)
		}
	}
	return out
}

// waitFailed returns the first EventFailed, waiting up to timeout for it.
func (r *recorder) waitFailed(t *testing.T, timeout time.Duration) scaler.Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		i := slices.IndexFunc(r.events, func(ev scaler.Event) bool { return ev.Type == scaler.EventFailed })
		var ev scaler.Event
		if i >= 0 {
			ev = r.events[i]
		}
		ch := r.changed
		r.mu.Unlock()
		if i >= 0 {
			return ev
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("waited %s for %s; got events %v", timeout, scaler.EventFailed, r.types())
		}
	}
}

// checkNoFailure fails the test if an EventFailed was recorded.
func (r *recorder) checkNoFailure(t *testing.T, why string) {
	t.Helper()
	for _, ev := range r.failures() {
		t.Errorf("got %s %q; want none: %s", ev.Type, ev.Detail, why)
	}
}
