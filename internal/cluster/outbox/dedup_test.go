package outbox

import (
	"testing"
)

func TestDedupCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		applied uint64
		seq     uint64
		prev    uint64
		want    Verdict
	}{
		{name: "first entry of a stream", applied: 0, seq: 1, prev: 0, want: Apply},
		{name: "first entry of a stream after other streams' numbers", applied: 0, seq: 7, prev: 0, want: Apply},
		{name: "next in the chain", applied: 7, seq: 12, prev: 7, want: Apply},
		{name: "predecessor acknowledged before the append", applied: 12, seq: 20, prev: 0, want: Apply},
		{name: "predecessor older than applied", applied: 12, seq: 20, prev: 9, want: Apply},
		{name: "the applied entry again", applied: 12, seq: 12, prev: 7, want: Duplicate},
		{name: "an older entry", applied: 12, seq: 7, prev: 0, want: Duplicate},
		{name: "predecessor not applied", applied: 7, seq: 20, prev: 12, want: Gap},
		{name: "nothing applied, predecessor missing", applied: 0, seq: 5, prev: 3, want: Gap},
		{name: "malformed: prev equals seq", applied: 3, seq: 5, prev: 5, want: Gap},
		{name: "malformed: prev above seq, already applied", applied: 9, seq: 5, prev: 8, want: Duplicate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := (Dedup{Applied: tt.applied}).Check(tt.seq, tt.prev); got != tt.want {
				t.Errorf("Dedup{Applied: %d}.Check(%d, %d): got %v, want %v", tt.applied, tt.seq, tt.prev, got, tt.want)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	t.Parallel()
	for v, want := range map[Verdict]string{Apply: "apply", Duplicate: "duplicate", Gap: "gap", 0: "Verdict(0)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String(): got %q, want %q", int(v), got, want)
		}
	}
}

// FuzzDedupDelivery plays a sender and a receiver over a network that
// loses, repeats and reorders messages, driven by the fuzzer's bytes. The
// sender keeps an outbox-like list of unacknowledged entries of one
// stream, numbered with gaps as if other streams took numbers in between,
// and each with the Prev the outbox would give it. Whatever the network
// does, the receiver, following Dedup, must apply the entries in order,
// each once, and once the network delivers one full replay everything
// must be applied.
func FuzzDedupDelivery(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{9, 9, 9, 200, 17, 3, 250, 1, 1, 128, 64})
	f.Add([]byte{255, 254, 253, 0, 0, 0, 17, 34, 51})
	f.Fuzz(playDelivery)
}

// playDelivery is one run of FuzzDedupDelivery.
func playDelivery(t *testing.T, plan []byte) {
	if len(plan) > 512 {
		plan = plan[:512] // replays copy the backlog: keep the wire small
	}
	type msg struct{ seq, prev uint64 }
	var (
		pending []msg  // the sender's unacknowledged entries, in order
		next    uint64 // the sender's last given number
		all     []uint64
		wire    []msg // in flight, in any order
		recv    Dedup
		applied []uint64
	)
	appendEntry := func(skip uint64) {
		next += 1 + skip // numbers taken by other streams
		var prev uint64
		if len(pending) > 0 {
			prev = pending[len(pending)-1].seq
		}
		m := msg{next, prev}
		pending = append(pending, m)
		all = append(all, next)
		wire = append(wire, m) // the live send
	}
	ack := func(upto uint64) { // cumulative, like Outbox.Ack
		for len(pending) > 0 && pending[0].seq <= upto {
			pending = pending[1:]
		}
	}
	deliver := func(m msg) {
		switch recv.Check(m.seq, m.prev) {
		case Apply:
			applied = append(applied, m.seq)
			recv.Applied = m.seq
			ack(m.seq)
		case Duplicate, Gap:
			ack(recv.Applied)
		}
	}
	for _, b := range plan {
		switch op := b % 4; {
		case op == 0: // the worker appends
			appendEntry(uint64((b >> 2) % 3))
		case op == 1 && len(wire) > 0: // one message arrives, picked by b
			i := int(b>>2) % len(wire)
			m := wire[i]
			if b&0x80 == 0 { // else it stays in flight too: delivered twice
				wire = append(wire[:i], wire[i+1:]...)
			}
			deliver(m)
		case op == 2 && len(wire) > 0: // one message is lost
			i := int(b>>2) % len(wire)
			wire = append(wire[:i], wire[i+1:]...)
		case op == 3: // reconnect: replay everything unacknowledged, in order
			wire = append(wire, pending...)
		}
		for i := 1; i < len(applied); i++ {
			if applied[i] <= applied[i-1] {
				t.Fatalf("applied %v: out of order or twice", applied)
			}
		}
		for i, seq := range applied {
			if seq != all[i] {
				t.Fatalf("applied %v, but the stream is %v: an entry was skipped", applied, all)
			}
		}
	}
	// A clean replay: every unacknowledged entry, in order, arrives.
	for _, m := range append([]msg(nil), pending...) {
		deliver(m)
	}
	if len(applied) != len(all) || len(pending) != 0 {
		t.Fatalf("after a clean replay applied %v of %v, %d still pending", applied, all, len(pending))
	}
}
