package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/bundle"
)

// entry is one entry of a hand-made tar.gz.
type entry struct {
	name     string
	typ      byte
	body     string
	linkname string
}

// craft builds a tar.gz of entries as given, unchecked: what a
// compromised agent or orchestrator could send.
func craft(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.linkname, ModTime: time.Unix(1700000000, 0)}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

var roomy = bundle.Limits{MaxEntries: 100, MaxBytes: 1 << 20}

// TestRoundTrip: a tree written with AddTree (links kept) lists its files
// and extracts to the same files, links and directories elsewhere; a link
// out of the tree is left out.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	write(t, filepath.Join(src, "a.txt"), "alpha")
	write(t, filepath.Join(src, "d", "b.txt"), "beta")
	if err := os.MkdirAll(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d/b.txt", filepath.Join(src, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../etc/passwd", filepath.Join(src, "outside")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := bundle.NewWriter(&buf, roomy)
	ts, err := w.AddTree("0", src, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ts.Links != 1 {
		t.Errorf("links left out: got %d, want 1 (the one out of the tree)", ts.Links)
	}
	wantFiles := []bundle.File{{Path: "0/a.txt", Size: 5}, {Path: "0/d/b.txt", Size: 4}}
	if diff := cmp.Diff(wantFiles, w.Files()); diff != "" {
		t.Errorf("written files (-want +got):\n%s", diff)
	}
	files, _, err := bundle.List(bytes.NewReader(buf.Bytes()), roomy, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("listed files (-want +got):\n%s", diff)
	}
	dst := t.TempDir()
	if _, err := bundle.Extract(bytes.NewReader(buf.Bytes()), dst, roomy, bundle.ExtractOptions{Links: true}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"0/a.txt": "alpha", "0/d/b.txt": "beta", "0/inside": "beta"} {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name)))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q, %v, want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "0", "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory: got %v, want it extracted", err)
	}
}

// TestUnsafeBundlesRefused: crafted bundles whose entries would write
// outside the target, through a link, or of a kind bundles do not carry
// are refused, by List and by Extract, and nothing lands outside.
func TestUnsafeBundlesRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []entry
		links   bool
	}{
		{name: "dot-dot", entries: []entry{{name: "../escape.txt", body: "x"}}},
		{name: "dot-dot inside", entries: []entry{{name: "a/../../escape.txt", body: "x"}}},
		{name: "absolute", entries: []entry{{name: "/tmp/escape.txt", body: "x"}}},
		{name: "backslash", entries: []entry{{name: `..\escape.txt`, body: "x"}}},
		{name: "link when links are not allowed", entries: []entry{{name: "l", typ: tar.TypeSymlink, linkname: "a"}}},
		{name: "absolute link", links: true, entries: []entry{{name: "l", typ: tar.TypeSymlink, linkname: "/etc"}}},
		{name: "link out of the tree", links: true, entries: []entry{{name: "d/l", typ: tar.TypeSymlink, linkname: "../../x"}}},
		{name: "hard link", entries: []entry{{name: "a", body: "x"}, {name: "h", typ: tar.TypeLink, linkname: "a"}}},
		{name: "device", entries: []entry{{name: "dev", typ: tar.TypeChar}}},
		{name: "fifo", entries: []entry{{name: "fifo", typ: tar.TypeFifo}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := craft(t, tt.entries...)
			if _, _, err := bundle.List(bytes.NewReader(data), roomy, tt.links); !errors.Is(err, bundle.ErrUnsafe) {
				t.Errorf("list: got %v, want ErrUnsafe", err)
			}
			top := t.TempDir()
			dst := filepath.Join(top, "w", "s")
			_, err := bundle.Extract(bytes.NewReader(data), dst, roomy, bundle.ExtractOptions{Links: tt.links})
			if !errors.Is(err, bundle.ErrUnsafe) {
				t.Errorf("extract: got %v, want ErrUnsafe", err)
			}
			for _, p := range []string{filepath.Join(top, "escape.txt"), filepath.Join(top, "w", "escape.txt"), "/tmp/escape.txt"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s exists after the refused extraction", p)
				}
			}
		})
	}
}

// TestExtractDoesNotFollowLinksOut: an entry below a symbolic link that
// the target directory already holds, pointing outside, is not written
// there.
func TestExtractDoesNotFollowLinksOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	dst := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "out")); err != nil {
		t.Fatal(err)
	}
	data := craft(t, entry{name: "out/planted.txt", body: "x"})
	if _, err := bundle.Extract(bytes.NewReader(data), dst, roomy, bundle.ExtractOptions{}); err == nil {
		t.Errorf("extract: got no error, want one")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Errorf("the entry was written through the link, outside the target")
	}
}

// TestLimits: a bundle with more entries or content than its limits is
// refused with a *LimitError naming the limit, when written and when read.
func TestLimits(t *testing.T) {
	t.Parallel()
	data := craft(t, entry{name: "a", body: "12345"}, entry{name: "b", body: "12345"})
	tests := []struct {
		name string
		lim  bundle.Limits
		what string
	}{
		{name: "entries", lim: bundle.Limits{MaxEntries: 1, MaxBytes: 100}, what: "files"},
		{name: "bytes", lim: bundle.Limits{MaxEntries: 10, MaxBytes: 9}, what: "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var le *bundle.LimitError
			if _, _, err := bundle.List(bytes.NewReader(data), tt.lim, false); !errors.As(err, &le) || le.What != tt.what {
				t.Errorf("list: got %v, want a LimitError on %s", err, tt.what)
			}
			if _, err := bundle.Extract(bytes.NewReader(data), t.TempDir(), tt.lim, bundle.ExtractOptions{}); !errors.As(err, &le) || le.What != tt.what {
				t.Errorf("extract: got %v, want a LimitError on %s", err, tt.what)
			}
			src := t.TempDir()
			write(t, filepath.Join(src, "a"), "12345")
			write(t, filepath.Join(src, "b"), "12345")
			var buf bytes.Buffer
			w := bundle.NewWriter(&buf, tt.lim)
			err := w.AddFile("a", filepath.Join(src, "a"))
			if err == nil {
				err = w.AddFile("b", filepath.Join(src, "b"))
			}
			if !errors.As(err, &le) || le.What != tt.what {
				t.Errorf("write: got %v, want a LimitError on %s", err, tt.what)
			}
		})
	}
}

// TestExtractReplacesFiles: extracting over an existing tree replaces its
// files, and refuses to turn a directory into a file.
func TestExtractReplacesFiles(t *testing.T) {
	t.Parallel()
	dst := t.TempDir()
	write(t, filepath.Join(dst, "f"), "old")
	if _, err := bundle.Extract(bytes.NewReader(craft(t, entry{name: "f", body: "new"})), dst, roomy, bundle.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "f")); string(got) != "new" {
		t.Errorf("replaced file: got %q, want %q", got, "new")
	}
	if err := os.MkdirAll(filepath.Join(dst, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Extract(bytes.NewReader(craft(t, entry{name: "d", body: "x"})), dst, roomy, bundle.ExtractOptions{}); !errors.Is(err, bundle.ErrUnsafe) {
		t.Errorf("file over a directory: got %v, want ErrUnsafe", err)
	}
	left, _ := filepath.Glob(filepath.Join(dst, ".*kici-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
