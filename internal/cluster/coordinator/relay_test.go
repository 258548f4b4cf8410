package coordinator

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/kici-dev/kici/internal/cluster/worker"
)

func ended(r *relayed) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// TestRelayedStreamBounds: what a worker relays is counted until read; a
// stream is ended (its agent reconnects and replays) rather than buffer
// past its queue or past the channel's byte budget.
func TestRelayedStreamBounds(t *testing.T) {
	t.Parallel()
	var budget atomic.Int64
	r := newRelayed("ok", nil, &budget)
	r.deliver([]byte("hello"))
	if budget.Load() != 5 {
		t.Fatalf("bytes waiting: %d, want 5", budget.Load())
	}
	if _, data, err := r.Read(context.Background()); err != nil || string(data) != "hello" || budget.Load() != 0 {
		t.Fatalf("read %q (%v), %d bytes left waiting; want hello and 0", data, err, budget.Load())
	}

	// A reader that falls a whole queue behind.
	var budget2 atomic.Int64
	slow := newRelayed("slow", nil, &budget2)
	for range worker.RelayBuffer {
		slow.deliver([]byte("x"))
	}
	if ended(slow) {
		t.Fatal("ended before its queue was full")
	}
	slow.deliver([]byte("one too many"))
	if !ended(slow) || budget2.Load() != int64(worker.RelayBuffer) {
		t.Errorf("after overflowing its queue: ended %t, %d bytes waiting; want ended, %d", ended(slow), budget2.Load(), worker.RelayBuffer)
	}

	// A channel whose other streams hold the whole budget.
	var shared atomic.Int64
	shared.Store(maxBuffered - 4)
	big := newRelayed("big", nil, &shared)
	big.deliver(bytes.Repeat([]byte("y"), 5))
	if !ended(big) || shared.Load() != maxBuffered-4 {
		t.Errorf("past the channel's budget: ended %t, %d bytes waiting; want ended and the budget unchanged", ended(big), shared.Load())
	}
}
