package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
)

// MaxBatch is the most agent messages ApplyBatch takes at once.
const MaxBatch = 64

// Ack is the seq up to which a job's messages were applied.
type Ack struct {
	JobID string
	Seq   uint64
}

// BatchResult is what ApplyBatch did.
type BatchResult struct {
	// Acks holds, per job, the highest seq applied (cumulative, as
	// job.ackseq is), in the order the jobs first appear in the batch.
	Acks []Ack
	// Foreign holds an ErrNotOwner error for each message about a job not
	// dispatched to the connection: dropped, not acknowledged.
	Foreign []error
}

// ApplyBatch applies job-scoped messages that one agent connection sent,
// in order, each exactly once, with one database transaction for all of
// them instead of one each: log chunks go to the log store first (in their
// order; the log store skips a chunk it has), then the other messages are
// applied in one transaction. An error means nothing of the transaction
// was applied and the whole batch may be retried (applying is
// idempotent). A batch whose transaction hits a full disk is applied one
// message at a time (see Apply), so each gets its own storage-full
// handling.
func (d *Dispatcher) ApplyBatch(ctx context.Context, a *Agent, msgs []protocol.Message) (BatchResult, error) {
	if len(msgs) > MaxBatch {
		return BatchResult{}, fmt.Errorf("batch of %d messages: at most %d", len(msgs), MaxBatch)
	}
	var res BatchResult
	acked := map[string]int{} // job id → index in res.Acks
	ack := func(jobID string, seq uint64) {
		if seq == 0 {
			return
		}
		if i, ok := acked[jobID]; ok {
			res.Acks[i].Seq = max(res.Acks[i].Seq, seq)
			return
		}
		acked[jobID] = len(res.Acks)
		res.Acks = append(res.Acks, Ack{JobID: jobID, Seq: seq})
	}
	// applyOne applies m on its own, as Apply does.
	applyOne := func(m protocol.Message) error {
		seq, err := d.Apply(ctx, a, m)
		if errors.Is(err, ErrNotOwner) {
			res.Foreign = append(res.Foreign, err)
			return nil
		}
		if err != nil {
			return err
		}
		jobID, _ := m.(protocol.JobScoped).JobSeq()
		ack(jobID, seq)
		return nil
	}
	var rest []protocol.Message
	for _, m := range msgs {
		if _, ok := m.(protocol.JobScoped); !ok {
			return BatchResult{}, fmt.Errorf("message %s is not job-scoped", m.Type())
		}
		if _, ok := m.(*protocol.LogChunk); !ok {
			rest = append(rest, m)
			continue
		}
		// Apply takes log chunks outside any transaction.
		if err := applyOne(m); err != nil {
			return BatchResult{}, err
		}
	}
	if len(rest) == 0 {
		return res, nil
	}
	type outcome struct {
		seq     uint64
		foreign bool
		freed   bool
	}
	swallowed := make([]bool, len(rest))
	for i, m := range rest {
		swallowed[i] = d.swallowUnstored(m) // its job is being failed for lack of space
	}
	var events []apiv1.Event
	outcomes := make([]outcome, len(rest))
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events = events[:0]
		clear(outcomes)
		ended := map[string]bool{} // by a message of this batch: as released
		for i, m := range rest {
			if swallowed[i] {
				continue
			}
			jobID, seq := m.(protocol.JobScoped).JobSeq()
			job, err := tx.GetJobHead(ctx, jobID)
			if err != nil {
				return err
			}
			if !owns(a, job) {
				outcomes[i].foreign = true
				continue
			}
			outcomes[i].seq = seq
			if runstate.JobTerminal(job.Status) && (!a.holds(jobID) || ended[jobID]) {
				continue // a replay after the end: nothing left to apply
			}
			fresh, err := tx.ApplyJobMessage(ctx, jobID, int64(seq))
			if err != nil {
				return err
			}
			if !fresh {
				continue
			}
			evs, freed, err := d.applyTx(ctx, tx, a, job, m)
			if err != nil {
				return err
			}
			events = append(events, evs...)
			outcomes[i].freed = freed
			if freed {
				ended[jobID] = true
			}
		}
		return nil
	})
	if store.IsStorageFull(err) {
		for _, m := range rest {
			if err := applyOne(m); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	if err != nil {
		return BatchResult{}, fmt.Errorf("apply %d messages from agent %q: %w", len(rest), a.ID, err)
	}
	d.publish(events)
	queued := false
	for i, m := range rest {
		jobID, _ := m.(protocol.JobScoped).JobSeq()
		o := outcomes[i]
		if o.foreign {
			res.Foreign = append(res.Foreign, fmt.Errorf("%s of job %q from agent %q: %w", m.Type(), jobID, a.ID, ErrNotOwner))
			continue
		}
		if o.freed {
			a.release(jobID)
			queued = true
		}
		ack(jobID, o.seq)
	}
	if queued {
		d.JobsQueued()
	}
	return res, nil
}
