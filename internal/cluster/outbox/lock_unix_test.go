//go:build unix

package outbox

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestSecondOpenIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	first := openAt(t, path, Options{})
	second, err := Open(path, Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrInUse) {
		if err == nil {
			second.Close()
		}
		t.Fatalf("second open: got %v, want ErrInUse", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openAt(t, path, Options{})
	mustAppend(t, third, "s", "k", "after the first closed")
}
