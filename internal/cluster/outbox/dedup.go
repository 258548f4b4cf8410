package outbox

import "fmt"

// Verdict is what a receiver does with an incoming entry; see Dedup.
type Verdict int

// The verdicts of Dedup.Check.
const (
	// Apply: the entry is the next one of its stream. Apply it, and in the
	// same transaction set the stored Applied to its Seq; then acknowledge
	// its Seq.
	Apply Verdict = iota + 1
	// Duplicate: the entry was applied before (a resend after a lost ack,
	// or a replay after a reconnect). Skip it, but acknowledge Applied
	// again so the sender can drop it.
	Duplicate
	// Gap: an earlier entry of the stream has not been applied yet. Skip
	// it and acknowledge nothing past Applied; the sender still holds the
	// missing entry and resends it, in order, on its next replay.
	Gap
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Apply:
		return "apply"
	case Duplicate:
		return "duplicate"
	case Gap:
		return "gap"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Dedup is the receiving side's rule for one sender's stream: Applied is
// the Seq of the last entry applied from the stream, 0 before the first.
// The receiver keeps one Applied per (outbox ID, stream), and stores it
// in the same transaction as the changes an entry makes, so that a crash
// never separates the two: an entry is then applied exactly once however
// often it arrives. In SQL the rule is a guarded update of that stored
// value, "SET applied = seq WHERE applied < seq AND applied >= prev",
// that changes one row exactly when Check says Apply.
//
// Why gaps are refused: sequence numbers are per outbox, so a stream's
// numbers have holes where other streams' entries went, and a hole alone
// says nothing. Prev does: it names the entry that must come before. If
// the receiver applied an entry whose Prev it had not applied (say a live
// send overtook a replay after a reconnect), Applied would jump past the
// missing entry and that entry, arriving later, would look like a
// duplicate and be lost for good. Refusing it costs a resend, since the
// sender keeps every unacknowledged entry and replays them in order.
//
// A Dedup is a plain value; it does no locking.
type Dedup struct {
	// Applied is the Seq of the last entry applied from the stream.
	Applied uint64
}

// Check decides what to do with the entry numbered seq whose predecessor
// in its stream is prev (Entry.Seq and Entry.Prev). It does not change d:
// after applying, the caller sets Applied to seq.
//
// Prev 0 means the sender held no earlier unacknowledged entry of the
// stream, so everything before was acknowledged, hence applied. A prev at
// or below Applied is therefore always satisfied. An entry with prev at or
// above its own seq is malformed and falls under Gap or Duplicate, never
// Apply.
func (d Dedup) Check(seq, prev uint64) Verdict {
	switch {
	case seq <= d.Applied:
		return Duplicate
	case prev > d.Applied:
		return Gap
	default:
		return Apply
	}
}
