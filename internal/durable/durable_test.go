package durable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(p, []byte("one"), os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL over an existing file: %v, want ErrExist", err)
	}
	if err := WriteFile(p, []byte("3"), os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "3" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file %q mode %v, want \"3\" 0600", b, fi.Mode().Perm())
	}
}

func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := Sync(dir); err != nil {
		t.Fatalf("sync a directory: %v", err)
	}
	missing := filepath.Join(dir, "gone")
	if err := Sync(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("sync of a missing path: %v, want an error naming it", err)
	}
}
