package dispatch

import (
	"context"
	"strings"

	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
)

// claimTxAttempts bounds the agents one ClaimTx tries beyond the jobs it
// may claim: a claim that finds nothing for an agent's labels costs a
// query in the caller's transaction.
const claimTxAttempts = 8

// ClaimTx claims, in tx (the transaction that just queued up to max jobs,
// e.g. a run's creation), queued jobs for free agents, at most max, so that
// a new run's first jobs leave with the transaction that created them
// instead of a second one. The claims are sent by the result's Send once
// tx has committed; Abort releases them if it did not. Jobs left unclaimed
// wait for the dispatch loop as usual.
func (d *Dispatcher) ClaimTx(ctx context.Context, tx *store.Tx, max int) (scheduler.Claims, error) {
	p := &pendingClaims{d: d}
	tried := 0
	exhausted := map[string]bool{}
	for _, a := range d.reg.list() {
		if len(p.claims) >= max || tried >= max+claimTxAttempts {
			break
		}
		// An agent spawned for a job claims that job itself, in the loop.
		if a.hasBound() {
			continue
		}
		key := strings.Join(a.Labels, "\x00")
		if exhausted[key] || !a.reserve() {
			continue
		}
		tried++
		c, err := d.claimTx(ctx, tx, a)
		if err != nil || !c.ok {
			a.unreserve()
			if err != nil {
				p.Abort()
				return nil, err
			}
			if !c.dropped {
				exhausted[key] = true
			}
			continue
		}
		p.claims = append(p.claims, c)
	}
	return p, nil
}

// pendingClaims are the claims of one ClaimTx.
type pendingClaims struct {
	d      *Dispatcher
	claims []claimed
}

// Send sends every claim, once their transaction committed. It returns at
// once: building a dispatch (secrets, the source archive) and writing it
// to the agent happen in the background, so the request that created the
// run is answered without waiting for them. A failed send requeues the job
// as in the dispatch loop.
func (p *pendingClaims) Send(ctx context.Context) {
	claims := p.claims
	p.claims = nil
	if len(claims) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx) // the request may end first
	p.d.bg.Go(func() {
		for _, c := range claims {
			if _, err := p.d.sendClaimed(ctx, c); err != nil {
				p.d.log.Error("dispatch failed", "agent_id", c.agent.ID, "error", err)
			}
		}
	})
}

// Abort gives the agents' slots back: the transaction did not commit.
func (p *pendingClaims) Abort() {
	for _, c := range p.claims {
		c.agent.unreserve()
	}
	p.claims = nil
}

// Ref is the scheduler's handle on a dispatcher built after it (the
// dispatcher needs the scheduler): set D once the dispatcher exists; until
// then queued jobs wait for the dispatcher's first pass.
type Ref struct{ D *Dispatcher }

// JobsQueued wakes the dispatcher.
func (r *Ref) JobsQueued() {
	if r.D != nil {
		r.D.JobsQueued()
	}
}

// ClaimTx is Dispatcher.ClaimTx; nothing is claimed before D is set.
func (r *Ref) ClaimTx(ctx context.Context, tx *store.Tx, max int) (scheduler.Claims, error) {
	if r.D == nil {
		return nil, nil
	}
	return r.D.ClaimTx(ctx, tx, max)
}
