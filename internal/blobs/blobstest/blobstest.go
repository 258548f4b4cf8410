// Package blobstest is the conformance suite of [blobs.Store]: every
// implementation runs [Run] from its own tests, so that the guarantees the
// Store comment makes are checked the same way on each. Only tests import
// it.
package blobstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/blobs"
)

// LargeSize is the length of the blobs the suite calls large: over a
// megabyte and not a round number, so that a store which cuts a blob into
// parts (an S3 multipart upload) ends on a short one. A store under test
// should use parts small enough that a large blob takes several.
const LargeSize = 1<<20 + 12345

// Digest returns the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Read returns the bytes of the blob at key, failing t when it cannot.
func Read(t *testing.T, s blobs.Store, key string) string {
	t.Helper()
	rc, _, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %q: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

// large returns LargeSize bytes that are not all the same, seeded by c.
func large(c byte) []byte {
	b := make([]byte, LargeSize)
	for i := range b {
		b[i] = c + byte(i%251)
	}
	return b
}

// Run runs the contract tests against the stores newStore returns. Each
// call must return an empty store that no other call shares, so that the
// subtests may run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	t.Run("put refusals keep the earlier blob", func(t *testing.T) { t.Parallel(); testPutRefusals(t, newStore) })
	t.Run("put returns size and digest", func(t *testing.T) { t.Parallel(); testPutReturnsSizeAndDigest(t, newStore) })
	t.Run("large round trip", func(t *testing.T) { t.Parallel(); testLargeRoundTrip(t, newStore) })
	t.Run("readers see whole blobs", func(t *testing.T) { t.Parallel(); testReadersSeeWholeBlobs(t, newStore) })
	t.Run("missing blobs", func(t *testing.T) { t.Parallel(); testMissing(t, newStore) })
	t.Run("delete and list", func(t *testing.T) { t.Parallel(); testDeleteAndList(t, newStore) })
	t.Run("collect orphans", func(t *testing.T) { t.Parallel(); testCollectOrphans(t, newStore) })
}

// testPutRefusals: a Put over the limit, with the wrong digest, with a bad
// key, or cancelled stores nothing and leaves the earlier blob as it was,
// for small bodies and for large ones (which a store may send in parts).
func testPutRefusals(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	big := large('a')
	tests := []struct {
		name    string
		ctx     context.Context
		key     string
		body    []byte
		limit   int64
		want    string // the digest asked for
		wantErr error
	}{
		{name: "over the limit", key: "a/k", body: []byte("0123456789"), limit: 9, wantErr: blobs.ErrTooLarge},
		{name: "large over the limit", key: "a/k", body: big, limit: LargeSize - 1, wantErr: blobs.ErrTooLarge},
		{name: "large far over the limit", key: "a/k", body: big, limit: LargeSize / 3, wantErr: blobs.ErrTooLarge},
		{name: "digest mismatch", key: "a/k", body: []byte("new"), limit: 100, want: Digest([]byte("other")), wantErr: blobs.ErrDigestMismatch},
		{name: "large digest mismatch", key: "a/k", body: big, limit: LargeSize, want: Digest([]byte("other")), wantErr: blobs.ErrDigestMismatch},
		{name: "dot-dot key", key: "a/../k", body: []byte("x"), limit: 100, wantErr: blobs.ErrBadKey},
		{name: "absolute key", key: "/k", body: []byte("x"), limit: 100, wantErr: blobs.ErrBadKey},
		{name: "dot key", key: ".tmp/k", body: []byte("x"), limit: 100, wantErr: blobs.ErrBadKey},
		{name: "empty key", key: "", body: []byte("x"), limit: 100, wantErr: blobs.ErrBadKey},
		{name: "cancelled", ctx: cancelled, key: "a/k", body: []byte("new"), limit: 100, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			if _, err := s.Put(t.Context(), "a/k", strings.NewReader("old"), 100, ""); err != nil {
				t.Fatal(err)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			_, err := s.Put(ctx, tt.key, bytes.NewReader(tt.body), tt.limit, tt.want)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("put: got error %v, want %v", err, tt.wantErr)
			}
			var le *blobs.LimitError
			if errors.Is(tt.wantErr, blobs.ErrTooLarge) && (!errors.As(err, &le) || le.Limit != tt.limit) {
				t.Errorf("put: got %v, want a *LimitError with limit %d", err, tt.limit)
			}
			if got := Read(t, s, "a/k"); got != "old" {
				t.Errorf("blob after the refused put: got %d bytes %.20q, want %q", len(got), got, "old")
			}
			if st, err := s.Stat(t.Context(), "a/k"); err != nil || st.Size != 3 {
				t.Errorf("stat after the refused put: got %+v, %v, want size 3", st, err)
			}
		})
	}
}

// testPutReturnsSizeAndDigest: Put reports the size and SHA-256 of what it
// stored and accepts exactly the limit; Open and Stat report the size, and
// the blob reads back whole and passes Verify.
func testPutReturnsSizeAndDigest(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	body := []byte("0123456789")
	before := time.Now().Add(-time.Minute) // a server's clock may lag ours a little
	info, err := s.Put(t.Context(), "runs/r1/a.tgz", bytes.NewReader(body), int64(len(body)), Digest(body))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 10 || info.SHA256 != Digest(body) || info.Key != "runs/r1/a.tgz" || info.ModTime.Before(before) {
		t.Errorf("put info: got %+v, want key runs/r1/a.tgz, size 10, sha256 %s and a current time", info, Digest(body))
	}
	st, err := s.Stat(t.Context(), "runs/r1/a.tgz")
	if err != nil || st.Size != 10 || st.Key != "runs/r1/a.tgz" || st.ModTime.Before(before) {
		t.Errorf("stat: got %+v, %v, want size 10 and a current time", st, err)
	}
	rc, oi, err := s.Open(t.Context(), "runs/r1/a.tgz")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if oi.Size != 10 || oi.Key != "runs/r1/a.tgz" {
		t.Errorf("open info: got %+v, want size 10", oi)
	}
	got, err := io.ReadAll(blobs.Verify(rc, info.SHA256))
	if err != nil || string(got) != string(body) {
		t.Errorf("read through Verify: got %q, %v, want %q and no error", got, err, body)
	}
	// A Put with no digest asked for stores the bytes and reports theirs.
	info, err = s.Put(t.Context(), "runs/r1/a.tgz", strings.NewReader("replaced"), 8, "")
	if err != nil || info.SHA256 != Digest([]byte("replaced")) || info.Size != 8 {
		t.Errorf("put without a digest: got %+v, %v, want size 8 and its sha256", info, err)
	}
	if got := Read(t, s, "runs/r1/a.tgz"); got != "replaced" {
		t.Errorf("after the replacing put: got %q, want %q", got, "replaced")
	}
	// An empty blob is a blob.
	if info, err := s.Put(t.Context(), "empty", strings.NewReader(""), 0, Digest(nil)); err != nil || info.Size != 0 {
		t.Errorf("empty put: got %+v, %v, want size 0", info, err)
	}
	if got := Read(t, s, "empty"); got != "" {
		t.Errorf("empty blob: got %q, want nothing", got)
	}
}

// testLargeRoundTrip: a blob of LargeSize bytes, exactly at the limit,
// reads back byte for byte, and replacing it with another large one
// leaves the new bytes.
func testLargeRoundTrip(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	for _, c := range []byte{'a', 'b'} {
		body := large(c)
		info, err := s.Put(t.Context(), "caches/big.tgz", bytes.NewReader(body), LargeSize, Digest(body))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != LargeSize || info.SHA256 != Digest(body) {
			t.Errorf("put %c: got %+v, want size %d and its sha256", c, info, LargeSize)
		}
		if got := Read(t, s, "caches/big.tgz"); got != string(body) {
			t.Errorf("read %c: got %d bytes with sha256 %s, want %d with %s", c, len(got), Digest([]byte(got)), len(body), Digest(body))
		}
	}
}

// testReadersSeeWholeBlobs: while one blob is replaced over and over,
// every reader reads one whole version, never a mix or a part.
func testReadersSeeWholeBlobs(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	versions := []string{strings.Repeat("a", 256<<10), strings.Repeat("b", 256<<10)}
	if _, err := s.Put(t.Context(), "k", strings.NewReader(versions[0]), 1<<20, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 20 {
			if _, err := s.Put(t.Context(), "k", strings.NewReader(versions[i%2]), 1<<20, ""); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 20 {
				rc, _, err := s.Open(t.Context(), "k")
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Contains(versions, string(b)) {
					t.Errorf("read %d bytes that are neither version", len(b))
					return
				}
			}
		})
	}
	wg.Wait()
}

// testMissing: Open and Stat of a key that holds nothing fail with
// ErrNotFound, and a bad key fails with ErrBadKey.
func testMissing(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	if _, err := s.Put(t.Context(), "artifacts/r1/x.tgz", strings.NewReader("x"), 10, ""); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"artifacts/r1/y.tgz", "artifacts/r1", "artifacts", "nothing/here"} {
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, blobs.ErrNotFound) {
			t.Errorf("stat %q: got %v, want ErrNotFound", key, err)
		}
		if rc, _, err := s.Open(t.Context(), key); !errors.Is(err, blobs.ErrNotFound) {
			if rc != nil {
				rc.Close()
			}
			t.Errorf("open %q: got %v, want ErrNotFound", key, err)
		}
	}
	if _, err := s.Stat(t.Context(), "a/../b"); !errors.Is(err, blobs.ErrBadKey) {
		t.Errorf("stat of a bad key: got %v, want ErrBadKey", err)
	}
	if _, _, err := s.Open(t.Context(), "a//b"); !errors.Is(err, blobs.ErrBadKey) {
		t.Errorf("open of a bad key: got %v, want ErrBadKey", err)
	}
	if err := s.Delete(t.Context(), "../b"); !errors.Is(err, blobs.ErrBadKey) {
		t.Errorf("delete of a bad key: got %v, want ErrBadKey", err)
	}
}

// testDeleteAndList: List finds the blobs under a prefix with their
// sizes; Delete removes a blob, and deleting a missing one is no error; an
// error fn returns ends List with it.
func testDeleteAndList(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	keys := []string{"artifacts/r1/x.tgz", "artifacts/r2/y.tgz", "artifacts/r20/z.tgz", "caches/z.tgz"}
	for _, k := range keys {
		if _, err := s.Put(t.Context(), k, strings.NewReader(k), 100, ""); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string) []string {
		t.Helper()
		var got []string
		if err := s.List(t.Context(), prefix, func(i blobs.Info) error {
			if i.Size != int64(len(i.Key)) || i.ModTime.IsZero() {
				t.Errorf("list %q: got %+v, want size %d and a time", prefix, i, len(i.Key))
			}
			got = append(got, i.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	if diff := cmp.Diff(keys, list("")); diff != "" {
		t.Errorf("list all (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(keys[:3], list("artifacts/")); diff != "" {
		t.Errorf("list artifacts/ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(keys[1:3], list("artifacts/r2")); diff != "" {
		t.Errorf("list artifacts/r2 (-want +got):\n%s", diff)
	}
	if got := list("nothing/"); len(got) != 0 {
		t.Errorf("list nothing/: got %q, want none", got)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.List(t.Context(), "", func(blobs.Info) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("list with a failing fn: got %v after %d calls, want stop after 1", err, n)
	}
	if err := s.Delete(t.Context(), "artifacts/r1/x.tgz"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "artifacts/r1/x.tgz"); err != nil {
		t.Errorf("delete again: got %v, want nil", err)
	}
	if err := s.Delete(t.Context(), "never/stored"); err != nil {
		t.Errorf("delete of a key never stored: got %v, want nil", err)
	}
	if _, _, err := s.Open(t.Context(), "artifacts/r1/x.tgz"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("open deleted: got %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff(keys[1:3], list("artifacts/")); diff != "" {
		t.Errorf("list after delete (-want +got):\n%s", diff)
	}
}

// testCollectOrphans: CollectOrphans deletes the blobs under its prefix
// that the known set does not name, and only those.
func testCollectOrphans(t *testing.T, newStore func(t *testing.T) blobs.Store) {
	s := newStore(t)
	for _, k := range []string{"caches/1.tgz", "caches/2.tgz", "artifacts/r/3.tgz"} {
		if _, err := s.Put(t.Context(), k, strings.NewReader(k), 100, ""); err != nil {
			t.Fatal(err)
		}
	}
	known := func(context.Context) (map[string]bool, error) { return map[string]bool{"caches/1.tgz": true}, nil }
	// A cutoff in the past keeps everything: the blobs are too new.
	if n, err := blobs.CollectOrphans(t.Context(), s, "caches/", time.Now().Add(-time.Hour), known); err != nil || n != 0 {
		t.Errorf("collect with an old cutoff: got %d, %v, want 0 deleted", n, err)
	}
	n, err := blobs.CollectOrphans(t.Context(), s, "caches/", time.Now().Add(time.Hour), known)
	if err != nil || n != 1 {
		t.Errorf("collect: got %d, %v, want 1 deleted", n, err)
	}
	if _, err := s.Stat(t.Context(), "caches/2.tgz"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("the orphan: got %v, want it deleted", err)
	}
	for _, k := range []string{"caches/1.tgz", "artifacts/r/3.tgz"} {
		if _, err := s.Stat(t.Context(), k); err != nil {
			t.Errorf("%s: got %v, want it kept", k, err)
		}
	}
}
