package worker

import (
	"log/slog"
	"testing"
	"time"
)

// TestIsolationStopsOncePerIsolation: a worker without a channel for the
// limit calls OnIsolated once; a channel that comes back and is lost again
// for the limit calls it again; while connected it is never called.
func TestIsolationStopsOncePerIsolation(t *testing.T) {
	t.Parallel()
	called := make(chan time.Time, 4)
	w, err := New(Config{CoordinatorURLs: []string{"http://127.0.0.1:1"}, CredentialFile: "unused",
		IsolationLimit: 200 * time.Millisecond, OnIsolated: func() { called <- time.Now() }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go w.watchIsolation(t.Context())
	select {
	case at := <-called:
		if at.Sub(start) < 200*time.Millisecond {
			t.Fatalf("OnIsolated after %s, before the 200ms limit", at.Sub(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnIsolated never called for a worker without a channel")
	}
	// Once per isolation: still cut off, it is not called again.
	select {
	case <-called:
		t.Fatal("OnIsolated called twice in one isolation")
	case <-time.After(600 * time.Millisecond):
	}
	// Connected, then cut off again: once more.
	w.mu.Lock()
	w.up["http://c"] = "coord"
	w.mu.Unlock()
	select {
	case <-called:
		t.Fatal("OnIsolated called while connected")
	case <-time.After(600 * time.Millisecond):
	}
	w.mu.Lock()
	delete(w.up, "http://c")
	w.mu.Unlock()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("OnIsolated not called after the second isolation")
	}
}
