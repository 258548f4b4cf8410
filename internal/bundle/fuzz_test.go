package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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
		outer := t.TempDir()
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
