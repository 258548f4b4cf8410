package dispatch

import (
	"context"
	"errors"
	"slices"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
)

// The scheduler's concurrency groups and fail-fast matrices cancel runs
// and jobs through the dispatcher (scheduler.Canceller), which alone can
// tell the agents running them.

var (
	_ scheduler.Canceller = (*Dispatcher)(nil)
	_ scheduler.Canceller = (*Ref)(nil)
)

// errNoDispatcher is what Ref's cancels return before the dispatcher
// exists; the scheduler's next sweep tries again.
var errNoDispatcher = errors.New("the dispatcher is not running yet")

// CancelRun cancels every unfinished job of a run, as Cancel does, with
// the agents' grace period.
func (d *Dispatcher) CancelRun(ctx context.Context, runID, reason string) error {
	_, err := d.Cancel(ctx, runID, false, reason)
	return err
}

// CancelJobs cancels the given jobs of a run that have not ended, as
// Cancel does for a whole run: those not on an agent end at once, in one
// transaction that then advances the run; agents running one are told to
// stop it (with their grace period) and report the end themselves.
func (d *Dispatcher) CancelJobs(ctx context.Context, runID string, jobIDs []string, reason string) error {
	var toAgents []store.Job
	var events []apiv1.Event
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		toAgents, events = nil, nil
		for _, id := range jobIDs {
			j, err := tx.GetJob(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if j.RunID != runID || runstate.JobTerminal(j.Status) {
				continue
			}
			if j.Status == store.JobDispatched || j.Status == store.JobRunning {
				if a := d.reg.get(j.AgentID); a != nil && a.holds(j.ID) {
					toAgents = append(toAgents, j)
					continue
				}
				elsewhere, err := d.requestCancelElsewhere(ctx, tx, j.ID, false, reason)
				if err != nil {
					return err
				}
				if elsewhere {
					continue
				}
			}
			ev, err := d.endJobOnly(ctx, tx, j, store.JobCancelled, reason)
			if err != nil {
				return err
			}
			events = append(events, ev...)
		}
		if len(events) == 0 {
			return nil
		}
		more, err := d.sched.AdvanceTx(ctx, tx, runID)
		events = append(events, more...)
		return err
	})
	if err != nil {
		return err
	}
	d.publish(events)
	for _, j := range toAgents {
		a := d.reg.get(j.AgentID)
		if a != nil && a.conn.Send(ctx, &protocol.JobCancel{JobID: j.ID, Reason: reason}) == nil {
			continue
		}
		d.endJobByID(ctx, j.ID, store.JobCancelled, reason)
	}
	return nil
}

// CancelRun is Dispatcher.CancelRun, once D is set.
func (r *Ref) CancelRun(ctx context.Context, runID, reason string) error {
	if r.D == nil {
		return errNoDispatcher
	}
	return r.D.CancelRun(ctx, runID, reason)
}

// CancelJobs is Dispatcher.CancelJobs, once D is set.
func (r *Ref) CancelJobs(ctx context.Context, runID string, jobIDs []string, reason string) error {
	if r.D == nil {
		return errNoDispatcher
	}
	return r.D.CancelJobs(ctx, runID, jobIDs, reason)
}

// heldBack returns the pending rows among rows that their job's
// concurrency group or matrix max-parallel keeps from being dispatched:
// the scaler is not asked for agents for them.
func (d *Dispatcher) heldBack(ctx context.Context, rows []store.QueueEntry) map[string]bool {
	var ids []string
	for _, r := range rows {
		if r.Status == store.QueuePending {
			ids = append(ids, r.JobID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	waits, err := d.db.ConcurrencyWaits(ctx, slices.Clip(ids))
	if err != nil {
		d.log.Warn("list jobs held back by concurrency limits failed", "error", err)
		return nil
	}
	out := make(map[string]bool, len(waits))
	for id := range waits {
		out[id] = true
	}
	return out
}

// heldWhy says why the job's concurrency group or matrix max-parallel
// holds it back, "" when they do not (or that cannot be read).
func (d *Dispatcher) heldWhy(ctx context.Context, jobID string) string {
	waits, err := d.db.ConcurrencyWaits(ctx, []string{jobID})
	if err != nil {
		return ""
	}
	return waits[jobID]
}
