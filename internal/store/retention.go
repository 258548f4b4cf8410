package store

import (
	"context"
	"fmt"
	"time"
)

// DeleteRunsFinishedBefore deletes at most limit runs that ended (success,
// failure or cancelled) before cutoff, oldest first, and returns their
// IDs. Their jobs, steps, needs edges, queue rows and job events go with
// them (ON DELETE CASCADE); a re-run of a deleted run keeps existing with
// no parent. Runs still pending or running are never deleted, however old.
// The caller removes the runs' log files.
func (db *DB) DeleteRunsFinishedBefore(ctx context.Context, cutoff time.Time, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("delete finished runs: limit %d: want at least 1", limit)
	}
	var ids []string
	err := db.Tx(ctx, func(tx *Tx) error {
		ids = nil
		rows, err := tx.query(ctx,
			`SELECT id FROM runs
			 WHERE status IN ('success', 'failure', 'cancelled') AND finished_at IS NOT NULL AND finished_at < ?
			 ORDER BY finished_at, id LIMIT ?`, timeArg(cutoff), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(ids) == 0 {
			return nil
		}
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		_, err = tx.uncached().exec(ctx, "DELETE FROM runs WHERE id IN ("+placeholders(len(ids))+")", args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete runs finished before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return ids, nil
}

// DeleteAuditBefore deletes the audit entries written before cutoff and
// returns how many went.
func (db *DB) DeleteAuditBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	return db.deleteBefore(ctx, "audit entries", "DELETE FROM audit_log WHERE created_at < ?", cutoff)
}

// DeleteWebhookEventsBefore deletes the recorded webhook deliveries that
// arrived before cutoff and returns how many went. (The delivery-id dedup
// has its own 24-hour expiry, see PurgeExpiredDeliveries.)
func (db *DB) DeleteWebhookEventsBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	return db.deleteBefore(ctx, "webhook events", "DELETE FROM webhook_events WHERE received_at < ?", cutoff)
}

// deleteBefore runs a retention delete in a transaction of its own, so
// that a fence (WithFence) guards it.
func (db *DB) deleteBefore(ctx context.Context, what, query string, cutoff time.Time) (int64, error) {
	var n int64
	err := db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, query, timeArg(cutoff))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete %s before %s: %w", what, cutoff.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}
