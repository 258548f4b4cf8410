package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConcurrentAppendsAreGroupCommitted(t *testing.T) {
	t.Parallel()
	const goroutines, perGoroutine = 64, 200
	o := openTemp(t, Options{})
	seqs := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				seq, err := o.Append(t.Context(), fmt.Sprintf("stream-%d", g%4), "k", []byte(fmt.Sprintf("g%d-i%d", g, i)))
				if err != nil {
					t.Errorf("goroutine %d append %d: %v", g, i, err)
					return
				}
				seqs[g] = append(seqs[g], seq)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	const total = goroutines * perGoroutine
	owner := make(map[uint64]string, total)
	for g, list := range seqs {
		for i, seq := range list {
			if i > 0 && seq <= list[i-1] {
				t.Errorf("goroutine %d: seq %d after %d, want increasing", g, seq, list[i-1])
			}
			if prev, dup := owner[seq]; dup {
				t.Fatalf("seq %d given twice: to %s and g%d-i%d", seq, prev, g, i)
			}
			owner[seq] = fmt.Sprintf("g%d-i%d", g, i)
		}
	}
	entries := all(t, o, "")
	if len(entries) != total {
		t.Fatalf("pending entries: got %d, want %d", len(entries), total)
	}
	lastOfStream := map[string]uint64{}
	for _, e := range entries {
		if string(e.Payload) != owner[e.Seq] {
			t.Errorf("entry %d payload %q, want %q", e.Seq, e.Payload, owner[e.Seq])
		}
		if e.Prev != lastOfStream[e.Stream] {
			t.Errorf("entry %d of %q: Prev %d, want %d", e.Seq, e.Stream, e.Prev, lastOfStream[e.Stream])
		}
		lastOfStream[e.Stream] = e.Seq
	}
	if n, _ := o.Depth(); n != total {
		t.Errorf("depth: got %d entries, want %d", n, total)
	}
	commits := o.commits.Load()
	t.Logf("%d appends in %d transactions (%.1f per transaction)", total, commits, float64(total)/float64(commits))
	if commits > total/10 {
		t.Errorf("transactions: got %d for %d appends, want at most %d (appends grouped)", commits, total, total/10)
	}
}

func TestPayloadBound(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	if _, err := o.Append(t.Context(), "s", "k", make([]byte, MaxPayload)); err != nil {
		t.Fatalf("append of exactly MaxPayload bytes: %v", err)
	}
	_, err := o.Append(t.Context(), "s", "k", make([]byte, MaxPayload+1))
	want := fmt.Sprintf("payload is %d bytes, over the limit of %d", MaxPayload+1, MaxPayload)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), o.Path()) {
		t.Fatalf("append of MaxPayload+1 bytes: got %v, want an error naming %q and the path", err, want)
	}
	if _, err := o.Append(t.Context(), "", "k", nil); err == nil {
		t.Error("append to the empty stream: got nil, want an error")
	}
	if n, _ := o.Depth(); n != 1 {
		t.Errorf("depth: got %d entries, want 1", n)
	}
}

func TestFullUntilAcked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		payload int
		fits    int    // appends that fit
		want    string // in the ErrFull message
	}{
		{name: "entries", opts: Options{MaxEntries: 3}, payload: 10, fits: 3, want: "holds 3 of 3 entries and 30 of 1073741824 payload bytes, and the new entry has 10 bytes"},
		{name: "bytes", opts: Options{MaxBytes: 100}, payload: 40, fits: 2, want: "holds 2 of 1000000 entries and 80 of 100 payload bytes, and the new entry has 40 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "outbox.db")
			o := openAt(t, path, tt.opts)
			payload := bytes.Repeat([]byte("x"), tt.payload)
			var seqs []uint64
			for range tt.fits {
				seq, err := o.Append(t.Context(), "s", "k", payload)
				if err != nil {
					t.Fatalf("append within the bounds: %v", err)
				}
				seqs = append(seqs, seq)
			}
			_, err := o.Append(t.Context(), "s", "k", payload)
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("append past the bound: got %v, want ErrFull saying %q and naming the path", err, tt.want)
			}
			if got := all(t, o, ""); len(got) != tt.fits {
				t.Fatalf("entries after the refused append: got %d, want %d", len(got), tt.fits)
			}
			if n, b := o.Depth(); n != tt.fits || b != int64(tt.fits*tt.payload) {
				t.Fatalf("depth when full: got (%d, %d), want (%d, %d)", n, b, tt.fits, tt.fits*tt.payload)
			}

			if n, err := o.Ack(t.Context(), "s", seqs[0]); err != nil || n != 1 {
				t.Fatalf("ack the first: got (%d, %v), want (1, nil)", n, err)
			}
			seq, err := o.Append(t.Context(), "s", "k", payload)
			if err != nil {
				t.Fatalf("append after an ack made room: %v", err)
			}
			if seq <= seqs[len(seqs)-1] {
				t.Errorf("seq after the refused append: got %d, want above %d", seq, seqs[len(seqs)-1])
			}
			if n, b := o.Depth(); n != tt.fits || b != int64(tt.fits*tt.payload) {
				t.Errorf("depth after ack and append: got (%d, %d), want (%d, %d)", n, b, tt.fits, tt.fits*tt.payload)
			}
		})
	}
}

func TestDepthTracksAppendsAcksAndReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := Open(path, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, entries int, bytes int64) {
		t.Helper()
		if n, b := o.Depth(); n != entries || b != bytes {
			t.Errorf("depth %s: got (%d, %d), want (%d, %d)", when, n, b, entries, bytes)
		}
	}
	check("when new", 0, 0)
	a1 := mustAppend(t, o, "a", "k", "12345")
	mustAppend(t, o, "b", "k", "1234567")
	a2 := mustAppend(t, o, "a", "k", "")
	check("after three appends", 3, 12)
	if _, err := o.Ack(t.Context(), "a", a1); err != nil {
		t.Fatal(err)
	}
	check("after acking one", 2, 7)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = openAt(t, path, Options{})
	check("after reopen", 2, 7)
	if _, err := o.Ack(t.Context(), "a", a2); err != nil {
		t.Fatal(err)
	}
	check("after acking the rest of a", 1, 7)
}

func TestCloseCommitsQueuedAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := Open(path, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Hold the writer in its first batch so that the other appends queue
	// up behind it.
	release := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	hook := func() {
		once.Do(func() {
			close(held)
			<-release
		})
	}
	o.beforeCommit.Store(&hook)

	const n = 20
	type outcome struct {
		seq uint64
		err error
	}
	outcomes := make(chan outcome, n)
	appendOne := func(i int) {
		seq, err := o.Append(t.Context(), "s", "k", []byte(fmt.Sprint(i)))
		outcomes <- outcome{seq, err}
	}
	go appendOne(0)
	<-held
	for i := 1; i < n; i++ {
		go appendOne(i)
	}
	for len(o.reqs) < n-1 { // until every other append waits in the queue
		runtime.Gosched()
	}
	closed := make(chan error)
	go func() { closed <- o.Close() }()
	for !o.isClosed() { // Close has taken the queue away before the writer resumes
		runtime.Gosched()
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	seqs := map[uint64]bool{}
	for range n {
		oc := <-outcomes
		if oc.err != nil {
			t.Fatalf("append queued before Close: %v", oc.err)
		}
		seqs[oc.seq] = true
	}

	if _, err := o.Append(t.Context(), "s", "k", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: got %v, want ErrClosed", err)
	}
	if _, err := o.Ack(t.Context(), "s", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ack after close: got %v, want ErrClosed", err)
	}
	if _, err := o.Pending(t.Context(), "s", 0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("pending after close: got %v, want ErrClosed", err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second close: got %v, want nil", err)
	}

	reopened := openAt(t, path, Options{})
	got := all(t, reopened, "s")
	if len(got) != n {
		t.Fatalf("entries after reopen: got %d, want %d", len(got), n)
	}
	for _, e := range got {
		if !seqs[e.Seq] {
			t.Errorf("entry %d was not returned by any append", e.Seq)
		}
	}
}

// isClosed reports whether Close has begun.
func (o *Outbox) isClosed() bool {
	o.gate.RLock()
	defer o.gate.RUnlock()
	return o.closed
}

func TestAppendWithEndedContext(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := o.Append(ctx, "s", "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled ctx: got %v, want context.Canceled", err)
	}

	// An append abandoned while it waits in the queue is never written.
	release := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	hook := func() {
		once.Do(func() {
			close(held)
			<-release
		})
	}
	o.beforeCommit.Store(&hook)
	first := make(chan error)
	go func() {
		_, err := o.Append(t.Context(), "s", "k", []byte("first"))
		first <- err
	}()
	<-held
	ctx, cancel = context.WithCancel(t.Context())
	abandoned := make(chan error)
	go func() {
		_, err := o.Append(ctx, "s", "k", []byte("abandoned"))
		abandoned <- err
	}()
	for len(o.reqs) < 1 {
		runtime.Gosched()
	}
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("append abandoned in the queue: got %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got := all(t, o, "")
	if len(got) != 1 || string(got[0].Payload) != "first" {
		t.Fatalf("entries: got %+v, want only the first", got)
	}
	if n, _ := o.Depth(); n != 1 {
		t.Errorf("depth: got %d, want 1", n)
	}
}

func TestAckReclaimsSpace(t *testing.T) {
	t.Parallel()
	o := openTemp(t, Options{})
	o.vacuumAt.Store(64)
	payload := bytes.Repeat([]byte("y"), 16<<10)
	var last uint64
	for range 50 { // 800 KiB, some 200 pages
		last = mustAppend(t, o, "s", "k", string(payload))
	}
	pages := func() (count, free int64) {
		t.Helper()
		if err := o.write.QueryRowContext(t.Context(), "PRAGMA page_count").Scan(&count); err != nil {
			t.Fatal(err)
		}
		if err := o.write.QueryRowContext(t.Context(), "PRAGMA freelist_count").Scan(&free); err != nil {
			t.Fatal(err)
		}
		return count, free
	}
	before, _ := pages()
	if _, err := o.Ack(t.Context(), "s", last); err != nil {
		t.Fatal(err)
	}
	// The writer answers the Ack first and reclaims after, so that no
	// caller waits for the vacuum: wait for it.
	var after, free int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, free = pages()
		if after <= before/10 && free == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after acking everything: %d pages (%d free), was %d; want the freed pages returned", after, free, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("pages before ack %d, after %d (%d free)", before, after, free)
}
