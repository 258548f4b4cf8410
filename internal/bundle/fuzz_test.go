package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarGz builds a tar.gz from raw headers and bodies, with nothing checked:
// what a hostile agent or a corrupt blob could send.
func tarGz(t testing.TB, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := []byte(strings.Repeat("x", int(h.Size)))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(body)
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// FuzzExtract feeds Extract arbitrary bundles (the fuzz input is gzipped,
// so the fuzzer works on the tar stream): whatever it accepts or refuses,
// nothing may be written outside the target directory, and no link left
// in it may point outside.
func FuzzExtract(f *testing.F) {
	f.Add(mustTar(f, tar.Header{Name: "a/b.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}))
	f.Add(mustTar(f, tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}))
	f.Add(mustTar(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		tar.Header{Name: "l/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}))
	f.Add(mustTar(f, tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "d/in", Typeflag: tar.TypeSymlink, Linkname: "../d2"},
		tar.Header{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}))
	f.Add(mustTar(f, tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		outer, err := os.MkdirTemp("", "kici-fuzz-extract-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(outer)
		dir := filepath.Join(outer, "tree")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = Extract(bytes.NewReader(gz.Bytes()), dir, Limits{MaxEntries: 64, MaxBytes: 1 << 20}, ExtractOptions{Links: true})
		entries, err := os.ReadDir(outer)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "tree" {
			t.Fatalf("Extract wrote beside its directory: %v", entries)
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			target, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			resolved := filepath.Clean(filepath.Join(filepath.Dir(p), target))
			if filepath.IsAbs(target) || !strings.HasPrefix(resolved+string(filepath.Separator), dir+string(filepath.Separator)) {
				t.Fatalf("link %s → %s points outside the tree", p, target)
			}
			return nil
		})
	})
}

// mustTar is the uncompressed tar of the entries (FuzzExtract gzips its
// input itself).
func mustTar(t testing.TB, entries ...tar.Header) []byte {
	t.Helper()
	gz := tarGz(t, entries...)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(zr)
	return out.Bytes()
}

// TestGzipBombIsCut: a small bundle whose gzip stream inflates to far more
// than its limits allow (zeros after the tar's end, which Extract reads to
// check the trailer, or a directory entry whose skipped content is huge)
// is refused once the expanded budget is spent, not read to its end.
func TestGzipBombIsCut(t *testing.T) {
	lim := Limits{MaxEntries: 4, MaxBytes: 1 << 20}
	for _, c := range []struct {
		name string
		tail int64 // zeros after the tar
		dir  int64 // a directory header's claimed size
	}{
		{"zeros after the tar's end", 256 << 20, 0},
		{"a directory with a huge body", 0, 256 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			tw := tar.NewWriter(zw)
			if c.dir > 0 {
				// Written by hand: tar.Writer refuses a body for a directory.
				h := tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatUSTAR}
				_ = tw.WriteHeader(&h)
				_ = tw.Flush()
				block := make([]byte, 512)
				copy(block, headerBytes(t, "d", c.dir))
				_, _ = zw.Write(block)
				_, _ = io.CopyN(zw, zeroReader{}, c.dir)
			}
			_ = tw.Close()
			if c.tail > 0 {
				_, _ = io.CopyN(zw, zeroReader{}, c.tail)
			}
			_ = zw.Close()
			if buf.Len() > 2<<20 {
				t.Fatalf("the bomb is %d bytes compressed, want a small one", buf.Len())
			}
			_, _, err := List(bytes.NewReader(buf.Bytes()), lim, false)
			var le *LimitError
			if !errors.As(err, &le) || le.What != "expanded" {
				t.Fatalf("List of a %d-byte bomb: %v, want the expanded limit", buf.Len(), err)
			}
			_, err = Extract(bytes.NewReader(buf.Bytes()), t.TempDir(), lim, ExtractOptions{})
			if !errors.As(err, &le) || le.What != "expanded" {
				t.Fatalf("Extract of the bomb: %v, want the expanded limit", err)
			}
		})
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// headerBytes is a raw USTAR header block of a directory claiming size
// bytes of content.
func headerBytes(t *testing.T, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: size, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()[:512]
	b[156] = tar.TypeDir
	// Fix the checksum after changing the type flag.
	sum := int64(0)
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}
