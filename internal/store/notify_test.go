package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// TestNotifyReachesListenersOfTheSameSchemaOnly: a notification sent on
// one handle reaches a listener on another handle of the same database,
// in order, and not one on another schema of the same server.
func TestNotifyReachesListenersOfTheSameSchemaOnly(t *testing.T) {
	t.Parallel()
	url := testsvc.PostgresURL(t)
	sender := openTestDB(t, Config{DatabaseURL: url, MaxConns: 2})
	listener := openTestDB(t, Config{DatabaseURL: url, MaxConns: 2})
	stranger := openTestDB(t, Config{DatabaseURL: testsvc.PostgresURL(t), MaxConns: 2})
	got := make(chan string, 10)
	foreign := make(chan string, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	for _, l := range []struct {
		db  *DB
		out chan string
	}{{listener, got}, {stranger, foreign}} {
		ready := make(chan struct{})
		go func() {
			done <- l.db.Listen(ctx, "events", func() { close(ready) }, func(p string) { l.out <- p })
		}()
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("listener not ready in 10 s")
		}
	}
	for _, p := range []string{"one", "two", "three"} {
		if err := sender.Notify(t.Context(), "events", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two", "three"} {
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("got %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("waited 10 s for %q", want)
		}
	}
	if err := sender.Notify(t.Context(), "events", string(make([]byte, MaxNotifyPayload+1))); err == nil {
		t.Error("an oversized payload was sent")
	}
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("listen after its context ended: %v, want nil", err)
		}
	}
	select {
	case p := <-foreign:
		t.Errorf("a listener of another schema heard %q", p)
	default:
	}
}

func TestNotifyNeedsPostgres(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, Config{DataDir: t.TempDir()})
	if err := db.Notify(t.Context(), "events", "x"); !errors.Is(err, ErrNoNotify) {
		t.Errorf("notify on SQLite: %v, want ErrNoNotify", err)
	}
	if err := db.Listen(t.Context(), "events", nil, func(string) {}); !errors.Is(err, ErrNoNotify) {
		t.Errorf("listen on SQLite: %v, want ErrNoNotify", err)
	}
}
