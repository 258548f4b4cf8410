package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/events"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

type collector struct {
	mu  sync.Mutex
	got []apiv1.Event
	ch  chan struct{}
}

func (c *collector) deliver(ev apiv1.Event) {
	c.mu.Lock()
	c.got = append(c.got, ev)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

func (c *collector) wait(t *testing.T, n int) []apiv1.Event {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		got := append([]apiv1.Event(nil), c.got...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-c.ch:
		case <-deadline:
			t.Fatalf("waited 15 s for %d events, got %d", n, len(got))
		}
	}
}

func startRelay(t *testing.T, ctx context.Context, url, self string) (*events.Relay, *collector) {
	t.Helper()
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &collector{ch: make(chan struct{}, 1)}
	r := events.New(db, self, slog.New(slog.NewTextHandler(t.Output(), nil)), store.MaxNotifyPayload,
		events.Handlers{Status: c.deliver, Log: func(p events.LogPointer) {
			c.deliver(apiv1.Event{Kind: "log", RunID: p.RunID, JobID: p.JobID, Step: &p.Step, Status: fmt.Sprint(p.Seq, " ", p.Cursor, " ", p.Next)})
		}})
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { <-done })
	select {
	case <-r.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("relay not listening after 15 s")
	}
	return r, c
}

// TestRelayDeliversToTheOtherCoordinatorsInOrder: events published on
// coordinator a reach b, all of them and in order, long errors cut to fit
// a notification; a does not get its own back.
func TestRelayDeliversToTheOtherCoordinatorsInOrder(t *testing.T) {
	t.Parallel()
	url := testsvc.PostgresURL(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, fromA := startRelay(t, ctx, url, "coord-a")
	_, atB := startRelay(t, ctx, url, "coord-b")
	const n = 300
	for i := range n {
		if i%7 == 3 {
			a.PublishLog(events.LogPointer{RunID: "run-1", JobID: fmt.Sprint(i), Step: 2, Seq: uint64(i), Cursor: int64(i), Next: int64(i + 1)})
			continue
		}
		ev := apiv1.Event{Kind: "job", RunID: "run-1", JobID: fmt.Sprint(i), Status: "running"}
		if i%50 == 0 {
			ev.Error = strings.Repeat("é", 5000) // 10,000 bytes
		}
		a.Publish(ev)
	}
	got := atB.wait(t, n)
	for i, ev := range got[:n] {
		if ev.JobID != fmt.Sprint(i) || ev.RunID != "run-1" {
			t.Fatalf("event %d at b: %+v, want job %d of run-1 (order kept)", i, ev, i)
		}
		if i%7 == 3 && (ev.Kind != "log" || ev.Status != fmt.Sprint(i, " ", i, " ", i+1)) {
			t.Fatalf("event %d at b: %+v, want the log pointer published", i, ev)
		}
		if i%50 == 0 && i%7 != 3 && (len(ev.Error) > 2100 || !strings.HasPrefix(ev.Error, "éé")) {
			t.Errorf("event %d: error of %d bytes, want it cut to about 2000", i, len(ev.Error))
		}
	}
	if a.Dropped() != 0 {
		t.Errorf("a dropped %d events", a.Dropped())
	}
	fromA.mu.Lock()
	own := len(fromA.got)
	fromA.mu.Unlock()
	if own != 0 {
		t.Errorf("a delivered %d of its own events back to itself", own)
	}
}
