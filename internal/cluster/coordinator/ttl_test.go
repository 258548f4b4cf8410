package coordinator

import (
	"testing"
	"time"
)

func TestWorkerTTL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		intervalMS int64
		workers    int
		want       time.Duration
	}{
		{intervalMS: 5000, workers: 1, want: 15 * time.Second},
		{intervalMS: 1000, workers: 1, want: MinWorkerTTL},
		{intervalMS: -5, workers: 0, want: MinWorkerTTL},
		{intervalMS: 5000, workers: 2000, want: 40 * time.Second},
		{intervalMS: 1 << 40, workers: 1, want: maxWorkerTTL},
		{intervalMS: 5000, workers: 1 << 30, want: maxWorkerTTL},
		{intervalMS: 1 << 62, workers: 1, want: maxWorkerTTL},
	} {
		if got := ttl(tt.intervalMS, tt.workers); got != tt.want {
			t.Errorf("ttl(%d ms, %d workers): got %s, want %s", tt.intervalMS, tt.workers, got, tt.want)
		}
	}
}
