package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/store"
)

// Outcomes of audit entries.
const (
	OutcomeAllowed = "allowed" // the action was done
	OutcomeDenied  = "denied"  // authentication or authorisation refused it
	OutcomeFailed  = "failed"  // it was allowed but did not succeed
)

// AuditStore is what AuditLog needs of the store.
type AuditStore interface {
	InsertAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
}

// auditTxStore is an AuditStore that can also write several entries in one
// transaction (*store.DB).
type auditTxStore interface {
	Tx(ctx context.Context, fn func(tx *store.Tx) error) error
}

// AuditQueueSize is how many entries AuditLog holds queued at most; a
// Record that finds the queue full writes synchronously.
const AuditQueueSize = 256

// AuditLog writes the audit log: every mutation and every denied request.
//
// Record queues the entry and returns; one goroutine writes the queue in
// order, the entries queued together in one transaction. When the queue
// holds AuditQueueSize entries, Record writes the queue and its entry
// itself before it returns, so a burst slows its callers down rather than
// losing entries. Either way the entries reach the store in the order of
// the Record calls. Flush writes what is queued; Close does too and stops
// the goroutine (Record after Close writes synchronously). A crash loses
// the entries still queued: at most AuditQueueSize, plus the batch being
// written.
//
// A write that fails is logged and otherwise ignored, so that a full disk
// does not also take the API down; the failure is in the orchestrator's
// log instead. A batch is given auditWriteTimeout in all.
type AuditLog struct {
	log *slog.Logger
	db  AuditStore
	max int

	// writeMu is held while entries are taken from the queue and written,
	// which keeps the writes in the order of the queue.
	writeMu sync.Mutex

	mu     sync.Mutex
	queue  []store.AuditEntry
	closed bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// onFull, when set (tests), is called when a Record finds the queue
	// full and is about to write synchronously.
	onFull func()
}

// NewAuditLog returns an audit log writer and starts its goroutine; Close
// stops it.
func NewAuditLog(logger *slog.Logger, db AuditStore) *AuditLog {
	return newAuditLog(logger, db, AuditQueueSize)
}

func newAuditLog(logger *slog.Logger, db AuditStore, max int) *AuditLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &AuditLog{log: logger, db: db, max: max,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// auditWriteTimeout bounds one write of a batch of entries, which runs
// even after the request's context ends.
const auditWriteTimeout = 10 * time.Second

// Record appends e to the audit log (see AuditLog for when it is written).
func (a *AuditLog) Record(ctx context.Context, e store.AuditEntry) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if !a.closed && len(a.queue) < a.max {
		a.queue = append(a.queue, e)
		a.mu.Unlock()
		select {
		case a.wake <- struct{}{}:
		default:
		}
		return
	}
	a.mu.Unlock()
	// Full or closed: write the queue and e now, in order.
	if a.onFull != nil {
		a.onFull()
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	batch := append(a.take(), e)
	a.mu.Unlock()
	a.write(ctx, batch)
}

// Flush writes every entry queued before it was called.
func (a *AuditLog) Flush(ctx context.Context) {
	if a == nil {
		return
	}
	a.flush(ctx)
}

// Close writes what is queued and stops the writer. It is safe to call
// more than once.
func (a *AuditLog) Close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	first := !a.closed
	a.closed = true
	a.mu.Unlock()
	if first {
		close(a.stop)
	}
	<-a.done
	a.flush(context.Background())
}

func (a *AuditLog) run() {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
			a.flush(context.Background())
		case <-a.stop:
			return
		}
	}
}

// flush writes the queue, holding writeMu.
func (a *AuditLog) flush(ctx context.Context) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	batch := a.take()
	a.mu.Unlock()
	if len(batch) > 0 {
		a.write(ctx, batch)
	}
}

// take returns the queued entries and empties the queue; a.mu is held.
func (a *AuditLog) take() []store.AuditEntry {
	batch := a.queue
	a.queue = nil
	return batch
}

// write inserts the entries in order: in one transaction when there are
// several and the store has transactions, else (or when that transaction
// fails) one by one, logging each entry that cannot be written.
func (a *AuditLog) write(ctx context.Context, batch []store.AuditEntry) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWriteTimeout)
	defer cancel()
	if txs, ok := a.db.(auditTxStore); ok && len(batch) > 1 {
		err := txs.Tx(ctx, func(tx *store.Tx) error {
			for _, e := range batch {
				if _, err := tx.InsertAudit(ctx, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return
		}
		a.log.Warn("audit batch write failed; writing its entries one by one", "entries", len(batch), "error", err)
	}
	for _, e := range batch {
		if _, err := a.db.InsertAudit(ctx, e); err != nil {
			a.log.Error("audit write failed", "action", e.Action, "actor_id", e.ActorID, "outcome", e.Outcome, "error", err)
		}
	}
}

// Actor fills in e's actor fields from p.
func (p Principal) Actor(e store.AuditEntry) store.AuditEntry {
	e.ActorType, e.ActorID, e.ActorName, e.Role = p.Type, p.ID, p.Name, string(p.Role)
	return e
}
