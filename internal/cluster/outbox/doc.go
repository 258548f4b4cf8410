// Package outbox is a cluster worker's durable queue of messages that the
// coordinator owning a job has not yet acknowledged: job progress, step
// statuses, log chunks, job completion and scaler events. A worker has no
// database of its own, so this queue, one SQLite file on the worker's disk,
// is what lets it survive its own crash or a dropped connection without
// losing a message. The worker's relay code imports it; the coordinator
// imports it only for Dedup, the receiving side's rule.
//
// # Guarantee
//
// Append returns a sequence number only after the entry is committed with
// the write-ahead log synced to disk, so an entry whose Append succeeded
// survives a crash of the process and, as far as the disk honours fsync,
// a power cut. Entries stay until Ack removes them. Delivery is therefore
// at least once: the worker sends each entry, and after every (re)connect
// resends what Pending still returns, in sequence order; the receiver
// makes it exactly once in effect with Dedup.
//
// Sequence numbers are per outbox, start at 1, and strictly increase
// across restarts: the highest number ever given is stored in the same
// transaction as the entries, so a number is never given twice, even after
// every entry was acknowledged and deleted. Numbers are global, so one
// stream sees gaps where other streams' entries were appended; to let the
// receiver tell those gaps from lost messages, every entry also carries
// Prev, the sequence number of the entry of its stream that came before
// it and was still unacknowledged when it was appended (see Entry).
//
// An outbox also has an ID, random and made when the file is created. A
// receiver keys its state by (ID, stream), not by worker: a worker whose
// outbox file was lost starts a new outbox with numbers from 1 again, and
// under a new ID those are not mistaken for old duplicates.
//
// # Bounds
//
// A coordinator outage must not fill the worker's disk: the outbox holds
// at most Options.MaxEntries entries and Options.MaxBytes payload bytes,
// and each payload is at most MaxPayload bytes. Past a bound Append fails
// with an error wrapping ErrFull and writes nothing; acknowledged entries
// make room again. The file gives freed pages back to the file system
// (incremental auto-vacuum) once enough of them pile up.
//
// # Concurrency
//
// An *Outbox is safe for concurrent use by many goroutines. One writer
// goroutine makes every change: it takes the Appends and Acks waiting for
// it and commits them in one transaction (group commit), so a hundred
// concurrent Appends cost a few fsyncs, not a hundred. Pending reads
// through a separate pool of read-only connections and never waits for the
// writer. A file belongs to one process at a time: Open holds an exclusive
// lock (on Unix) until Close and fails with ErrInUse otherwise.
//
// Dedup is a plain value with no locking; it belongs to whoever holds the
// (ID, stream) state it describes.
package outbox
