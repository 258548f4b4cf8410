package api

import (
	"sync"
	"time"
)

// Default bounds of the rejected deliveries written to the delivery log.
const (
	// rejectedPerKey is how many rejected deliveries of one source from
	// one client address are recorded per rejectWindow.
	rejectedPerKey = 10
	// rejectedTotal is how many rejected deliveries are recorded per
	// rejectWindow across every source and address.
	rejectedTotal = 60
	// rejectWindow is the sampling window.
	rejectWindow = time.Minute
	// maxSampledKeys bounds the keys a sampler remembers; a new key past
	// it is not recorded until the window ends.
	maxSampledKeys = 10000
)

// rejectKey is what a rejected delivery is sampled by: the source it was
// sent to (empty for a source that does not exist, so that made-up names
// share one key) and the client address it came from.
type rejectKey struct {
	source, client string
}

// rejectSampler decides which rejected webhook deliveries are written to
// the delivery log, so that a flood of unauthenticated posts cannot fill
// the database: in each window of rejectWindow, at most perKey for one
// key and at most total overall are recorded; the rest are only counted.
// The windows are fixed, shared by every key, and start at the first
// rejected delivery after the previous one ended. A *rejectSampler is
// safe for concurrent use.
type rejectSampler struct {
	perKey, total int
	window        time.Duration
	now           func() time.Time

	mu          sync.Mutex
	windowStart time.Time
	recorded    int // in this window, every key
	keys        map[rejectKey]*rejectCount
}

// rejectCount is one key's share of the current window.
type rejectCount struct {
	recorded int
	// dropped counts the key's deliveries not recorded since its last
	// recorded one; it carries over into the next window.
	dropped int
}

// newRejectSampler returns a sampler with the given bounds; now nil means
// time.Now.
func newRejectSampler(perKey, total int, window time.Duration, now func() time.Time) *rejectSampler {
	if now == nil {
		now = time.Now
	}
	return &rejectSampler{perKey: perKey, total: total, window: window, now: now, keys: map[rejectKey]*rejectCount{}}
}

// admit reports whether a rejected delivery of key is to be recorded,
// and if so how many of the key's deliveries before it were not (for the
// record to say so).
func (s *rejectSampler) admit(key rejectKey) (record bool, droppedBefore int) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.windowStart.IsZero() || now.Sub(s.windowStart) >= s.window || now.Before(s.windowStart) {
		s.windowStart, s.recorded = now, 0
		// Keep only the keys with drops still to report, so the map
		// does not grow across windows.
		for k, c := range s.keys {
			if c.dropped == 0 {
				delete(s.keys, k)
			} else {
				c.recorded = 0
			}
		}
	}
	c := s.keys[key]
	if c == nil {
		if len(s.keys) >= maxSampledKeys {
			return false, 0
		}
		c = &rejectCount{}
		s.keys[key] = c
	}
	if c.recorded >= s.perKey || s.recorded >= s.total {
		c.dropped++
		return false, 0
	}
	c.recorded++
	s.recorded++
	droppedBefore, c.dropped = c.dropped, 0
	return true, droppedBefore
}
