package logs

import (
	"encoding/json"
	"sync"
	"sync/atomic"
)

// EventKind says what an Event carries.
type EventKind string

// Event kinds.
const (
	// EventLog carries lines Append stored (Event.Log).
	EventLog EventKind = "log"
	// EventStatus carries a status change, in a shape the publisher (the
	// tracker) chooses (Event.Data).
	EventStatus EventKind = "status"
	// EventLagged is the last event of a subscriber that fell too far
	// behind: events were lost after it, and its channel is closed. The
	// client should reload what it shows from its last cursors and
	// subscribe again.
	EventLagged EventKind = "lagged"
)

// Event is one live event of a run. Subscribers share each event: they
// must not modify it.
type Event struct {
	// RunID is the run the event belongs to; subscribers of that run get it.
	RunID string    `json:"run_id"`
	Kind  EventKind `json:"kind"`
	// Log is set for EventLog.
	Log *LogEvent `json:"log,omitempty"`
	// Data is the payload of an EventStatus, as JSON.
	Data json.RawMessage `json:"data,omitempty"`
}

// LogEvent is the payload of an EventLog: the lines of one stored chunk.
type LogEvent struct {
	JobID string `json:"job_id"`
	// Step is the step index, or SetupStep.
	Step int `json:"step"`
	// Attempt is the chunk's dispatch attempt; 0 means the first.
	Attempt int    `json:"attempt,omitempty"`
	Seq     uint64 `json:"seq"`
	// Cursor is the byte offset of the first line in the step's log, and
	// Next the offset after the last: a client that has read up to Cursor
	// continues from Next, and one that has not reads the gap with Read.
	Cursor int64  `json:"cursor"`
	Next   int64  `json:"next"`
	Lines  []Line `json:"lines"`
}

// Subscribe returns a channel of the run's events, from now on, and a
// function that ends the subscription and closes the channel (calling it
// more than once is harmless). A subscriber that has SubscriberBuffer
// events waiting when another is published is dropped: it receives an
// EventLagged event and then its channel is closed.
func (s *Store) Subscribe(runID string) (<-chan Event, func()) {
	return s.hub.subscribe(runID)
}

// Publish sends an event to the subscribers of its run. It never blocks.
func (s *Store) Publish(ev Event) {
	s.hub.publish(ev)
}

// hub is an in-process publish/subscribe of events by run id.
type hub struct {
	// buffer is how many events a subscriber may have waiting; its channel
	// has room for one more, the lagged marker.
	buffer int
	lagged atomic.Int64

	mu   sync.Mutex
	subs map[string]map[*subscriber]struct{}
}

type subscriber struct {
	ch chan Event
	// closed is set, under hub.mu, when ch is closed.
	closed bool
}

func newHub(buffer int) *hub {
	return &hub{buffer: buffer, subs: map[string]map[*subscriber]struct{}{}}
}

func (h *hub) subscribe(runID string) (<-chan Event, func()) {
	sub := &subscriber{ch: make(chan Event, h.buffer+1)}
	h.mu.Lock()
	set := h.subs[runID]
	if set == nil {
		set = map[*subscriber]struct{}{}
		h.subs[runID] = set
	}
	set[sub] = struct{}{}
	h.mu.Unlock()
	return sub.ch, func() {
		h.mu.Lock()
		h.drop(runID, sub)
		h.mu.Unlock()
	}
}

// publish delivers ev to each subscriber of its run. Only publish sends on
// the channels, and only under h.mu, so a channel holding fewer than
// h.buffer events has room and the sends below never block.
func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[ev.RunID] {
		if len(sub.ch) < h.buffer {
			sub.ch <- ev
			continue
		}
		sub.ch <- Event{RunID: ev.RunID, Kind: EventLagged}
		h.drop(ev.RunID, sub)
		h.lagged.Add(1)
	}
}

// drop closes a subscriber's channel and forgets it; h.mu must be held.
func (h *hub) drop(runID string, sub *subscriber) {
	if sub.closed {
		return
	}
	sub.closed = true
	close(sub.ch)
	set := h.subs[runID]
	delete(set, sub)
	if len(set) == 0 {
		delete(h.subs, runID)
	}
}
