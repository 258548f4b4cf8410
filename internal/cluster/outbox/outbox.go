package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFull is wrapped by the error Append returns when the entry would take
// the outbox past Options.MaxEntries or Options.MaxBytes. Nothing was
// written; an Ack that frees room lets a later Append through.
var ErrFull = errors.New("outbox full")

// ErrClosed is returned by Append, Ack and Pending after Close.
var ErrClosed = errors.New("outbox closed")

// ErrInUse is wrapped by the error Open returns when another process (or
// another Outbox in this process) has the file open.
var ErrInUse = errors.New("outbox in use")

// MaxPayload is the largest payload Append accepts, in bytes. A log chunk
// or a status is far smaller; a bigger payload is a caller's bug.
const MaxPayload = 1 << 20

// Defaults for Options.
const (
	// DefaultMaxEntries is the entry bound when Options.MaxEntries is 0.
	DefaultMaxEntries = 1_000_000
	// DefaultMaxBytes is the payload byte bound when Options.MaxBytes is 0.
	DefaultMaxBytes = 1 << 30
)

// Options configures an Outbox. The zero value is usable.
type Options struct {
	// MaxEntries bounds the entries held at once; 0 means
	// DefaultMaxEntries. Negative is an error.
	MaxEntries int
	// MaxBytes bounds the sum of the payload sizes held at once, in bytes;
	// 0 means DefaultMaxBytes. Negative is an error.
	MaxBytes int64
	// Logger receives the outbox's few log lines (its state at Open, and
	// failures of background space reclaim, which have no caller to
	// return to); nil discards them.
	Logger *slog.Logger
}

// validate fills in the defaults, naming the first bad field.
func (o Options) validate() (Options, error) {
	switch {
	case o.MaxEntries < 0:
		return o, fmt.Errorf("Options.MaxEntries is %d, want 0 (default) or more", o.MaxEntries)
	case o.MaxBytes < 0:
		return o, fmt.Errorf("Options.MaxBytes is %d, want 0 (default) or more", o.MaxBytes)
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Entry is one message held in the outbox.
type Entry struct {
	// Seq is the entry's sequence number: unique in this outbox, given in
	// increasing order, never reused.
	Seq uint64
	// Prev is the Seq of the newest entry of the same Stream that was
	// still unacknowledged when this one was appended, or 0 if there was
	// none (every earlier entry of the stream had been acknowledged, or
	// this is the stream's first). Acks are cumulative, so a non-zero Prev
	// is exactly the stream's previous entry. Dedup uses it to tell the
	// numbers other streams took from a lost message.
	Prev uint64
	// Stream names the destination: a coordinator id, or "job:<id>".
	Stream string
	// Kind says what Payload is ("job.progress", "log.chunk", …); the
	// outbox does not interpret it.
	Kind string
	// Payload is the message, opaque to the outbox.
	Payload []byte
	// CreatedAt is when Append was called, in UTC.
	CreatedAt time.Time
}

// Outbox is a worker's durable queue of unacknowledged messages, in one
// SQLite file. See the package documentation for its guarantee.
type Outbox struct {
	path string
	id   string
	opts Options
	log  *slog.Logger

	write  *sql.DB // the writer goroutine's one connection
	stmts  *statements
	read   *sql.DB // read-only pool for Pending
	unlock func() error

	// gate orders Append and Ack against Close: senders hold it shared
	// while they hand a request over, Close holds it exclusively while it
	// marks the outbox closed and closes reqs.
	gate    sync.RWMutex
	closed  bool
	reqs    chan *request
	stopped chan struct{} // closed when the writer has returned

	closeOnce sync.Once
	closeErr  error

	depthMu sync.Mutex
	entries int
	bytes   int64

	// commits counts the writer's committed transactions (tests read it
	// to check that appends are grouped).
	commits atomic.Uint64
	// vacuumAt is the free page count at which the writer reclaims space:
	// vacuumPages, or less in tests.
	vacuumAt atomic.Int64
	// beforeCommit, when set by a test, runs in the writer before it
	// starts a batch's transaction.
	beforeCommit atomic.Pointer[func()]
}

// Open opens the outbox file at path, creating it (mode 0600) when it does
// not exist, and starts its writer. The directory must exist. The file
// stays locked to this Outbox until Close; a second Open of the same path
// fails with an error wrapping ErrInUse.
func Open(path string, opts Options) (*Outbox, error) {
	opts, err := opts.validate()
	if err != nil {
		return nil, fmt.Errorf("open outbox %q: %w", path, err)
	}
	unlock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	db, err := openSQLite(ctx, path)
	if err != nil {
		return nil, errors.Join(err, unlock())
	}
	stmts, err := prepare(ctx, db.write)
	if err != nil {
		err = fmt.Errorf("open outbox %q: %w", path, err)
		return nil, errors.Join(err, db.read.Close(), db.write.Close(), unlock())
	}
	o := &Outbox{
		path:    path,
		id:      db.id,
		opts:    opts,
		log:     opts.Logger.With("outbox_path", path),
		write:   db.write,
		stmts:   stmts,
		read:    db.read,
		unlock:  unlock,
		reqs:    make(chan *request, queueLen),
		stopped: make(chan struct{}),
		entries: db.entries,
		bytes:   db.bytes,
	}
	o.vacuumAt.Store(vacuumPages)
	o.log.Info("outbox opened", "outbox_id", o.id, "entries", db.entries, "bytes", db.bytes, "last_seq", db.lastSeq)
	go o.run()
	return o, nil
}

// Path is the outbox's file.
func (o *Outbox) Path() string { return o.path }

// ID is the outbox's identity, made at random when its file was created.
// A receiver keys its Dedup state by (ID, stream).
func (o *Outbox) ID() string { return o.id }

// Depth is how many entries the outbox holds and the sum of their payload
// sizes in bytes, as of the last commit. It reads two counters kept in
// memory, so it is cheap enough for a metric scrape.
func (o *Outbox) Depth() (entries int, bytes int64) {
	o.depthMu.Lock()
	defer o.depthMu.Unlock()
	return o.entries, o.bytes
}

// setDepth publishes the depth after a commit.
func (o *Outbox) setDepth(entries int, bytes int64) {
	o.depthMu.Lock()
	o.entries, o.bytes = entries, bytes
	o.depthMu.Unlock()
}

// Pending returns up to limit entries with a sequence number above
// afterSeq, in sequence order: those of stream, or of every stream when
// stream is "". It sees every entry whose Append has returned and that no
// Ack has removed. A worker calls it after each (re)connect with afterSeq
// 0, then again with the last Seq it got, until it gets fewer than limit.
// limit must be at least 1.
func (o *Outbox) Pending(ctx context.Context, stream string, afterSeq uint64, limit int) ([]Entry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("read pending entries of outbox %q: limit is %d, want at least 1", o.path, limit)
	}
	if afterSeq > maxSeq {
		return nil, nil
	}
	o.gate.RLock()
	defer o.gate.RUnlock()
	if o.closed {
		return nil, ErrClosed
	}
	var rows *sql.Rows
	var err error
	if stream == "" {
		rows, err = o.read.QueryContext(ctx,
			`SELECT seq, prev, stream, kind, payload, created_at FROM entries
			 WHERE seq > ? ORDER BY seq LIMIT ?`, int64(afterSeq), limit)
	} else {
		rows, err = o.read.QueryContext(ctx,
			`SELECT seq, prev, stream, kind, payload, created_at FROM entries
			 WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?`, stream, int64(afterSeq), limit)
	}
	if err != nil {
		return nil, fmt.Errorf("read pending entries of outbox %q: %w", o.path, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var seq, prev, created int64
		if err := rows.Scan(&seq, &prev, &e.Stream, &e.Kind, &e.Payload, &created); err != nil {
			return nil, fmt.Errorf("read pending entries of outbox %q: %w", o.path, err)
		}
		e.Seq, e.Prev = uint64(seq), uint64(prev)
		e.CreatedAt = time.Unix(0, created).UTC()
		if e.Payload == nil {
			e.Payload = []byte{}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pending entries of outbox %q: %w", o.path, err)
	}
	return out, nil
}

// Close stops accepting Appends and Acks, lets the writer commit every
// one already handed to it, then closes the file and releases its lock.
// Appends and Acks after Close fail with ErrClosed. Closing again returns
// the first Close's result.
func (o *Outbox) Close() error {
	o.closeOnce.Do(func() {
		o.gate.Lock()
		o.closed = true
		close(o.reqs)
		o.gate.Unlock()
		<-o.stopped
		err := errors.Join(o.stmts.close(), o.read.Close(), o.write.Close())
		if err != nil {
			err = fmt.Errorf("close outbox %q: %w", o.path, err)
		}
		o.closeErr = errors.Join(err, o.unlock())
	})
	return o.closeErr
}
