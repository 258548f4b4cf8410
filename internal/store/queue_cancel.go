package store

import (
	"context"
	"fmt"
)

// RequestCancel records on the row of a dispatched job that its cancel
// was asked for, with reason and whether to skip the agent's grace
// period: the instance that owns the row tells the agent (see
// ListCancelRequests), and a row whose recovery window ends with a
// request on it ends cancelled rather than lost. A request made again
// replaces the first and is sent again. It returns false if the row is
// not dispatched, and ErrNotFound if there is no row.
func (q *queries) RequestCancel(ctx context.Context, jobID string, force bool, reason string) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET cancel_reason = ?, cancel_force = ?, cancel_sent_by = NULL, updated_at = ?
		 WHERE job_id = ? AND status = 'dispatched'`,
		reason, boolInt(force), timeArg(q.clock.Now()), jobID)
	if err == nil {
		changed, err = q.guarded(ctx, changed, "SELECT 1 FROM dispatch_queue WHERE job_id = ?", jobID)
	}
	if err != nil {
		return false, fmt.Errorf("request cancel of job %q: %w", jobID, err)
	}
	return changed, nil
}

// ListCancelRequests returns the rows of instance owner with a cancel
// request that owner has not sent yet: asked for since, or made before
// the row became owner's (its agent moved here, or owner took it over).
func (q *queries) ListCancelRequests(ctx context.Context, owner string) ([]QueueEntry, error) {
	return q.listQueue(ctx, "list cancel requests",
		"status = 'dispatched' AND owner_instance = ? AND cancel_reason IS NOT NULL AND (cancel_sent_by IS NULL OR cancel_sent_by <> ?)",
		owner, owner)
}

// MarkCancelSent records that instance owner told the agent of the row
// of jobID to cancel it. It returns false if the row is not owner's.
func (q *queries) MarkCancelSent(ctx context.Context, owner, jobID string) (bool, error) {
	changed, err := q.execChanged(ctx,
		`UPDATE dispatch_queue SET cancel_sent_by = ?, updated_at = ?
		 WHERE job_id = ? AND owner_instance = ? AND cancel_reason IS NOT NULL`,
		owner, timeArg(q.clock.Now()), jobID, owner)
	if err != nil {
		return false, fmt.Errorf("mark cancel of job %q sent: %w", jobID, err)
	}
	return changed, nil
}

// InstanceLive reports whether instance id is registered and live (its
// row has not expired by the store's clock).
func (q *queries) InstanceLive(ctx context.Context, id string) (bool, error) {
	ok, err := q.exists(ctx, "SELECT 1 FROM orchestrator_instances WHERE id = ? AND expires_at > ?", id, timeArg(q.clock.Now()))
	if err != nil {
		return false, fmt.Errorf("is instance %q live: %w", id, err)
	}
	return ok, nil
}
