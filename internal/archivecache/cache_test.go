package archivecache

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccc"
	shaD = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd" // SHA-256 length
)

func newCache(t *testing.T, dir string, maxEntries int) *Cache {
	t.Helper()
	c, err := New(dir, maxEntries, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// counter is a produce function that writes content and counts its calls.
type counter struct {
	calls   atomic.Int32
	content []byte
}

func (p *counter) produce(ctx context.Context, w io.Writer) error {
	p.calls.Add(1)
	_, err := w.Write(p.content)
	return err
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitN returns a hook for Cache.onWait and a function that blocks until the
// hook has been called n times.
func waitN(t *testing.T) (hook func(), await func(n int)) {
	ch := make(chan struct{}, 64)
	return func() { ch <- struct{}{} }, func(n int) {
		t.Helper()
		for range n {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("timed out waiting for Serve calls to wait on the flight")
			}
		}
	}
}

func entryFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if entryRe.MatchString(de.Name()) {
			names = append(names, de.Name())
		}
	}
	return names
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return false
}

func TestMissThenHit(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	p := &counter{content: randomBytes(t, 256<<10)}

	var first bytes.Buffer
	hit, err := c.Serve(t.Context(), "repo", shaA, &first, p.produce)
	if err != nil || hit {
		t.Fatalf("first Serve: hit=%v err=%v, want miss without error", hit, err)
	}
	var second bytes.Buffer
	hit, err = c.Serve(t.Context(), "repo", shaA, &second, p.produce)
	if err != nil || !hit {
		t.Fatalf("second Serve: hit=%v err=%v, want hit without error", hit, err)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("produce called %d times, want 1", n)
	}
	if !bytes.Equal(first.Bytes(), p.content) || !bytes.Equal(second.Bytes(), first.Bytes()) {
		t.Fatalf("bytes differ: first %d, second %d, produced %d", first.Len(), second.Len(), len(p.content))
	}
	if !exists(t, filepath.Join(dir, entryName("repo", shaA))) {
		t.Fatal("entry file missing after miss")
	}
	// The same sha under another source name is another entry.
	hit, err = c.Serve(t.Context(), "other", shaA, io.Discard, p.produce)
	if err != nil || hit || p.calls.Load() != 2 {
		t.Fatalf("other source: hit=%v err=%v calls=%d, want a new produce", hit, err, p.calls.Load())
	}
}

func TestConcurrentMissProducesOnce(t *testing.T) {
	c := newCache(t, t.TempDir(), 4)
	hook, await := waitN(t)
	c.onWait = hook

	content := randomBytes(t, 1<<20)
	release := make(chan struct{})
	var calls atomic.Int32
	produce := func(ctx context.Context, w io.Writer) error {
		calls.Add(1)
		<-release
		_, err := w.Write(content)
		return err
	}

	const n = 8
	var wg sync.WaitGroup
	results := make([]bytes.Buffer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Serve(t.Context(), "repo", shaA, &results[i], produce)
		})
	}
	await(n) // All 8 are waiting on the one flight.
	close(release)
	wg.Wait()

	if got := calls.Load(); got != 1 {
		t.Fatalf("produce called %d times, want 1", got)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !bytes.Equal(results[i].Bytes(), content) {
			t.Fatalf("caller %d got %d bytes that differ from the archive", i, results[i].Len())
		}
	}
}

func TestProduceFailure(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	hook, await := waitN(t)
	c.onWait = hook

	errBoom := errors.New("boom")
	release := make(chan struct{})
	var calls atomic.Int32
	failing := func(ctx context.Context, w io.Writer) error {
		calls.Add(1)
		<-release
		// A partial archive must not become an entry.
		if _, err := w.Write([]byte("partial")); err != nil {
			return err
		}
		return errBoom
	}

	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Serve(t.Context(), "repo", shaA, io.Discard, failing)
		})
	}
	await(n)
	close(release)
	wg.Wait()

	for i, err := range errs {
		if !errors.Is(err, errBoom) {
			t.Fatalf("caller %d: err = %v, want one wrapping %v", i, err, errBoom)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("produce called %d times, want 1", got)
	}
	if exists(t, filepath.Join(dir, entryName("repo", shaA))) {
		t.Fatal("entry file exists after produce failed")
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("directory not empty after failed produce: %v", des)
	}

	ok := &counter{content: []byte("archive")}
	var buf bytes.Buffer
	hit, err := c.Serve(t.Context(), "repo", shaA, &buf, ok.produce)
	if err != nil || hit || ok.calls.Load() != 1 || buf.String() != "archive" {
		t.Fatalf("Serve after failure: hit=%v err=%v calls=%d body=%q, want a fresh produce", hit, err, ok.calls.Load(), buf.String())
	}
}

func TestProducePanicIsAnError(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	_, err := c.Serve(t.Context(), "repo", shaA, io.Discard, func(context.Context, io.Writer) error {
		panic("kaboom")
	})
	if err == nil || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err = %v, want one mentioning the panic", err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("directory not empty after panicking produce: %v", des)
	}
}

func TestEvictionLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 2)
	p := &counter{content: []byte("archive")}
	serve := func(sha string) bool {
		t.Helper()
		hit, err := c.Serve(t.Context(), "repo", sha, io.Discard, p.produce)
		if err != nil {
			t.Fatalf("Serve %s: %v", sha[:1], err)
		}
		return hit
	}
	path := func(sha string) string { return filepath.Join(dir, entryName("repo", sha)) }

	serve(shaA)
	serve(shaB)
	if !serve(shaA) {
		t.Fatal("A was not a hit")
	}
	serve(shaC)

	if exists(t, path(shaB)) {
		t.Fatal("B still exists; it was the least recently used")
	}
	if !exists(t, path(shaA)) || !exists(t, path(shaC)) {
		t.Fatal("A or C was evicted")
	}
	if got := p.calls.Load(); got != 3 {
		t.Fatalf("produce called %d times, want 3", got)
	}
	if !serve(shaA) || !serve(shaC) {
		t.Fatal("A or C was not a hit")
	}
	if got := p.calls.Load(); got != 3 {
		t.Fatalf("produce called %d times after re-serving A and C, want 3", got)
	}
	if serve(shaB) {
		t.Fatal("B was a hit after eviction")
	}
	if got := p.calls.Load(); got != 4 {
		t.Fatalf("produce called %d times after re-serving B, want 4", got)
	}
	if n := len(entryFiles(t, dir)); n != 2 {
		t.Fatalf("%d entry files, want 2", n)
	}
}

func TestRestartKeepsBound(t *testing.T) {
	dir := t.TempDir()
	old := newCache(t, dir, 3)
	p := &counter{content: []byte("archive")}
	base := time.Now().Add(-time.Hour)
	for i, sha := range []string{shaA, shaB, shaC} {
		if _, err := old.Serve(t.Context(), "repo", sha, io.Discard, p.produce); err != nil {
			t.Fatal(err)
		}
		// Make the order explicit rather than relying on the clock.
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(dir, entryName("repo", sha)), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	// A crash left a temporary file; someone else keeps a file here too.
	tmp := filepath.Join(dir, entryName("repo", shaD)+".123456.tmp")
	if err := os.WriteFile(tmp, []byte("half an archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	unrelated := filepath.Join(dir, "notes.tmp")
	if err := os.WriteFile(unrelated, []byte("not ours"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := newCache(t, dir, 2)
	if exists(t, tmp) {
		t.Fatal("New left the leftover temporary file")
	}
	if !exists(t, unrelated) {
		t.Fatal("New removed a file that is not a cache entry")
	}
	if n := len(entryFiles(t, dir)); n > 2 {
		t.Fatalf("%d entry files after New, want at most 2", n)
	}
	if _, err := c.Serve(t.Context(), "repo", shaD, io.Discard, p.produce); err != nil {
		t.Fatal(err)
	}
	files := entryFiles(t, dir)
	if len(files) > 2 {
		t.Fatalf("%d entry files after a new entry, want at most 2: %v", len(files), files)
	}
	// C was the most recently used before the restart, so it survives with D.
	for _, sha := range []string{shaC, shaD} {
		if !exists(t, filepath.Join(dir, entryName("repo", sha))) {
			t.Fatalf("entry %s… missing; recency was not restored from mtimes", sha[:1])
		}
	}
	calls := p.calls.Load()
	hit, err := c.Serve(t.Context(), "repo", shaC, io.Discard, p.produce)
	if err != nil || !hit || p.calls.Load() != calls {
		t.Fatalf("C after restart: hit=%v err=%v, want a hit without produce", hit, err)
	}
}

func TestFirstCallerCancelled(t *testing.T) {
	c := newCache(t, t.TempDir(), 4)
	hook, await := waitN(t)
	c.onWait = hook

	content := randomBytes(t, 1<<20)
	started := make(chan struct{})
	release := make(chan struct{})
	produceCtxErr := make(chan error, 1)
	produce := func(ctx context.Context, w io.Writer) error {
		close(started)
		<-release
		produceCtxErr <- ctx.Err()
		if _, hasDeadline := ctx.Deadline(); !hasDeadline {
			return errors.New("produce context has no deadline")
		}
		_, err := w.Write(content)
		return err
	}

	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	err1 := make(chan error, 1)
	go func() {
		_, err := c.Serve(ctx1, "repo", shaA, io.Discard, produce)
		err1 <- err
	}()
	<-started
	await(1)

	var second bytes.Buffer
	err2 := make(chan error, 1)
	go func() {
		_, err := c.Serve(t.Context(), "repo", shaA, &second, produce)
		err2 <- err
	}()
	await(1)

	cancel1()
	if err := <-err1; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: err = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-err2; err != nil {
		t.Fatalf("second caller: %v", err)
	}
	if err := <-produceCtxErr; err != nil {
		t.Fatalf("produce saw its context end: %v", err)
	}
	if !bytes.Equal(second.Bytes(), content) {
		t.Fatalf("second caller got %d bytes that differ from the archive", second.Len())
	}
}

func TestProduceTimeout(t *testing.T) {
	c := newCache(t, t.TempDir(), 4)
	c.ProduceTimeout = time.Millisecond
	_, err := c.Serve(t.Context(), "repo", shaA, io.Discard, func(ctx context.Context, w io.Writer) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestInvalidInput(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	p := &counter{content: []byte("archive")}
	for _, tc := range []struct{ source, sha, want string }{
		{"repo", "", `""`},
		{"repo", strings.ToUpper(shaA), strings.ToUpper(shaA)},
		{"repo", shaA[:39], shaA[:39]},
		{"repo", shaA + "a", shaA + "a"},
		{"repo", "../../../../etc/passwd", "../../../../etc/passwd"},
		{"repo", "gggggggggggggggggggggggggggggggggggggggg", "gggggggggggggggggggggggggggggggggggggggg"},
		{"", shaA, "source"},
	} {
		_, err := c.Serve(t.Context(), tc.source, tc.sha, io.Discard, p.produce)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Serve(%q, %q): err = %v, want one naming %q", tc.source, tc.sha, err, tc.want)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("produce called %d times for invalid input", n)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("files created for invalid input: %v", des)
	}
}

func TestNewRejectsBadMaxEntries(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := New(t.TempDir(), n, nil); err == nil {
			t.Errorf("New with maxEntries %d: no error", n)
		}
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterErrorKeepsEntry(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	p := &counter{content: randomBytes(t, 64<<10)}
	errGone := errors.New("client went away")

	// On a miss.
	_, err := c.Serve(t.Context(), "repo", shaA, failingWriter{errGone}, p.produce)
	if err != errGone {
		t.Fatalf("miss with failing writer: err = %v, want %v as is", err, errGone)
	}
	// On a hit.
	hit, err := c.Serve(t.Context(), "repo", shaA, failingWriter{errGone}, p.produce)
	if err != errGone || !hit {
		t.Fatalf("hit with failing writer: hit=%v err=%v, want hit and %v as is", hit, err, errGone)
	}
	if !exists(t, filepath.Join(dir, entryName("repo", shaA))) {
		t.Fatal("entry deleted after a write error")
	}
	var buf bytes.Buffer
	hit, err = c.Serve(t.Context(), "repo", shaA, &buf, p.produce)
	if err != nil || !hit || !bytes.Equal(buf.Bytes(), p.content) {
		t.Fatalf("next caller: hit=%v err=%v bytes=%d, want the full archive from cache", hit, err, buf.Len())
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("produce called %d times, want 1", n)
	}
}

func TestVanishedEntryIsProducedAgain(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 4)
	p := &counter{content: []byte("archive")}
	if _, err := c.Serve(t.Context(), "repo", shaA, io.Discard, p.produce); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, entryName("repo", shaA))); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	hit, err := c.Serve(t.Context(), "repo", shaA, &buf, p.produce)
	if err != nil || hit || buf.String() != "archive" || p.calls.Load() != 2 {
		t.Fatalf("hit=%v err=%v body=%q calls=%d, want a fresh produce", hit, err, buf.String(), p.calls.Load())
	}
}

// TestReadWhileEvicted: a reader that has the entry open keeps reading it
// after it is evicted, and waiters of a flight get the archive even if the
// entry is evicted before they read it.
func TestReadWhileEvicted(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, dir, 1)
	p := &counter{content: randomBytes(t, 256<<10)}
	if _, err := c.Serve(t.Context(), "repo", shaA, io.Discard, p.produce); err != nil {
		t.Fatal(err)
	}

	// A hit whose writer evicts the entry part way through the copy.
	var buf bytes.Buffer
	evicted := false
	w := writerFunc(func(b []byte) (int, error) {
		if !evicted {
			evicted = true
			if _, err := c.Serve(t.Context(), "repo", shaB, io.Discard, p.produce); err != nil {
				return 0, err
			}
			if exists(t, filepath.Join(dir, entryName("repo", shaA))) {
				return 0, errors.New("A was not evicted")
			}
		}
		return buf.Write(b)
	})
	hit, err := c.Serve(t.Context(), "repo", shaA, w, p.produce)
	if err != nil || !hit || !bytes.Equal(buf.Bytes(), p.content) {
		t.Fatalf("hit=%v err=%v bytes=%d, want the full archive", hit, err, buf.Len())
	}

	// Many keys through a one-entry cache at once: every caller gets its
	// archive although entries are evicted constantly.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			sha := fmt.Sprintf("%040x", i%4)
			want := []byte(strings.Repeat(sha, 100))
			var got bytes.Buffer
			_, err := c.Serve(t.Context(), "repo", sha, &got, func(ctx context.Context, w io.Writer) error {
				_, err := w.Write(want)
				return err
			})
			if err != nil || !bytes.Equal(got.Bytes(), want) {
				t.Errorf("caller %d: err=%v bytes=%d", i, err, got.Len())
			}
		})
	}
	wg.Wait()
	if n := len(entryFiles(t, dir)); n != 1 {
		t.Fatalf("%d entry files, want 1", n)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestBytes checks Bytes on a hit, on a miss, and for an archive over the
// limit: the caller gets no bytes, but the archive is cached all the same.
func TestBytes(t *testing.T) {
	t.Parallel()
	small := randomBytes(t, 3000)
	tests := []struct {
		name     string
		cached   bool // Serve the archive once before Bytes
		max      int64
		wantOK   bool
		wantCall int32 // produce calls in all
	}{
		{"miss", false, 3000, true, 1},
		{"hit", true, 3000, true, 1},
		{"miss over the limit", false, 2999, false, 1},
		{"hit over the limit", true, 2999, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCache(t, t.TempDir(), 4)
			p := &counter{content: small}
			if tc.cached {
				if _, err := c.Serve(t.Context(), "repo", shaA, io.Discard, p.produce); err != nil {
					t.Fatalf("Serve: %v", err)
				}
			}
			data, ok, err := c.Bytes(t.Context(), "repo", shaA, tc.max, p.produce)
			if err != nil {
				t.Fatalf("Bytes: got error %v, want nil", err)
			}
			if ok != tc.wantOK {
				t.Fatalf("Bytes(max %d) of %d bytes: got ok %v, want %v", tc.max, len(small), ok, tc.wantOK)
			}
			if tc.wantOK && !bytes.Equal(data, small) {
				t.Errorf("Bytes: got %d bytes that differ from the archive", len(data))
			}
			if !tc.wantOK && data != nil {
				t.Errorf("Bytes over the limit: got %d bytes, want none", len(data))
			}
			// Whatever Bytes returned, the archive is now an entry.
			hit, err := c.Serve(t.Context(), "repo", shaA, io.Discard, p.produce)
			if err != nil || !hit {
				t.Errorf("Serve after Bytes: got hit %v, error %v, want a hit", hit, err)
			}
			if got := p.calls.Load(); got != tc.wantCall {
				t.Errorf("produce called %d times, want %d", got, tc.wantCall)
			}
		})
	}
}

// TestBytesConcurrentMissProducesOnce checks that concurrent Bytes and
// Serve calls for one missing archive share one produce call.
func TestBytesConcurrentMissProducesOnce(t *testing.T) {
	t.Parallel()
	c := newCache(t, t.TempDir(), 4)
	hook, await := waitN(t)
	c.onWait = hook

	content := randomBytes(t, 64<<10)
	release := make(chan struct{})
	var calls atomic.Int32
	produce := func(ctx context.Context, w io.Writer) error {
		calls.Add(1)
		<-release
		_, err := w.Write(content)
		return err
	}
	const n = 6
	var wg sync.WaitGroup
	got := make([][]byte, n)
	errs := make([]error, n)
	var served bytes.Buffer
	var serveErr error
	for i := range n {
		wg.Go(func() {
			var ok bool
			got[i], ok, errs[i] = c.Bytes(t.Context(), "repo", shaA, int64(len(content)), produce)
			if errs[i] == nil && !ok {
				errs[i] = errors.New("not ok")
			}
		})
	}
	wg.Go(func() { _, serveErr = c.Serve(t.Context(), "repo", shaA, &served, produce) })
	await(n + 1) // Every caller waits on the one flight.
	close(release)
	wg.Wait()

	if got := calls.Load(); got != 1 {
		t.Fatalf("produce called %d times, want 1", got)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Bytes caller %d: got error %v, want the archive", i, errs[i])
		}
		if !bytes.Equal(got[i], content) {
			t.Fatalf("Bytes caller %d: got %d bytes that differ from the archive", i, len(got[i]))
		}
	}
	if serveErr != nil || !bytes.Equal(served.Bytes(), content) {
		t.Fatalf("Serve: got %d bytes, error %v, want the archive", served.Len(), serveErr)
	}
}

// TestBytesGivesUpWaiting checks that a Bytes call whose ctx ends while
// the archive is produced returns at once with ctx's error, and that the
// produce call goes on and caches the archive.
func TestBytesGivesUpWaiting(t *testing.T) {
	t.Parallel()
	c := newCache(t, t.TempDir(), 4)
	hook, await := waitN(t)
	c.onWait = hook

	release := make(chan struct{})
	produced := make(chan struct{})
	produce := func(ctx context.Context, w io.Writer) error {
		defer close(produced)
		<-release
		_, err := w.Write([]byte("archive"))
		return err
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Bytes(ctx, "repo", shaA, 1<<20, produce)
		done <- err
	}()
	await(1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Bytes after its ctx ended: got error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Bytes did not return after its ctx ended")
	}
	close(release)
	<-produced
	// The flight finishes after produce returns; a later call joins it or
	// finds the entry, and never produces again.
	data, ok, err := c.Bytes(t.Context(), "repo", shaA, 1<<20, func(context.Context, io.Writer) error {
		return errors.New("produced twice")
	})
	if err != nil || !ok || string(data) != "archive" {
		t.Fatalf("Bytes after the produce call ended: got %q, ok %v, error %v, want %q", data, ok, err, "archive")
	}
}
