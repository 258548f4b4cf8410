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
// them instead of one each. The log chunks are written to the log store
// first (in their order; the log store skips a chunk it has), then the
// other messages are applied in one transaction while the chunks are
// synced: the job's statuses do not wait for its log's fsyncs. Nothing is
// acknowledged or published before both are done, and the chunks' lines
// are published before the statuses, so a follower sees a job's last
// lines before its end. An error means nothing of the transaction was
// applied and the whole batch may be retried (applying is idempotent). A
// batch whose transaction hits a full disk is applied one message at a
// time (see Apply), so each gets its own storage-full handling.
//
// If a chunk cannot be stored for lack of space while its job's final
// status is applied in the same batch, the job keeps that status and its
// log ends with the line that says output was lost (see storageFull).
func (d *Dispatcher) ApplyBatch(ctx context.Context, a *Agent, msgs []protocol.Message) (BatchResult, error) {
	if len(msgs) > MaxBatch {
		return BatchResult{}, fmt.Errorf("batch of %d messages: at most %d", len(msgs), MaxBatch)
	}
	var res BatchResult
	acks := newAcker(&res)
	var rest []protocol.Message
	var chunks []*protocol.LogChunk
	for _, m := range msgs {
		if _, ok := m.(protocol.JobScoped); !ok {
			return BatchResult{}, fmt.Errorf("message %s is not job-scoped", m.Type())
		}
		if c, ok := m.(*protocol.LogChunk); ok {
			chunks = append(chunks, c)
			continue
		}
		rest = append(rest, m)
	}
	pend, err := d.writeLogs(ctx, a, chunks, acks, &res)
	if err != nil {
		return BatchResult{}, err
	}
	var (
		logRes  BatchResult
		logErr  error
		logDone = make(chan struct{})
	)
	if len(pend.chunks) > 0 {
		go func() {
			defer close(logDone)
			logErr = d.syncLogs(ctx, a, pend, newAcker(&logRes))
		}()
	} else {
		close(logDone)
	}
	applied, restErr := d.applyStatuses(ctx, a, rest, acks, &res)
	<-logDone
	for _, ack := range logRes.Acks {
		acks.ack(ack.JobID, ack.Seq)
	}
	res.Foreign = append(res.Foreign, logRes.Foreign...)
	if logErr != nil {
		return BatchResult{}, logErr
	}
	if restErr != nil {
		return BatchResult{}, restErr
	}
	applied.finish(d, acks)
	return res, nil
}

// acker collects cumulative acks into a BatchResult.
type acker struct {
	res   *BatchResult
	index map[string]int // job id → index in res.Acks
}

func newAcker(res *BatchResult) *acker { return &acker{res: res, index: map[string]int{}} }

func (k *acker) ack(jobID string, seq uint64) {
	if seq == 0 {
		return
	}
	if i, ok := k.index[jobID]; ok {
		k.res.Acks[i].Seq = max(k.res.Acks[i].Seq, seq)
		return
	}
	k.index[jobID] = len(k.res.Acks)
	k.res.Acks = append(k.res.Acks, Ack{JobID: jobID, Seq: seq})
}

// statusesApplied is what applyStatuses did in its transaction, to be made
// known (published, slots released, acknowledged) once the batch's logs are
// stored too.
type statusesApplied struct {
	agent  *Agent
	events []apiv1.Event
	msgs   []protocol.Message
	seqs   []uint64 // per message: the seq to acknowledge; 0 for none
	freed  []bool   // per message: its job ended and left the agent
}

func (s *statusesApplied) finish(d *Dispatcher, acks *acker) {
	if s == nil {
		return
	}
	d.publish(s.events)
	queued := false
	for i, m := range s.msgs {
		jobID, _ := m.(protocol.JobScoped).JobSeq()
		if _, ok := m.(*protocol.JobAck); ok && s.seqs[i] > 0 {
			s.agent.noteAcked(jobID)
		}
		if s.freed[i] {
			s.agent.release(jobID)
			queued = true
		}
		acks.ack(jobID, s.seqs[i])
	}
	if queued {
		d.JobsQueued()
	}
}

// applyStatuses applies the batch's messages other than log chunks in one
// transaction; see ApplyBatch. On a full disk it applies them one at a
// time instead (see Apply), and returns nil: those are made known already.
func (d *Dispatcher) applyStatuses(ctx context.Context, a *Agent, rest []protocol.Message, acks *acker, res *BatchResult) (*statusesApplied, error) {
	if len(rest) == 0 {
		return nil, nil
	}
	swallowed := make([]bool, len(rest))
	for i, m := range rest {
		swallowed[i] = d.swallowUnstored(m) // its job is being failed for lack of space
	}
	type outcome struct {
		seq     uint64
		foreign bool
		freed   bool
	}
	var events []apiv1.Event
	outcomes := make([]outcome, len(rest))
	// held is what the transaction knows of a job of the batch: its head,
	// read with the row's lock (so no other transaction applies its
	// messages meanwhile), and the last seq applied, raised in memory per
	// message and written once at the end.
	type held struct {
		job     store.Job
		lastSeq int64
		raised  bool // lastSeq is above the stored one
		acked   bool // a job.ack of the job was applied in this transaction
		stale   bool // a status message may have changed the row: read it again
		ended   bool // by a message of this batch: as released
	}
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events = events[:0]
		clear(outcomes)
		jobs := map[string]*held{}
		var order []*held
		for i, m := range rest {
			if swallowed[i] {
				continue
			}
			jobID, seq := m.(protocol.JobScoped).JobSeq()
			h := jobs[jobID]
			if h == nil || h.stale {
				job, err := tx.LockJobHead(ctx, jobID)
				if err != nil {
					return err
				}
				if h == nil {
					h = &held{lastSeq: job.LastSeq}
					jobs[jobID] = h
					order = append(order, h)
				}
				h.job, h.stale = job, false
			}
			job := h.job
			if !owns(a, job) {
				outcomes[i].foreign = true
				continue
			}
			outcomes[i].seq = seq
			if runstate.JobTerminal(job.Status) && (!a.holds(jobID) || h.ended) {
				continue // a replay after the end: nothing left to apply
			}
			if int64(seq) <= h.lastSeq {
				continue // a duplicate, or older than a message applied
			}
			h.lastSeq, h.raised = int64(seq), true
			evs, freed, err := d.applyTx(ctx, tx, a, job, m, h.acked || a.wasAcked(jobID))
			if err != nil {
				return err
			}
			if _, ok := m.(*protocol.JobAck); ok {
				h.acked = true
			}
			events = append(events, evs...)
			outcomes[i].freed = freed
			switch m.(type) {
			case *protocol.JobStatus, *protocol.JobReject:
				// It may have changed this job's row and, by ending the
				// job, those of others of its run.
				for _, o := range order {
					o.stale = true
				}
			}
			if freed {
				h.ended = true
			}
		}
		for _, h := range order {
			if h.raised {
				if err := tx.RaiseJobLastSeq(ctx, h.job.ID, h.lastSeq); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if store.IsStorageFull(err) {
		for _, m := range rest {
			seq, err := d.Apply(ctx, a, m)
			if errors.Is(err, ErrNotOwner) {
				res.Foreign = append(res.Foreign, err)
				continue
			}
			if err != nil {
				return nil, err
			}
			jobID, _ := m.(protocol.JobScoped).JobSeq()
			acks.ack(jobID, seq)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("apply %d messages from agent %q: %w", len(rest), a.ID, err)
	}
	applied := &statusesApplied{agent: a, events: events, msgs: rest, seqs: make([]uint64, len(rest)), freed: make([]bool, len(rest))}
	for i, m := range rest {
		o := outcomes[i]
		if o.foreign {
			jobID, _ := m.(protocol.JobScoped).JobSeq()
			res.Foreign = append(res.Foreign, fmt.Errorf("%s of job %q from agent %q: %w", m.Type(), jobID, a.ID, ErrNotOwner))
			continue
		}
		applied.seqs[i], applied.freed[i] = o.seq, o.freed
	}
	return applied, nil
}

// logWriter is a LogSink that can store chunks in two halves (see
// logs.Store.WriteAll): the writes, then, concurrently with the caller's
// other work, the syncs; sync returns chunks[i]'s error as errs[i].
type logWriter interface {
	WriteLogs(ctx context.Context, chunks []LogAppend) (sync func() (errs []error))
}

// LogAppend is one chunk for logWriter.
type LogAppend struct {
	RunID, JobID  string
	Attempt, Step int
	Seq           uint64
	Lines         []protocol.LogLine
}

// pendingLogs is the half of a batch's log chunks that writeLogs leaves to
// syncLogs.
type pendingLogs struct {
	chunks []*protocol.LogChunk // to store, in order
	todo   []LogAppend          // the same, for the sink
	sync   func() []error       // nil: store each with AppendLog
}

// writeLogs checks the batch's log chunks (checkChunk) and writes those
// to store (acknowledging at once those not to store). A sink that is not a
// logWriter stores them in syncLogs, one at a time.
func (d *Dispatcher) writeLogs(ctx context.Context, a *Agent, chunks []*protocol.LogChunk, acks *acker, res *BatchResult) (*pendingLogs, error) {
	p := &pendingLogs{}
	for _, c := range chunks {
		if d.swallowUnstored(c) {
			continue // its job is being failed for lack of space
		}
		job, keep, err := d.checkChunk(ctx, a, c)
		if errors.Is(err, ErrNotOwner) {
			res.Foreign = append(res.Foreign, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !keep {
			acks.ack(c.JobID, c.Seq) // not stored: see storeChunk
			continue
		}
		p.chunks = append(p.chunks, c)
		p.todo = append(p.todo, LogAppend{RunID: job.RunID, JobID: job.ID, Attempt: job.Attempt, Step: c.Step, Seq: c.Seq, Lines: c.Lines})
	}
	if lw, ok := d.logs.(logWriter); ok && len(p.todo) > 0 {
		p.sync = lw.WriteLogs(ctx, p.todo)
	}
	return p, nil
}

// storeChunk reports whether a log chunk of job is stored. Output of a job
// that ended is not, unless it came before a message of the job already
// applied (its seq is below the job's last applied seq): a chunk whose
// sync had not finished when a crash came after the job's final status was
// committed (ApplyBatch syncs the one while it commits the other), replayed
// by the agent. Output an agent still sends after the orchestrator ended
// its job (its log storage is full, its agent was lost) is dropped.
func storeChunk(job store.Job, c *protocol.LogChunk) bool {
	return !runstate.JobTerminal(job.Status) || int64(c.Seq) < job.LastSeq
}

// syncLogs finishes what writeLogs started: it syncs (or, for a sink that
// is not a logWriter, stores) the chunks and acknowledges those stored; a
// chunk that found the disk full starts its job's storage-full handling.
func (d *Dispatcher) syncLogs(ctx context.Context, a *Agent, p *pendingLogs, acks *acker) error {
	if len(p.chunks) == 0 {
		return nil
	}
	errs := make([]error, len(p.chunks))
	if p.sync != nil {
		errs = p.sync()
	} else {
		for i, t := range p.todo {
			errs[i] = d.logs.AppendLog(ctx, t.RunID, t.JobID, t.Attempt, t.Step, t.Seq, t.Lines)
		}
	}
	full := map[string]bool{} // jobs already handed to storageFull by this batch
	for i, c := range p.chunks {
		err := errs[i]
		switch {
		case err == nil:
			acks.ack(c.JobID, c.Seq)
		case store.IsStorageFull(err) && full[c.JobID]:
			// The first of the job's chunks started its failure; the rest
			// are counted with it, or, once it is settled, are over.
			if !d.swallowUnstored(c) {
				acks.ack(c.JobID, c.Seq)
			}
		case store.IsStorageFull(err):
			full[c.JobID] = true
			acks.ack(c.JobID, d.storageFull(ctx, a, c, err))
		default:
			return err
		}
	}
	return nil
}
