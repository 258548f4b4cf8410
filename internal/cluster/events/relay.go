// Package events relays the live events of runs between the coordinators
// of a cluster, so that a run is followable on any coordinator whichever
// one advanced it: status changes (run, job and step) as they are, and log
// chunks as pointers to the rows the sending coordinator stored (the
// receiver reads the lines from the shared log store). It rides on
// PostgreSQL notifications (LISTEN/NOTIFY) through the store: coordinators
// share the database already, and need no connection to each other.
//
// Delivery is best effort, like the in-process hub it feeds: an event sent
// while a coordinator's listening connection is down is lost to that
// coordinator's followers, who read the state again from the API when
// their stream reconnects. The database stays the one source of truth.
//
// A *Relay is safe for concurrent use. Only the orchestrator imports this
// package.
package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kici-dev/kici/internal/apiv1"
)

// Topic is the notification topic of status events.
const Topic = "events"

// maxError bounds the error text of a relayed event, so that an event
// always fits a notification.
const maxError = 2000

// queueSize is how many events wait to be sent; past it they are dropped
// (and counted), never blocking the publisher.
const queueSize = 4096

// Notifier is what the relay needs of the store (a *store.DB).
type Notifier interface {
	Notify(ctx context.Context, topic, payload string) error
	Listen(ctx context.Context, topic string, ready func(), fn func(payload string)) error
}

// LogPointer names a log chunk a coordinator stored: the step log's byte
// range [Cursor, Next) of the chunk seq Seq.
type LogPointer struct {
	RunID   string `json:"r"`
	JobID   string `json:"j"`
	Step    int    `json:"s"`
	Attempt int    `json:"a,omitempty"`
	Seq     uint64 `json:"q"`
	Cursor  int64  `json:"c"`
	Next    int64  `json:"n"`
}

// Handlers receive the events other coordinators publish, on the
// listening goroutine, in the order they were published.
type Handlers struct {
	Status func(apiv1.Event)
	Log    func(LogPointer)
}

// item is one queued event: a status event or a log pointer.
type item struct {
	status *apiv1.Event
	log    *LogPointer
}

// Relay sends the events published on this coordinator to the others and
// delivers theirs here.
type Relay struct {
	db      Notifier
	self    string
	log     *slog.Logger
	deliver Handlers
	max     int // payload bound (store.MaxNotifyPayload)
	out     chan item
	dropped atomic.Int64
	ready   chan struct{}
	readyOn atomic.Bool
}

// New returns a relay for coordinator self, delivering the other
// coordinators' events to deliver. maxPayload is the largest notification
// the store sends.
func New(db Notifier, self string, log *slog.Logger, maxPayload int, deliver Handlers) *Relay {
	return &Relay{db: db, self: self, log: log, deliver: deliver, max: maxPayload,
		out: make(chan item, queueSize), ready: make(chan struct{})}
}

// Dropped is how many events were not relayed because the queue was full
// or the payload could not be sent.
func (r *Relay) Dropped() int64 { return r.dropped.Load() }

// Ready is closed once the relay first listens: events other coordinators
// publish after it are delivered here.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Publish queues ev to be sent to the other coordinators. It never blocks.
func (r *Relay) Publish(ev apiv1.Event) {
	ev = trim(ev)
	r.enqueue(item{status: &ev})
}

// PublishLog queues a pointer to a stored log chunk to be sent to the
// other coordinators. It never blocks.
func (r *Relay) PublishLog(p LogPointer) {
	r.enqueue(item{log: &p})
}

func (r *Relay) enqueue(it item) {
	select {
	case r.out <- it:
	default:
		r.dropped.Add(1)
	}
}

// message is one notification: events of one coordinator, in the order
// they were published (Order tells status events and log pointers apart:
// 's' and 'l', one letter per event).
type message struct {
	Origin string        `json:"o"`
	Order  string        `json:"k"`
	Events []apiv1.Event `json:"e,omitempty"`
	Logs   []LogPointer  `json:"l,omitempty"`
}

// encode renders items as one message.
func (r *Relay) encode(items []item) ([]byte, error) {
	m := message{Origin: r.self}
	order := make([]byte, 0, len(items))
	for _, it := range items {
		if it.status != nil {
			m.Events = append(m.Events, *it.status)
			order = append(order, 's')
		} else {
			m.Logs = append(m.Logs, *it.log)
			order = append(order, 'l')
		}
	}
	m.Order = string(order)
	return json.Marshal(m)
}

// Run sends and listens until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.listen(ctx)
	}()
	r.send(ctx)
	<-done
	return nil
}

// send batches queued events into notifications until ctx ends.
func (r *Relay) send(ctx context.Context) {
	for {
		var first item
		select {
		case <-ctx.Done():
			return
		case first = <-r.out:
		}
		batch := []item{first}
	more:
		for len(batch) < 64 {
			select {
			case it := <-r.out:
				batch = append(batch, it)
			default:
				break more
			}
		}
		r.sendBatch(ctx, batch)
	}
}

// sendBatch sends batch in as few notifications as fit the payload bound.
func (r *Relay) sendBatch(ctx context.Context, batch []item) {
	for len(batch) > 0 {
		n := len(batch)
		var payload []byte
		for ; n > 0; n /= 2 {
			var err error
			payload, err = r.encode(batch[:n])
			if err == nil && len(payload) <= r.max {
				break
			}
		}
		if n == 0 {
			r.dropped.Add(1) // one event that does not fit even alone
			batch = batch[1:]
			continue
		}
		if err := r.db.Notify(ctx, Topic, string(payload)); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("relay status events to other coordinators failed", "events", n, "error", err)
			}
			r.dropped.Add(int64(n))
		}
		batch = batch[n:]
	}
}

// listen delivers the other coordinators' events until ctx ends, listening
// again after a failure.
func (r *Relay) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := r.db.Listen(ctx, Topic, func() {
			backoff = 100 * time.Millisecond
			if r.readyOn.CompareAndSwap(false, true) {
				close(r.ready)
			}
		}, r.receive)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("listening for other coordinators' status events failed; events sent meanwhile are lost to this coordinator's followers",
			"error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// receive delivers the events of one notification from another
// coordinator. A notification is input from the database, which every
// coordinator writes: a malformed one is logged and skipped.
func (r *Relay) receive(payload string) {
	var m message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		r.log.Warn("malformed status event notification skipped", "error", err, "bytes", len(payload))
		return
	}
	if m.Origin == r.self {
		return // published here already
	}
	if len(m.Order) != len(m.Events)+len(m.Logs) {
		r.log.Warn("malformed status event notification skipped", "error", "order does not match the events", "bytes", len(payload))
		return
	}
	var ev, lg int
	for _, k := range []byte(m.Order) {
		switch {
		case k == 's' && ev < len(m.Events):
			if e := m.Events[ev]; e.RunID != "" && r.deliver.Status != nil {
				r.deliver.Status(e)
			}
			ev++
		case k == 'l' && lg < len(m.Logs):
			if p := m.Logs[lg]; p.RunID != "" && r.deliver.Log != nil {
				r.deliver.Log(p)
			}
			lg++
		default:
			r.log.Warn("malformed status event notification: rest skipped", "bytes", len(payload))
			return
		}
	}
}

// trim bounds ev's error text to maxError bytes, cut on a character
// boundary.
func trim(ev apiv1.Event) apiv1.Event {
	if len(ev.Error) > maxError {
		cut := maxError
		for cut > 0 && !utf8.RuneStart(ev.Error[cut]) {
			cut--
		}
		ev.Error = ev.Error[:cut] + "…"
	}
	return ev
}
