package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kici-dev/kici/internal/agent/runner"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body))}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": "abc123"}}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("write header %q: %v", e.name, err)
		}
		if h.Size > 0 {
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

func TestExtractTarGz(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []entry
		max     int64
		unsafe  bool
		check   func(t *testing.T, dir string)
	}{
		{
			name: "files, directories and links inside",
			entries: []entry{
				{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
				{name: "./", typ: tar.TypeDir},
				{name: "src/", typ: tar.TypeDir},
				{name: "src/main.go", typ: tar.TypeReg, body: "package main\n"},
				{name: "deep/er/run.sh", typ: tar.TypeReg, body: "echo hi\n", mode: 0o755},
				{name: "src/link", typ: tar.TypeSymlink, link: "main.go"},
				{name: "up", typ: tar.TypeSymlink, link: "src/../deep"},
				{name: "hard", typ: tar.TypeLink, link: "src/main.go"},
				{name: "replaced", typ: tar.TypeSymlink, link: "src/victim"},
				{name: "replaced", typ: tar.TypeReg, body: "now a file"},
			},
			check: func(t *testing.T, dir string) {
				for name, want := range map[string]string{"src/main.go": "package main\n", "src/link": "package main\n", "hard": "package main\n", "up/er/run.sh": "echo hi\n", "replaced": "now a file"} {
					got, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil || string(got) != want {
						t.Errorf("%s: got %q (%v), want %q", name, got, err, want)
					}
				}
				if fi, err := os.Stat(filepath.Join(dir, "deep/er/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
					t.Errorf("run.sh: got mode %v (%v), want executable", fi.Mode(), err)
				}
				if _, err := os.Lstat(filepath.Join(dir, "src/victim")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("src/victim: got %v, want it never created through the replaced link", err)
				}
			},
		},
		{name: "dot-dot", entries: []entry{{name: "../evil", typ: tar.TypeReg, body: "x"}}, unsafe: true},
		{name: "dot-dot inside", entries: []entry{{name: "a/../../evil", typ: tar.TypeReg, body: "x"}}, unsafe: true},
		{name: "absolute", entries: []entry{{name: "/tmp/evil", typ: tar.TypeReg, body: "x"}}, unsafe: true},
		{name: "symlink up", entries: []entry{{name: "l", typ: tar.TypeSymlink, link: "../../etc"}}, unsafe: true},
		{name: "absolute symlink", entries: []entry{{name: "l", typ: tar.TypeSymlink, link: "/etc"}}, unsafe: true},
		{
			name: "entry below a symlink",
			entries: []entry{
				{name: "s", typ: tar.TypeSymlink, link: "."},
				{name: "s/s/evil", typ: tar.TypeSymlink, link: "../../x"},
			},
			unsafe: true,
		},
		{
			name: "file through a symlinked directory",
			entries: []entry{
				{name: "d/", typ: tar.TypeDir},
				{name: "l", typ: tar.TypeSymlink, link: "d"},
				{name: "l/f", typ: tar.TypeReg, body: "x"},
			},
			unsafe: true,
		},
		{name: "hard link up", entries: []entry{{name: "h", typ: tar.TypeLink, link: "../x"}}, unsafe: true},
		{name: "hard link to nothing", entries: []entry{{name: "h", typ: tar.TypeLink, link: "x"}}, unsafe: true},
		{name: "device", entries: []entry{{name: "dev", typ: tar.TypeChar}}, unsafe: true},
		{
			name:    "size bomb",
			entries: []entry{{name: "a", typ: tar.TypeReg, body: "0123456789"}, {name: "b", typ: tar.TypeReg, body: "0123456789"}},
			max:     15,
			unsafe:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			maxBytes := tc.max
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			_, _, err := runner.ExtractTarGz(bytes.NewReader(tarGz(t, tc.entries...)), dir, maxBytes)
			if tc.unsafe {
				if !errors.Is(err, runner.ErrUnsafeArchive) {
					t.Fatalf("extract: got %v, want ErrUnsafeArchive", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("extract: got %v, want nil", err)
			}
			tc.check(t, dir)
		})
	}
}
