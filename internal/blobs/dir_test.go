package blobs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/blobs/blobstest"
)

func newDir(t *testing.T) *blobs.Dir {
	t.Helper()
	d, err := blobs.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDirContract runs the Store conformance suite on a Dir, and checks
// after each test that no temporary file was left behind.
func TestDirContract(t *testing.T) {
	t.Parallel()
	blobstest.Run(t, func(t *testing.T) blobs.Store {
		d := newDir(t)
		t.Cleanup(func() {
			if left, _ := os.ReadDir(filepath.Join(d.Root(), ".tmp")); len(left) != 0 {
				t.Errorf("temporary files: got %d, want none", len(left))
			}
		})
		return d
	})
}

// TestDirLayout: Delete removes the directories a blob leaves empty; List
// never lists the temporary directory; a new Dir on the same root removes
// the temporary files an earlier one left.
func TestDirLayout(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	for _, k := range []string{"artifacts/r1/x.tgz", "artifacts/r2/y.tgz"} {
		if _, err := d.Put(t.Context(), k, strings.NewReader(k), 100, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.Root(), ".tmp", "put-1"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := d.List(t.Context(), "", func(i blobs.Info) error {
		if strings.Contains(i.Key, ".tmp") {
			t.Errorf("list: got %q, want no temporary file", i.Key)
		}
		n++
		return nil
	}); err != nil || n != 2 {
		t.Errorf("list: got %d blobs, %v, want 2", n, err)
	}
	if err := d.Delete(t.Context(), "artifacts/r1/x.tgz"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "artifacts", "r1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory after delete: got %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "artifacts", "r2")); err != nil {
		t.Errorf("directory of the other blob: got %v, want it kept", err)
	}
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
