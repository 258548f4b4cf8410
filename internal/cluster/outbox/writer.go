package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Sizes of the writer's queue and of its transactions.
const (
	// queueLen is how many requests may wait for the writer before their
	// senders block.
	queueLen = 1024
	// maxBatch bounds the requests committed in one transaction.
	maxBatch = 512
	// maxBatchBytes bounds the payload bytes committed in one transaction,
	// so a burst of large payloads does not become one huge WAL write.
	maxBatchBytes = 16 << 20
	// vacuumPages is how many free pages (16 MiB at SQLite's default 4 KiB
	// page) the file may keep before the writer returns them to the file
	// system (Outbox.vacuumAt, which tests lower).
	vacuumPages = 4096
)

// opKind is what a request asks of the writer.
type opKind int

const (
	opAppend opKind = iota
	opAck
)

// A request's state settles the race between a sender whose ctx ends
// and the writer taking the request: whichever moves it out of
// reqQueued first decides whether it is written.
const (
	reqQueued    int32 = iota
	reqTaken           // the writer has it; the sender waits for the outcome
	reqAbandoned       // the sender gave up first; the writer skips it
)

// request is one Append or Ack handed to the writer.
type request struct {
	op        opKind
	stream    string
	kind      string
	payload   []byte
	createdAt int64 // Unix nanoseconds
	upto      uint64
	state     atomic.Int32
	done      chan result // buffered; receives exactly one result once taken
}

// result is the writer's answer to one request.
type result struct {
	seq   uint64 // of an Append
	acked int    // of an Ack
	err   error
}

// Append adds an entry to stream and returns its sequence number once the
// entry is committed and synced to disk. stream must not be empty and
// payload may be at most MaxPayload bytes. When the entry would take the
// outbox past its bounds, the error wraps ErrFull and nothing is written.
//
// Append waits for the writer, which groups it with the other Appends and
// Acks waiting at the time into one transaction. If ctx ends before the
// writer takes the entry, Append returns ctx's error and the entry is not
// written. Once the writer has taken it, Append waits for the commit (at
// most one transaction) and reports its outcome even if ctx has ended, so
// a nil error always means written, and an error means not written — with
// one exception: if the disk fails while SQLite syncs the commit, the
// entry may still be found in the file after a restart. Append does not
// keep payload after it returns.
func (o *Outbox) Append(ctx context.Context, stream, kind string, payload []byte) (uint64, error) {
	if stream == "" {
		return 0, fmt.Errorf("append to outbox %q: stream is empty", o.path)
	}
	if len(payload) > MaxPayload {
		return 0, fmt.Errorf("append to outbox %q: payload is %d bytes, over the limit of %d", o.path, len(payload), MaxPayload)
	}
	if payload == nil {
		payload = []byte{} // stored as an empty BLOB, not NULL
	}
	r := &request{
		op:        opAppend,
		stream:    stream,
		kind:      kind,
		payload:   payload,
		createdAt: time.Now().UnixNano(),
		done:      make(chan result, 1),
	}
	res, err := o.do(ctx, r)
	if err != nil {
		return 0, fmt.Errorf("append to stream %q of outbox %q: %w", stream, o.path, err)
	}
	return res.seq, nil
}

// Ack removes stream's entries with a sequence number up to and including
// uptoSeq, and returns how many it removed. Acknowledgement is
// cumulative: the receiver acknowledges the last entry of the stream it
// applied, which covers every earlier one. Acking again, or acking a
// number below the stream's oldest entry, removes nothing and is not an
// error. Ack goes through the writer like Append, with the same rules for
// ctx.
func (o *Outbox) Ack(ctx context.Context, stream string, uptoSeq uint64) (int, error) {
	if stream == "" {
		return 0, fmt.Errorf("ack in outbox %q: stream is empty", o.path)
	}
	r := &request{op: opAck, stream: stream, upto: min(uptoSeq, maxSeq), done: make(chan result, 1)}
	res, err := o.do(ctx, r)
	if err != nil {
		return 0, fmt.Errorf("ack stream %q up to %d in outbox %q: %w", stream, uptoSeq, o.path, err)
	}
	return res.acked, nil
}

// do hands r to the writer and waits for its result.
func (o *Outbox) do(ctx context.Context, r *request) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	o.gate.RLock()
	if o.closed {
		o.gate.RUnlock()
		return result{}, ErrClosed
	}
	select {
	case o.reqs <- r:
		o.gate.RUnlock()
	case <-ctx.Done():
		o.gate.RUnlock()
		return result{}, ctx.Err()
	}
	select {
	case res := <-r.done:
		return res, res.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return result{}, ctx.Err()
		}
		res := <-r.done // taken: the outcome is at most one commit away
		return res, res.err
	}
}

// run is the writer goroutine: it takes whatever requests are waiting, up
// to a batch, commits them together, and repeats until Close closes reqs
// and every request sent before is committed.
func (o *Outbox) run() {
	defer close(o.stopped)
	ctx := context.Background() // commits are never cut short; Close waits for them
	batch := make([]*request, 0, maxBatch)
	for first := range o.reqs {
		batch = append(batch[:0], first)
		size := len(first.payload)
	fill:
		for len(batch) < maxBatch && size < maxBatchBytes {
			select {
			case r, ok := <-o.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
				size += len(r.payload)
			default:
				break fill
			}
		}
		o.commit(ctx, batch)
	}
}

// commit writes the requests of batch that their senders still wait for
// in one transaction and answers each. When the transaction fails, every
// request that had not already failed on its own (ErrFull) gets its error.
func (o *Outbox) commit(ctx context.Context, batch []*request) {
	taken := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	if hook := o.beforeCommit.Load(); hook != nil {
		(*hook)()
	}
	results := make([]result, len(taken))
	entries, bytes := o.Depth()
	entries, bytes, freed, err := o.apply(ctx, taken, results, entries, bytes)
	if err != nil {
		for i := range results {
			if results[i].err == nil {
				results[i] = result{err: err}
			}
		}
	} else {
		o.commits.Add(1)
		o.setDepth(entries, bytes)
	}
	for i, r := range taken {
		r.done <- results[i]
	}
	if err == nil && freed {
		o.reclaim(ctx)
	}
}

// apply runs reqs in one transaction, in order, starting from the given
// depth, and returns the depth after them and whether any entry was
// removed. An Append past the bounds gets ErrFull in results and does not
// stop the others.
func (o *Outbox) apply(ctx context.Context, reqs []*request, results []result, entries int, bytes int64) (_ int, _ int64, freed bool, err error) {
	tx, err := o.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, false, fmt.Errorf("begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it only reports ErrTxDone
	var first int64
	if err := tx.StmtContext(ctx, o.stmts.lastSeq).QueryRowContext(ctx).Scan(&first); err != nil {
		return 0, 0, false, fmt.Errorf("read last sequence number: %w", err)
	}
	last := first
	for i, r := range reqs {
		switch r.op {
		case opAppend:
			if err := o.room(entries, bytes, len(r.payload)); err != nil {
				results[i].err = err
				continue
			}
			if last == math.MaxInt64 {
				return 0, 0, false, errors.New("sequence numbers exhausted")
			}
			var prev int64
			if err := tx.StmtContext(ctx, o.stmts.tail).QueryRowContext(ctx, r.stream).Scan(&prev); err != nil {
				return 0, 0, false, fmt.Errorf("find previous entry: %w", err)
			}
			last++
			if _, err := tx.StmtContext(ctx, o.stmts.insert).ExecContext(ctx, last, prev, r.stream, r.kind, r.payload, r.createdAt); err != nil {
				return 0, 0, false, fmt.Errorf("insert entry %d: %w", last, err)
			}
			entries++
			bytes += int64(len(r.payload))
			results[i].seq = uint64(last)
		case opAck:
			var n int
			var size int64
			if err := tx.StmtContext(ctx, o.stmts.count).QueryRowContext(ctx, r.stream, int64(r.upto)).Scan(&n, &size); err != nil {
				return 0, 0, false, fmt.Errorf("count acknowledged entries: %w", err)
			}
			if n > 0 {
				if _, err := tx.StmtContext(ctx, o.stmts.remove).ExecContext(ctx, r.stream, int64(r.upto)); err != nil {
					return 0, 0, false, fmt.Errorf("delete acknowledged entries: %w", err)
				}
				freed = true
			}
			entries -= n
			bytes -= size
			results[i].acked = n
		}
	}
	if last != first {
		if _, err := tx.StmtContext(ctx, o.stmts.setLastSeq).ExecContext(ctx, last); err != nil {
			return 0, 0, false, fmt.Errorf("store last sequence number: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, false, fmt.Errorf("commit: %w", err)
	}
	return entries, bytes, freed, nil
}

// statements are the writer's queries, prepared once on its connection.
type statements struct {
	lastSeq, setLastSeq, tail, insert, count, remove *sql.Stmt
}

// prepare prepares the writer's statements on db.
func prepare(ctx context.Context, db *sql.DB) (*statements, error) {
	s := &statements{}
	for _, q := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.lastSeq, "SELECT last_seq FROM meta"},
		{&s.setLastSeq, "UPDATE meta SET last_seq = ?"},
		{&s.tail, "SELECT coalesce(max(seq), 0) FROM entries WHERE stream = ?"},
		{&s.insert, "INSERT INTO entries (seq, prev, stream, kind, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)"},
		{&s.count, "SELECT count(*), coalesce(sum(length(payload)), 0) FROM entries WHERE stream = ? AND seq <= ?"},
		{&s.remove, "DELETE FROM entries WHERE stream = ? AND seq <= ?"},
	} {
		stmt, err := db.PrepareContext(ctx, q.sql)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("prepare %q: %w", q.sql, err), s.close())
		}
		*q.stmt = stmt
	}
	return s, nil
}

// close closes the prepared statements.
func (s *statements) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{s.lastSeq, s.setLastSeq, s.tail, s.insert, s.count, s.remove} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// room says whether one more entry of size bytes fits in the bounds, and
// if not, by how much it misses.
func (o *Outbox) room(entries int, bytes int64, size int) error {
	if entries+1 > o.opts.MaxEntries || bytes+int64(size) > o.opts.MaxBytes {
		return fmt.Errorf("%w: it holds %d of %d entries and %d of %d payload bytes, and the new entry has %d bytes",
			ErrFull, entries, o.opts.MaxEntries, bytes, o.opts.MaxBytes, size)
	}
	return nil
}

// reclaim returns the file's free pages to the file system once there are
// many of them, so that the file shrinks again after an outage filled it.
// Nobody waits for it, so a failure is logged (the next Ack retries).
func (o *Outbox) reclaim(ctx context.Context) {
	var free int64
	if err := o.write.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
		o.log.Warn("outbox space reclaim failed", "error", err)
		return
	}
	if free < o.vacuumAt.Load() {
		return
	}
	if _, err := o.write.ExecContext(ctx, "PRAGMA incremental_vacuum"); err != nil {
		o.log.Warn("outbox space reclaim failed", "free_pages", free, "error", err)
	}
}
