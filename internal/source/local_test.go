package source_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kici-dev/kici/internal/source"
)

func TestLocalNotARepository(t *testing.T) {
	t.Parallel()
	l := &source.Local{Path: t.TempDir()}
	_, err := l.Resolve(t.Context(), "main")
	if err == nil || errors.Is(err, source.ErrNotFound) {
		t.Errorf("resolve in a plain directory: got %v, want an error other than ErrNotFound", err)
	}
	if err := (&source.Local{}).Validate(); err == nil {
		t.Errorf("validate without a path: got nil, want an error")
	}
}

func TestLocalCancelledContext(t *testing.T) {
	t.Parallel()
	dir, _, _, _ := makeRepo(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (&source.Local{Path: dir}).Resolve(ctx, "main"); !errors.Is(err, context.Canceled) {
		t.Errorf("resolve with a cancelled context: got %v, want context.Canceled", err)
	}
}
