// Package leader elects one coordinator among those sharing a PostgreSQL
// database, through a lease row with fencing (store.TryLease and
// store.Tx.CheckLease).
//
// An Elector tries the lease every Renew interval. Holding it, it acts as
// the leader only within a local trust window measured on the monotonic
// clock from the start of its last successful renewal: TTL less a safety
// margin. The database sets the lease's expiry by its own clock no
// earlier than that start plus TTL, so a leader that cannot renew (a
// partition, a paused process, a database that does not answer) stops
// acting before any other coordinator can take the lease. And since
// every write of a singleton duty checks the term in its own transaction
// (Fence), a leader that was deposed without noticing writes nothing.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/store"
)

// Defaults: a dead leader's lease is taken over within TTL + Renew.
const (
	DefaultTTL   = 10 * time.Second
	DefaultRenew = 2 * time.Second
	// LeaseName is the leader's lease.
	LeaseName = "leader"
)

// ErrNotLeader is returned by Fence when this process does not act as the
// leader (it never held the lease, lost it, or its trust window passed).
var ErrNotLeader = errors.New("not the leader")

// Leases is what the elector needs of the store (a *store.DB).
type Leases interface {
	TryLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error)
	ReleaseLease(ctx context.Context, name, holder string, term int64) error
}

// Config configures an Elector.
type Config struct {
	// Leases is the store. Required.
	Leases Leases
	// Holder is this process's instance id. Required.
	Holder string
	// Name is the lease's name; "" means LeaseName.
	Name string
	// TTL is the lease's life from each renewal; 0 means 10 s.
	TTL time.Duration
	// Renew is how often the lease is tried; 0 means 2 s. It must be less
	// than a third of TTL, so that two renewals can fail before the trust
	// window closes.
	Renew time.Duration
	// Margin is taken off TTL for the trust window; 0 means TTL/5.
	Margin time.Duration
	// Log receives the changes of leadership; nil discards.
	Log *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Leases == nil || c.Holder == "" {
		return c, errors.New("leader: Leases and Holder are required")
	}
	if c.Name == "" {
		c.Name = LeaseName
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Renew == 0 {
		c.Renew = DefaultRenew
	}
	if c.Margin == 0 {
		c.Margin = c.TTL / 5
	}
	if c.TTL < 3*c.Renew || c.Margin <= 0 || c.Margin >= c.TTL-c.Renew {
		return c, fmt.Errorf("leader: TTL %s must be at least 3 renewals of %s, and the margin %s between 0 and TTL less a renewal", c.TTL, c.Renew, c.Margin)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Elector takes part in the election. Build it with New, then Run it.
type Elector struct {
	cfg Config

	mu         sync.Mutex
	term       int64     // of the lease while held, else 0
	trustUntil time.Time // monotonic: acting until then
	changed    chan struct{}
	announced  bool        // Acting as of the last close of changed
	known      store.Lease // the lease as last read
}

// New checks cfg.
func New(cfg Config) (*Elector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Elector{cfg: cfg, changed: make(chan struct{})}, nil
}

// Run takes part until ctx ends, then releases the lease if it holds it,
// so that another coordinator need not wait out the TTL.
func (e *Elector) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.stop()
			return
		case <-t.C:
		}
		e.try(ctx)
		t.Reset(e.cfg.Renew)
	}
}

// try makes one attempt on the lease and updates the state.
func (e *Elector) try(ctx context.Context) {
	start := time.Now()
	// An attempt may take as long as a trust window: one that is slow (a
	// loaded database) but succeeds still renews, from its start, so
	// nothing is trusted past the lease. Bounding it by the renewal
	// interval made a leader on a busy database drop out and back in
	// every few renewals, and its leader duties restart each time.
	actx, cancel := context.WithTimeout(ctx, e.cfg.TTL-e.cfg.Margin)
	l, err := e.cfg.Leases.TryLease(actx, e.cfg.Name, e.cfg.Holder, e.cfg.TTL)
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.announced
	switch {
	case err != nil:
		// The lease may still be ours: keep acting until the window closes.
		e.cfg.Log.Warn("leader lease not renewed", "error", err, "acting", was)
	case l.Held(e.cfg.Holder):
		e.known = l
		if l.Term != e.term {
			e.cfg.Log.Info("leader lease taken", "term", l.Term, "expires", l.Expires)
		}
		e.term, e.trustUntil = l.Term, start.Add(e.cfg.TTL-e.cfg.Margin)
	default:
		e.known = l
		e.term, e.trustUntil = 0, time.Time{}
	}
	if now := e.actingLocked(); now != was {
		if !now {
			e.cfg.Log.Warn("no longer the leader", "holder", l.Holder, "term", l.Term)
		}
		e.announceLocked(now)
	}
}

// announceLocked records acting as the announced state and wakes the
// waiters of Changed.
func (e *Elector) announceLocked(acting bool) {
	e.announced = acting
	close(e.changed)
	e.changed = make(chan struct{})
}

// stop releases a held lease and stops acting.
func (e *Elector) stop() {
	e.mu.Lock()
	term := e.term
	e.term, e.trustUntil = 0, time.Time{}
	if e.announced {
		e.announceLocked(false)
	}
	e.mu.Unlock()
	if term == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Renew)
	defer cancel()
	if err := e.cfg.Leases.ReleaseLease(ctx, e.cfg.Name, e.cfg.Holder, term); err != nil {
		e.cfg.Log.Warn("leader lease not released; another coordinator takes it when it expires", "error", err)
	}
}

func (e *Elector) actingLocked() bool {
	return e.term != 0 && time.Now().Before(e.trustUntil)
}

// Acting reports whether this process acts as the leader now, and under
// which term.
func (e *Elector) Acting() (term int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.actingLocked() {
		return 0, false
	}
	return e.term, true
}

// Changed is closed at the next change of Acting (a trust window that
// closed on its own is announced at the next attempt, within Renew).
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Known is the lease as this process last read it (its holder may be
// another coordinator).
func (e *Elector) Known() store.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.known
}

// Fence guards a singleton duty's writes: call it first in their
// transaction. It fails with ErrNotLeader when this process does not act
// as the leader, and with store.ErrLeaseLost when the database says the
// lease is not this process's under its term; then the caller must roll
// back.
func (e *Elector) Fence(ctx context.Context, tx *store.Tx) error {
	term, ok := e.Acting()
	if !ok {
		return ErrNotLeader
	}
	return tx.CheckLease(ctx, e.cfg.Name, e.cfg.Holder, term)
}

// WhileLeader runs duty each time this process becomes the leader, with a
// context that ends when it stops being the leader (or ctx ends), and
// waits for it to return before it may run it again. It returns when ctx
// ends and the last run returned.
func (e *Elector) WhileLeader(ctx context.Context, duty func(ctx context.Context)) {
	for {
		ch := e.Changed()
		if _, ok := e.Acting(); ok {
			dctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); duty(dctx) }()
			e.waitLost(ctx)
			cancel()
			<-done
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// waitLost returns once this process stops acting as the leader (checked
// at each change and at least every Renew, since the trust window closes
// without one) or ctx ends.
func (e *Elector) waitLost(ctx context.Context) {
	t := time.NewTicker(e.cfg.Renew / 2)
	defer t.Stop()
	for {
		ch := e.Changed()
		if _, ok := e.Acting(); !ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
	}
}
