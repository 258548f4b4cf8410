package container

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

func TestParsePullPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    pullPolicy
		wantErr bool
	}{
		{in: "", want: pullIfNotPresent},
		{in: "IfNotPresent", want: pullIfNotPresent},
		{in: "Always", want: pullAlways},
		{in: "Never", want: pullNever},
		{in: "always", wantErr: true},
		{in: "Sometimes", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parsePullPolicy(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parsePullPolicy(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPullRefused(t *testing.T) {
	t.Parallel()
	unreachable := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	tests := []struct {
		name    string
		missing bool
		err     error
		want    bool
	}{
		{name: "missing image, registry unreachable", missing: true, err: unreachable, want: true},
		{name: "missing image, not found", missing: true, err: fmt.Errorf("pull: %w", cerrdefs.ErrNotFound), want: true},
		{name: "present image, registry unreachable", err: unreachable, want: false},
		{name: "present image, not found", err: fmt.Errorf("pull: %w", cerrdefs.ErrNotFound), want: true},
		{name: "present image, unauthorized", err: fmt.Errorf("pull: %w", cerrdefs.ErrUnauthenticated), want: true},
		{name: "present image, forbidden", err: fmt.Errorf("pull: %w", cerrdefs.ErrPermissionDenied), want: true},
		{name: "present image, bad reference", err: fmt.Errorf("pull: %w", cerrdefs.ErrInvalidArgument), want: true},
		{name: "present image, engine error", err: fmt.Errorf("pull: %w", cerrdefs.ErrInternal), want: false},
		{name: "missing image, cancelled", missing: true, err: fmt.Errorf("pull: %w", context.Canceled), want: false},
		{name: "missing image, deadline", missing: true, err: fmt.Errorf("pull: %w", context.DeadlineExceeded), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := pullRefused(tt.missing, tt.err); got != tt.want {
				t.Errorf("pullRefused(%v, %v) = %v, want %v", tt.missing, tt.err, got, tt.want)
			}
		})
	}
}
