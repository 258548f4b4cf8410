package agentws

import (
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
)

func status(seq uint64, more bool) protocol.Message {
	m := &protocol.StepStatus{JobID: "j", Seq: seq, Step: 0, Status: protocol.StepRunning}
	m.SetMore(more)
	return m
}

func seqs(batch []protocol.Message) []uint64 {
	out := make([]uint64, len(batch))
	for i, m := range batch {
		_, out[i] = m.(protocol.JobScoped).JobSeq()
	}
	return out
}

// TestGatherTakesWhatIsQueued: without a burst, a batch is what has
// arrived, taken without waiting.
func TestGatherTakesWhatIsQueued(t *testing.T) {
	t.Parallel()
	msgs := make(chan protocol.Message, 8)
	msgs <- status(2, false)
	msgs <- status(3, false)
	got := gather([]protocol.Message{status(1, false)}, msgs, 64, time.Hour)
	if len(got) != 3 {
		t.Fatalf("got seqs %v, want [1 2 3]", seqs(got))
	}
	got = gather([]protocol.Message{status(4, false)}, msgs, 64, time.Hour)
	if len(got) != 1 {
		t.Fatalf("got seqs %v, want [4] at once", seqs(got))
	}
}

// TestGatherWaitsForTheRestOfABurst: a batch whose last message says more
// follows waits for the follower, up to the end of the burst.
func TestGatherWaitsForTheRestOfABurst(t *testing.T) {
	t.Parallel()
	msgs := make(chan protocol.Message)
	returned := make(chan struct{})
	go func() {
		time.Sleep(50 * time.Millisecond) // the follower is late, but within the wait
		msgs <- status(2, true)
		msgs <- status(3, false)
		// A new burst, sent only once gather returned: it must not have
		// waited for it. (Sent at once, gather may take it as already
		// there, which it is allowed to.)
		<-returned
		msgs <- status(4, false)
	}()
	got := gather([]protocol.Message{status(1, true)}, msgs, 64, time.Minute)
	close(returned)
	if s := seqs(got); len(s) != 3 || s[2] != 3 {
		t.Fatalf("got seqs %v, want [1 2 3]", s)
	}
	if m := <-msgs; m == nil {
		t.Fatal("the message after the burst was lost")
	}
}

// TestGatherGivesUpOnALateFollower: a follower that does not come within
// the wait is not waited for longer; a closed channel ends the batch too;
// and a batch never exceeds its maximum.
func TestGatherGivesUpOnALateFollower(t *testing.T) {
	t.Parallel()
	msgs := make(chan protocol.Message)
	start := time.Now()
	got := gather([]protocol.Message{status(1, true)}, msgs, 64, 30*time.Millisecond)
	if len(got) != 1 {
		t.Fatalf("got seqs %v, want [1]", seqs(got))
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Errorf("returned after %s, before the wait of 30ms ended", waited)
	}

	closed := make(chan protocol.Message, 1)
	closed <- status(2, true)
	close(closed)
	if got := gather([]protocol.Message{status(1, true)}, closed, 64, time.Hour); len(got) != 2 {
		t.Fatalf("closed channel: got seqs %v, want [1 2]", seqs(got))
	}

	full := make(chan protocol.Message, 4)
	for i := range 4 {
		full <- status(uint64(i+2), true)
	}
	if got := gather([]protocol.Message{status(1, true)}, full, 3, time.Hour); len(got) != 3 {
		t.Fatalf("max 3: got seqs %v, want [1 2 3]", seqs(got))
	}
}
