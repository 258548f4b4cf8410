package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// RelayVerdict is what ApplyRelayed did with an entry.
type RelayVerdict int

// The verdicts of ApplyRelayed (the receiving rule of a worker's outbox,
// see internal/cluster/outbox.Dedup).
const (
	// RelayApplied: the entry was the next of its stream and its effects
	// committed with the new applied sequence number.
	RelayApplied RelayVerdict = iota + 1
	// RelayDuplicate: it was applied before; nothing was written.
	RelayDuplicate
	// RelayGap: an earlier entry of the stream is missing; nothing was
	// written, and the sender must resend from the applied one on.
	RelayGap
)

// ApplyRelayed applies entry seq (whose predecessor in its stream is
// prev) of a worker's outbox exactly once: in one transaction it locks the
// stream's applied sequence number, and only when seq is the next entry
// (seq above it and prev at or below it) runs apply and moves the number
// to seq. It returns the verdict and the applied number after the call,
// which the caller acknowledges to the sender. An error from apply rolls
// everything back, so the entry stays unapplied and a resend tries again.
func (db *DB) ApplyRelayed(ctx context.Context, outboxID, stream, nodeID string, seq, prev uint64, apply func(tx *Tx) error) (RelayVerdict, uint64, error) {
	if outboxID == "" || stream == "" || seq == 0 {
		return 0, 0, errors.New("apply relayed entry: outbox id, stream and a sequence number above 0 are needed")
	}
	var verdict RelayVerdict
	var applied uint64
	err := db.Tx(ctx, func(tx *Tx) error {
		verdict, applied = 0, 0
		now := tx.clock.Now()
		if _, err := tx.exec(ctx, "INSERT INTO cluster_relay_applied (outbox_id, stream, node_id, applied_seq, updated_at) VALUES (?, ?, ?, 0, ?) ON CONFLICT (outbox_id, stream) DO NOTHING",
			outboxID, stream, nodeID, timeArg(now)); err != nil {
			return classify(err)
		}
		var cur int64
		err := tx.w.QueryRowContext(ctx, tx.d.rebind("SELECT applied_seq FROM cluster_relay_applied WHERE outbox_id = ? AND stream = ?"+tx.d.lockRow(false)), outboxID, stream).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("apply relayed entry: the row of outbox %s stream %s vanished", outboxID, stream)
		}
		if err != nil {
			return classify(err)
		}
		applied = uint64(cur)
		switch {
		case seq <= applied:
			verdict = RelayDuplicate
			return nil
		case prev > applied:
			verdict = RelayGap
			return nil
		}
		if err := apply(tx); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, "UPDATE cluster_relay_applied SET applied_seq = ?, node_id = ?, updated_at = ? WHERE outbox_id = ? AND stream = ?",
			int64(seq), nodeID, timeArg(now), outboxID, stream); err != nil {
			return classify(err)
		}
		verdict, applied = RelayApplied, seq
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("apply entry %d of outbox %s stream %s: %w", seq, outboxID, stream, err)
	}
	return verdict, applied, nil
}
