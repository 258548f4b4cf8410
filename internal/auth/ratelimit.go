package auth

import (
	"sync"
	"time"
)

// FailureLimiterConfig tunes a FailureLimiter.
type FailureLimiterConfig struct {
	// MaxFailures is how many failed authentications a client address may
	// have within Window: the last of them blocks it, so its next request
	// is refused. Zero or less disables the limiter.
	MaxFailures int
	// Window is both the counting window and how long a block lasts; 0
	// means one minute.
	Window time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// maxTracked bounds the addresses a limiter remembers; past it, stale
// ones are dropped.
const maxTracked = 10000

// FailureLimiter counts failed authentications per client address and
// blocks an address that has too many: every authenticated request from
// it is then answered 429 until the block ends, with or without a valid
// token, so guessing cannot go on in the background of real use.
type FailureLimiter struct {
	cfg     FailureLimiterConfig
	mu      sync.Mutex
	clients map[string]*failures
}

type failures struct {
	count        int
	windowStart  time.Time
	blockedUntil time.Time
}

// NewFailureLimiter returns a limiter.
func NewFailureLimiter(cfg FailureLimiterConfig) *FailureLimiter {
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &FailureLimiter{cfg: cfg, clients: map[string]*failures{}}
}

// Blocked reports whether addr is blocked, and for how long still.
func (l *FailureLimiter) Blocked(addr string) (time.Duration, bool) {
	if l == nil || l.cfg.MaxFailures <= 0 {
		return 0, false
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[addr]
	if f == nil || !now.Before(f.blockedUntil) {
		return 0, false
	}
	return f.blockedUntil.Sub(now), true
}

// Fail counts one failed authentication of addr and reports whether it
// got addr blocked.
func (l *FailureLimiter) Fail(addr string) bool {
	if l == nil || l.cfg.MaxFailures <= 0 {
		return false
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[addr]
	if f == nil {
		if len(l.clients) >= maxTracked {
			l.prune(now)
		}
		f = &failures{windowStart: now}
		l.clients[addr] = f
	}
	if now.Sub(f.windowStart) >= l.cfg.Window {
		f.count, f.windowStart = 0, now
	}
	f.count++
	if f.count >= l.cfg.MaxFailures && !now.Before(f.blockedUntil) {
		f.blockedUntil = now.Add(l.cfg.Window)
		f.count, f.windowStart = 0, now
		return true
	}
	return false
}

// prune drops addresses whose window and block are over.
func (l *FailureLimiter) prune(now time.Time) {
	for addr, f := range l.clients {
		if now.Sub(f.windowStart) >= l.cfg.Window && !now.Before(f.blockedUntil) {
			delete(l.clients, addr)
		}
	}
}
