package agent

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
)

// outbox is the agent's replay buffer (docs/protocol.md, "Exactly once").
// Every job-scoped message gets its job's next seq when it is queued and
// stays here, across disconnects, until a job.ackseq or a
// registered.resume covers it. Each connection's writer sends what it has
// not sent yet; a new connection starts again after the resume point.
//
// The held log text is bounded: past the limit the oldest log chunk of any
// job is dropped (never a status message), and the job's next message is
// preceded by a job-level line that says how many lines were lost.
//
// All methods are safe for concurrent use.
type outbox struct {
	log   *slog.Logger
	limit int64 // bytes of log text (estimated) held at most

	mu      sync.Mutex
	jobs    map[string]*jobBuffer
	order   uint64 // queue order across jobs
	bytes   int64  // estimated log bytes held
	changed chan struct{}

	// wake has room for one signal: something was queued.
	wake chan struct{}
}

// jobBuffer is the outbox of one dispatch of one job. Its fields are
// guarded by outbox.mu. Its states:
//
//	open ──last message queued──► closed ──all acknowledged──► gone
//	  │                              │
//	  └── not in resume, or the job dispatched again ──► dropped (gone, appends ignored)
type jobBuffer struct {
	id      string
	seq     uint64 // the highest seq given
	acked   uint64 // the highest seq acknowledged
	sent    uint64 // the highest seq written on the current connection
	entries []outEntry
	// closed: the dispatch's last message (a final job.status, or a
	// job.reject) is queued; nothing may follow it.
	closed bool
	// dropped: the buffer was discarded (the job is no longer this agent's,
	// or a new dispatch of the job replaced it); appends are ignored.
	dropped bool
	// lostLines and lostChunks count log output dropped for space since
	// note was made; note is the job-level line that reports them. While
	// the note is unsent, further drops update it in place, so a long
	// disconnect leaves one note, not one per chunk.
	lostLines, lostChunks int
	note                  *protocol.LogChunk
	noteSeq               uint64
	// gone is closed when the buffer goes away: every message of a closed
	// buffer acknowledged, or the buffer dropped.
	gone chan struct{}
}

type outEntry struct {
	msg   protocol.JobScoped
	seq   uint64
	order uint64
	size  int64 // estimated bytes, log chunks only
	// lazy: nothing waits for this message (see lazy); queued is when it
	// was queued, for the writer's linger.
	lazy   bool
	queued time.Time
}

// lazy reports whether msg may wait a little to travel with the messages
// that follow it: a step's status, a log chunk, a job's running status.
// The orchestrator waits on nothing of these. A job.ack, a job.reject and a
// job's final status are sent at once, with everything queued before them.
func lazy(msg protocol.JobScoped) bool {
	switch m := msg.(type) {
	case *protocol.StepStatus, *protocol.LogChunk:
		return true
	case *protocol.JobStatus:
		return m.Status == protocol.JobRunning
	}
	return false
}

func newOutbox(log *slog.Logger, limit int64) *outbox {
	return &outbox{
		log:     log,
		limit:   limit,
		jobs:    map[string]*jobBuffer{},
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
}

// open starts the buffer of a new dispatch of jobID. A buffer the job still
// had from an earlier dispatch is discarded: its messages belong to a
// dispatch the orchestrator has given up on, and sequence numbers start
// again at 1.
func (o *outbox) open(jobID string) *jobBuffer {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old := o.jobs[jobID]; old != nil {
		o.discardLocked(old)
	}
	b := &jobBuffer{id: jobID, gone: make(chan struct{})}
	o.jobs[jobID] = b
	return b
}

// append gives msg the job's next seq and queues it. last marks the
// dispatch's last message. It reports false, queuing nothing, when the
// buffer was discarded or its last message is already queued.
func (o *outbox) append(b *jobBuffer, msg protocol.JobScoped, last bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b.dropped || b.closed {
		return false
	}
	if b.lostLines > 0 && b.note == nil {
		b.note = &protocol.LogChunk{JobID: b.id, Step: protocol.JobLevelStep, Lines: []protocol.LogLine{{TS: time.Now(), Text: lostText(b)}}}
		b.noteSeq = o.queueLocked(b, b.note, false)
	}
	o.queueLocked(b, msg, true)
	b.closed = last
	o.shrinkLocked()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// queueLocked gives msg the next seq and queues it; it returns the seq. A
// log chunk that may be dropped for space has a size; others have none.
func (o *outbox) queueLocked(b *jobBuffer, msg protocol.JobScoped, droppable bool) uint64 {
	b.seq++
	setSeq(msg, b.seq)
	o.order++
	e := outEntry{msg: msg, seq: b.seq, order: o.order, lazy: lazy(msg), queued: time.Now()}
	if c, ok := msg.(*protocol.LogChunk); ok && droppable {
		e.size = chunkSize(c)
		o.bytes += e.size
	}
	b.entries = append(b.entries, e)
	return b.seq
}

func lostText(b *jobBuffer) string {
	return fmt.Sprintf("[kici] %d log lines (%d chunks) were dropped: the agent's replay buffer was full while the orchestrator did not acknowledge them", b.lostLines, b.lostChunks)
}

// chunkSize estimates what a log chunk costs to hold.
func chunkSize(c *protocol.LogChunk) int64 {
	n := int64(64)
	for _, l := range c.Lines {
		n += int64(len(l.Text)) + 48
	}
	return n
}

// shrinkLocked drops the oldest log chunks until the held log text fits the
// limit again.
func (o *outbox) shrinkLocked() {
	for o.bytes > o.limit {
		var (
			victim *jobBuffer
			at     int
		)
		for _, b := range o.jobs {
			for i, e := range b.entries {
				if e.size == 0 {
					continue
				}
				if victim == nil || e.order < victim.entries[at].order {
					victim, at = b, i
				}
				break
			}
		}
		if victim == nil {
			return
		}
		e := victim.entries[at]
		victim.entries = slices.Delete(victim.entries, at, at+1)
		o.bytes -= e.size
		if victim.note != nil && victim.noteSeq <= victim.sent {
			// The last note is on its way; the next append starts another.
			victim.note, victim.lostLines, victim.lostChunks = nil, 0, 0
		}
		victim.lostLines += len(e.msg.(*protocol.LogChunk).Lines)
		victim.lostChunks++
		if victim.note != nil {
			victim.note.Lines[0].Text = lostText(victim)
		}
		o.log.Warn("replay buffer full; dropped the oldest log chunk", "job_id", victim.id, "seq", e.seq, "limit_bytes", o.limit)
	}
}

// setSeq sets the seq of a job-scoped message.
func setSeq(msg protocol.JobScoped, seq uint64) {
	switch m := msg.(type) {
	case *protocol.JobAck:
		m.Seq = seq
	case *protocol.JobReject:
		m.Seq = seq
	case *protocol.JobStatus:
		m.Seq = seq
	case *protocol.StepStatus:
		m.Seq = seq
	case *protocol.LogChunk:
		m.Seq = seq
	default:
		panic(fmt.Sprintf("outbox: unknown job-scoped message %T", msg))
	}
}

// holdFor tells the writer how long to wait before it takes what is
// unsent: 0 when something unsent is not lazy or a lazy message has waited
// linger already, else the rest of the oldest lazy message's linger. Nothing
// unsent also gives 0 (takeUnsent then returns nothing).
//
// The linger lets the few messages a short job sends in a few milliseconds
// (running, step started, output, step ended) reach the orchestrator in
// one read, applied in one transaction with the job's final status, rather
// than one transaction each.
func (o *outbox) holdFor(now time.Time, linger time.Duration) time.Duration {
	if linger <= 0 {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var oldest time.Time
	for _, b := range o.jobs {
		for _, e := range b.entries {
			if e.seq <= b.sent {
				continue
			}
			if !e.lazy {
				return 0
			}
			if oldest.IsZero() || e.queued.Before(oldest) {
				oldest = e.queued
			}
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return max(0, linger-now.Sub(oldest))
}

// takeUnsent returns, oldest first, every message not yet written on the
// current connection, and counts them as written.
func (o *outbox) takeUnsent() []protocol.JobScoped {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []outEntry
	for _, b := range o.jobs {
		for _, e := range b.entries {
			if e.seq > b.sent {
				out = append(out, e)
			}
		}
		b.sent = b.seq
	}
	slices.SortFunc(out, func(a, b outEntry) int { return cmp.Compare(a.order, b.order) })
	msgs := make([]protocol.JobScoped, len(out))
	for i, e := range out {
		msgs[i] = e.msg
	}
	return msgs
}

// ack forgets the messages of jobID up to seq. A buffer whose last message
// is acknowledged goes away.
func (o *outbox) ack(jobID string, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.jobs[jobID]; b != nil {
		o.ackLocked(b, seq)
	}
}

func (o *outbox) ackLocked(b *jobBuffer, seq uint64) {
	seq = min(seq, b.seq)
	if seq <= b.acked {
		return
	}
	b.acked = seq
	n := 0
	for _, e := range b.entries {
		if e.seq > seq {
			break
		}
		o.bytes -= e.size
		n++
	}
	b.entries = slices.Delete(b.entries, 0, n)
	if b.closed && len(b.entries) == 0 {
		delete(o.jobs, b.id)
		close(b.gone)
	}
	o.notifyLocked()
}

// discardLocked drops a buffer unsent.
func (o *outbox) discardLocked(b *jobBuffer) {
	if b.dropped {
		return
	}
	b.dropped = true
	for _, e := range b.entries {
		o.bytes -= e.size
	}
	b.entries = nil
	if o.jobs[b.id] == b {
		delete(o.jobs, b.id)
		close(b.gone)
	}
	o.notifyLocked()
}

func (o *outbox) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// inFlight lists, for register, every job the outbox holds: running, or
// with unacknowledged messages.
func (o *outbox) inFlight() []protocol.InFlightJob {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]protocol.InFlightJob, 0, len(o.jobs))
	for _, b := range o.jobs {
		out = append(out, protocol.InFlightJob{JobID: b.id, LastSeq: b.seq})
	}
	slices.SortFunc(out, func(a, b protocol.InFlightJob) int { return strings.Compare(a.JobID, b.JobID) })
	return out
}

// resume applies registered.resume to the jobs sent in register.in_flight:
// a job listed there is acknowledged up to its ack_seq and replays from
// there; a job not listed is no longer this agent's, and its buffer is
// dropped unsent. It returns those abandoned jobs.
func (o *outbox) resume(sent []protocol.InFlightJob, resume []protocol.ResumeJob) (abandoned []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	acks := map[string]uint64{}
	for _, r := range resume {
		acks[r.JobID] = r.AckSeq
	}
	for _, j := range sent {
		b := o.jobs[j.JobID]
		if b == nil {
			continue
		}
		ackSeq, ok := acks[j.JobID]
		if !ok {
			o.discardLocked(b)
			abandoned = append(abandoned, j.JobID)
			continue
		}
		o.ackLocked(b, ackSeq)
	}
	// This connection has been sent nothing yet.
	for _, b := range o.jobs {
		b.sent = b.acked
	}
	return abandoned
}

// waitEmpty blocks until every buffer is gone (every dispatch ended and was
// acknowledged) or ctx ends.
func (o *outbox) waitEmpty(ctx context.Context) error {
	for {
		o.mu.Lock()
		n := len(o.jobs)
		ch := o.changed
		o.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d jobs still have unacknowledged messages: %w", n, context.Cause(ctx))
		}
	}
}
