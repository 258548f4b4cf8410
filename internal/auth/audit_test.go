package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// listActions returns the actions of every audit entry, oldest first.
func listActions(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.ListAudit(t.Context(), store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatalf("list audit: %v", err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		out = append(out, rows[i].Action)
	}
	return out
}

func entry(i int) store.AuditEntry {
	return store.AuditEntry{ActorType: ActorAnonymous, Action: fmt.Sprintf("a.%03d", i), Outcome: OutcomeAllowed}
}

func actions(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("a.%03d", i))
	}
	return out
}

// TestAuditLogOrderAndClose records more entries than the queue holds,
// from one caller, and checks that Close leaves every one written, in the
// order recorded, on both engines.
func TestAuditLogOrderAndClose(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		a := newAuditLog(nil, db, 4)
		for i := range 50 {
			a.Record(t.Context(), entry(i))
		}
		a.Close()
		a.Close()                        // harmless
		a.Record(t.Context(), entry(50)) // after Close: written at once
		if diff := cmp.Diff(actions(0, 51), listActions(t, db)); diff != "" {
			t.Errorf("audit entries (-want +got):\n%s", diff)
		}
	})
}

// blockingStore holds each InsertAudit until release is closed, and fails
// the entries whose action is in fail.
type blockingStore struct {
	release chan struct{}
	started chan struct{} // gets a value as each insert starts
	fail    string

	mu   sync.Mutex
	done []string
}

func (s *blockingStore) InsertAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	s.started <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return store.AuditEntry{}, ctx.Err()
	}
	if e.Action == s.fail {
		return store.AuditEntry{}, errors.New("disk full")
	}
	s.mu.Lock()
	s.done = append(s.done, e.Action)
	s.mu.Unlock()
	return e, nil
}

// TestAuditLogQueueAndFullQueue checks that Record returns at once while
// the store is slow and the queue has room, that a Record finding the
// queue full waits for its own write (writing the queue first, in order),
// and that a failing write is logged while the others go on.
func TestAuditLogQueueAndFullQueue(t *testing.T) {
	t.Parallel()
	st := &blockingStore{release: make(chan struct{}), started: make(chan struct{}, 100), fail: "a.001"}
	var logged bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &logMu}, nil))
	a := newAuditLog(logger, st, 2)
	defer a.Close()
	inFull := make(chan struct{})
	a.onFull = func() { close(inFull) } // once: only entry 3 finds the queue full

	a.Record(t.Context(), entry(0))
	<-st.started // the writer holds a.000
	// The queue has room for two: these return while the store is stuck.
	a.Record(t.Context(), entry(1))
	a.Record(t.Context(), entry(2))

	full := make(chan struct{})
	go func() {
		a.Record(context.Background(), entry(3)) // queue full: synchronous
		close(full)
	}()
	<-inFull
	select {
	case <-full:
		t.Fatal("a Record with the queue full returned before the store wrote anything")
	default:
	}
	close(st.release)
	<-full
	st.mu.Lock()
	got := append([]string(nil), st.done...)
	st.mu.Unlock()
	if diff := cmp.Diff([]string{"a.000", "a.002", "a.003"}, got); diff != "" {
		t.Errorf("entries written when the synchronous Record returned (-want +got):\n%s", diff)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !bytes.Contains(logged.Bytes(), []byte("audit write failed")) || !bytes.Contains(logged.Bytes(), []byte("a.001")) {
		t.Errorf("log: got %q, want the failed write of a.001", logged.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
