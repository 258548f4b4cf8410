package blobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/blobs"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newDir(t *testing.T) *blobs.Dir {
	t.Helper()
	d, err := blobs.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func read(t *testing.T, d blobs.Store, key string) string {
	t.Helper()
	rc, _, err := d.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %q: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPutRefusals: a Put over the limit, with the wrong digest, with a bad
// key, or cancelled stores nothing and leaves the earlier blob as it was,
// and no temporary file behind.
func TestPutRefusals(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		key     string
		body    string
		limit   int64
		want    string // the digest asked for
		wantErr error
	}{
		{name: "over the limit", key: "a/k", body: "0123456789", limit: 9, wantErr: blobs.ErrTooLarge},
		{name: "digest mismatch", key: "a/k", body: "new", limit: 100, want: digest([]byte("other")), wantErr: blobs.ErrDigestMismatch},
		{name: "dot-dot key", key: "a/../k", body: "x", limit: 100, wantErr: blobs.ErrBadKey},
		{name: "absolute key", key: "/k", body: "x", limit: 100, wantErr: blobs.ErrBadKey},
		{name: "temporary directory", key: ".tmp/k", body: "x", limit: 100, wantErr: blobs.ErrBadKey},
		{name: "cancelled", ctx: cancelled, key: "a/k", body: "new", limit: 100, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDir(t)
			if _, err := d.Put(t.Context(), "a/k", strings.NewReader("old"), 100, ""); err != nil {
				t.Fatal(err)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			_, err := d.Put(ctx, tt.key, strings.NewReader(tt.body), tt.limit, tt.want)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("put: got error %v, want %v", err, tt.wantErr)
			}
			if got := read(t, d, "a/k"); got != "old" {
				t.Errorf("blob after the refused put: got %q, want %q", got, "old")
			}
			left, _ := os.ReadDir(filepath.Join(d.Root(), ".tmp"))
			if len(left) != 0 {
				t.Errorf("temporary files: got %d, want none", len(left))
			}
		})
	}
}

// TestPutReturnsSizeAndDigest: Put reports the size and SHA-256 of what it
// stored, and accepts exactly the limit.
func TestPutReturnsSizeAndDigest(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	body := []byte("0123456789")
	info, err := d.Put(t.Context(), "runs/r1/a.tgz", bytes.NewReader(body), int64(len(body)), digest(body))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 10 || info.SHA256 != digest(body) || info.Key != "runs/r1/a.tgz" {
		t.Errorf("info: got %+v, want size 10 and sha256 %s", info, digest(body))
	}
	st, err := d.Stat(t.Context(), "runs/r1/a.tgz")
	if err != nil || st.Size != 10 {
		t.Errorf("stat: got %+v, %v, want size 10", st, err)
	}
}

// TestReadersSeeWholeBlobs: while one blob is replaced over and over,
// every reader reads one whole version, never a mix or a part.
func TestReadersSeeWholeBlobs(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	versions := []string{strings.Repeat("a", 256<<10), strings.Repeat("b", 256<<10)}
	if _, err := d.Put(t.Context(), "k", strings.NewReader(versions[0]), 1<<20, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 40 {
			if _, err := d.Put(t.Context(), "k", strings.NewReader(versions[i%2]), 1<<20, ""); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 40 {
				rc, _, err := d.Open(t.Context(), "k")
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

// TestDeleteAndList: Delete removes a blob and the directories it leaves
// empty; deleting a missing blob is no error; List finds the blobs under a
// prefix and never the temporary directory.
func TestDeleteAndList(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	for _, k := range []string{"artifacts/r1/x.tgz", "artifacts/r2/y.tgz", "caches/z.tgz"} {
		if _, err := d.Put(t.Context(), k, strings.NewReader(k), 100, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.Root(), ".tmp", "put-1"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(prefix string) []string {
		var keys []string
		if err := d.List(t.Context(), prefix, func(i blobs.Info) error {
			keys = append(keys, i.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		return keys
	}
	if diff := cmp.Diff([]string{"artifacts/r1/x.tgz", "artifacts/r2/y.tgz", "caches/z.tgz"}, list("")); diff != "" {
		t.Errorf("list all (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"artifacts/r1/x.tgz", "artifacts/r2/y.tgz"}, list("artifacts/")); diff != "" {
		t.Errorf("list artifacts/ (-want +got):\n%s", diff)
	}
	if err := d.Delete(t.Context(), "artifacts/r1/x.tgz"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(t.Context(), "artifacts/r1/x.tgz"); err != nil {
		t.Errorf("delete again: got %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "artifacts", "r1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory after delete: got %v, want it gone", err)
	}
	if _, _, err := d.Open(t.Context(), "artifacts/r1/x.tgz"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("open deleted: got %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff([]string{"artifacts/r2/y.tgz"}, list("artifacts/")); diff != "" {
		t.Errorf("list after delete (-want +got):\n%s", diff)
	}
	// A new Dir on the same root removes the leftover temporary file.
	if _, err := blobs.NewDir(d.Root()); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(d.Root(), ".tmp")); len(left) != 0 {
		t.Errorf("temporary files after NewDir: got %d, want none", len(left))
	}
}

// TestVerify: a reader of a blob whose bytes changed on disk fails at its
// end with ErrDigestMismatch; an intact one reads to io.EOF.
func TestVerify(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	info, err := d.Put(t.Context(), "k", strings.NewReader("intact"), 100, "")
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := d.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(blobs.Verify(rc, info.SHA256)); err != nil {
		t.Errorf("intact blob: got %v, want nil", err)
	}
	if err := os.WriteFile(filepath.Join(d.Root(), "k"), []byte("damage"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, _, err = d.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(blobs.Verify(rc, info.SHA256)); !errors.Is(err, blobs.ErrDigestMismatch) {
		t.Errorf("damaged blob: got %v, want ErrDigestMismatch", err)
	}
}
