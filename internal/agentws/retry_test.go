package agentws

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	boom := errors.New("connection terminated")
	delays := []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	cases := []struct {
		name      string
		failures  int
		wantCalls int
		wantErr   bool
	}{
		{"first try", 0, 1, false},
		{"after two failures", 2, 3, false},
		{"after every retry", 3, 4, false},
		{"gives up", 10, 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retry(t.Context(), delays, func() error {
				calls++
				if calls <= tc.failures {
					return boom
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("calls: got %d, want %d", calls, tc.wantCalls)
			}
			if got := err != nil; got != tc.wantErr {
				t.Fatalf("error: got %v, want error %t", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the last failure", err)
			}
		})
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	boom := errors.New("connection terminated")
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := retry(ctx, []time.Duration{time.Hour}, func() error {
		calls++
		cancel()
		return boom
	})
	if calls != 1 || !errors.Is(err, boom) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %d calls and %v, want 1 call and both the failure and context.Canceled", calls, err)
	}
}
