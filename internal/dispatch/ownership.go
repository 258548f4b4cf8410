package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
)

// Every dispatched queue row is owned by one orchestrator instance: the
// one whose agent connection holds the job (Config.Instance). Only the
// owner watches the row's ack deadline and recovery window, so instances
// sharing a database never settle each other's dispatches. A row changes
// owner when its agent reconnects to another instance with the job in
// flight (Register reclaims it), and when its owner is gone: the leader
// takes the row over (TakeOverOrphans) and gives the agent the recovery
// window to reclaim it anywhere.

// reassertConnected takes back the rows that another instance took over
// while their agent stayed connected here: this instance lost the
// database for longer than its instance TTL (a pause, a partition from
// the database but not from its agents), the leader took its rows over,
// and would fail them when their recovery window ends although their
// agents run them fine. A row whose agent reclaimed it elsewhere has no
// recovery window any more and is not listed.
func (d *Dispatcher) reassertConnected(ctx context.Context) {
	if !d.reg.anyBusy() {
		return
	}
	rows, err := d.db.ListRecoveringElsewhere(ctx, d.cfg.Instance)
	if err != nil {
		d.log.Error("list rows recovering on other instances failed", "error", err)
		return
	}
	for _, r := range rows {
		a := d.reg.get(r.AgentID)
		if a == nil || !a.holds(r.JobID) {
			continue
		}
		ok, err := d.db.Reclaim(ctx, d.cfg.Instance, r.JobID, r.AgentID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			d.log.Error("take back a job of a connected agent failed", "job_id", r.JobID, "agent_id", r.AgentID, "error", err)
			continue
		}
		if ok {
			d.log.Warn("job taken back from another instance: its agent is connected here", "job_id", r.JobID,
				"agent_id", r.AgentID, "taken_from", r.Owner)
		}
	}
}

// TakeOverOrphans makes this instance the owner of the dispatches of
// departed instances (and of rows with no owner, from before owners were
// recorded): each waits RecoveryWindow for its agent, unless it already
// waits. A standalone orchestrator calls it once at start; in a cluster
// the leader calls it from RunSingletonSweeps. It is fenced by ctx (see
// store.WithFence). It returns how many rows it took.
func (d *Dispatcher) TakeOverOrphans(ctx context.Context) (int, error) {
	var rows []store.QueueEntry
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.TakeOverOrphans(ctx, d.cfg.Instance, d.cfg.Now().Add(d.cfg.RecoveryWindow))
		return err
	})
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		d.log.Info("dispatch of a departed instance taken over: waiting for its agent", "job_id", r.JobID,
			"agent_id", r.AgentID, "recovery_deadline", r.RecoveryDeadline)
	}
	return len(rows), nil
}

// RunSingletonSweeps runs, until ctx ends, the sweeps that one instance
// of the database runs for all: failing the jobs that waited in the queue
// past their timeout, and taking over the dispatches of departed
// instances. A standalone orchestrator runs it for its whole life; in a
// cluster the leader runs it with a fenced ctx, so that a deposed leader
// writes nothing.
func (d *Dispatcher) RunSingletonSweeps(ctx context.Context) {
	t := time.NewTicker(d.sweepTick())
	defer t.Stop()
	var lastQueueSweep time.Time
	for {
		if n, err := d.TakeOverOrphans(ctx); err != nil && ctx.Err() == nil {
			d.log.Error("take over dispatches of departed instances failed", "error", err)
		} else if n > 0 {
			d.JobsQueued()
		}
		if now := d.cfg.Now(); now.Sub(lastQueueSweep) >= d.cfg.QueueSweepInterval {
			lastQueueSweep = now
			d.sweepQueue(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// requestCancelElsewhere records, in tx, a cancel request on the row of
// jobID when another live instance owns it (its agent is connected
// there), and reports whether it did. A row of this instance, or of a
// departed one, is not: its job is ended here.
func (d *Dispatcher) requestCancelElsewhere(ctx context.Context, tx *store.Tx, jobID string, force bool, reason string) (bool, error) {
	e, err := tx.GetQueueEntry(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil || e.Owner == "" || e.Owner == d.cfg.Instance || e.Status != store.QueueDispatched {
		return false, err
	}
	live, err := tx.InstanceLive(ctx, e.Owner)
	if err != nil || !live {
		return false, err
	}
	ok, err := tx.RequestCancel(ctx, jobID, force, reason)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if ok {
		d.log.Info("cancel requested from the instance that holds the job's agent", "job_id", jobID, "owner", e.Owner)
	}
	return ok, nil
}

// sendCancelRequests tells the agents connected here to cancel the jobs
// whose cancel was asked for on another instance. A request for an agent
// that is not connected waits: the agent reclaims its job here or
// elsewhere (and is told there), or its recovery window ends the job as
// cancelled.
func (d *Dispatcher) sendCancelRequests(ctx context.Context) {
	if !d.reg.anyBusy() {
		return
	}
	rows, err := d.db.ListCancelRequests(ctx, d.cfg.Instance)
	if err != nil {
		d.log.Error("list cancel requests failed", "error", err)
		return
	}
	for _, r := range rows {
		a := d.reg.get(r.AgentID)
		if a == nil || !a.holds(r.JobID) {
			continue
		}
		if err := a.conn.Send(ctx, &protocol.JobCancel{JobID: r.JobID, Force: r.CancelForce, Reason: r.CancelReason}); err != nil {
			continue // the connection is going: its Unregister holds the job
		}
		if _, err := d.db.MarkCancelSent(ctx, d.cfg.Instance, r.JobID); err != nil {
			d.log.Error("mark cancel sent failed", "job_id", r.JobID, "error", err)
		}
		d.log.Info("cancel asked for on another instance sent to the agent", "job_id", r.JobID, "agent_id", r.AgentID)
	}
}
