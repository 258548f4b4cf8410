// Package logs stores the output of job steps and fans live events out to
// the orchestrator's Server-Sent Events streams.
//
// # Storage
//
// A [Store] keeps each step's log in its own file under a root directory
// (the orchestrator passes $KICI_DATA_DIR/logs):
//
//	<root>/<run_id>/<job_id>/step-<index>.log   (index -1: step-setup.log)
//
// Each file holds one JSON object per line ([StoredLine]):
//
//	{"seq":4,"ts":"2026-05-01T12:00:00.123456789Z","text":"go test ./..."}
//
// where seq is the seq of the log.chunk message that carried the line (see
// docs/protocol.md), and "attempt" is added when the line belongs to a
// dispatch attempt after the first.
//
// [Store.Append] writes one chunk. It is idempotent per job: a chunk whose
// (attempt, seq) is not above the last one stored for its job, across all
// the job's steps, is a replay and is skipped. The last position of each
// job is kept in memory and, after a restart, recovered from the tails of
// the job's files the first time the job is appended to. A chunk is written
// with one write call; a write or sync that fails is undone by truncating
// the file back to its previous size, so a file never holds half a record. A file is therefore a sequence of whole
// lines, and a byte offset at a line start is a stable cursor:
// [Store.Read] returns the whole lines after a cursor and the cursor to read
// from next.
//
// # Shared logs
//
// A Store built with [Config.DB] (the orchestrator does so for the
// coordinators of a cluster) keeps the same records in the database
// instead: one row per stored chunk, holding exactly the bytes the file
// would get, at the byte offsets they would have, so cursors, Read and
// the replay rule are unchanged. A chunk's row and its job's position are
// written in one transaction, with the position row locked, so two
// coordinators appending for one job (an agent that moved mid-flight)
// store each chunk once. Every coordinator reads every log, and a log
// outlives the coordinator that received it. [Store.OnLog] hands each
// stored chunk's event to the orchestrator, which tells the other
// coordinators where the chunk lies; they publish it to their own
// subscribers with [Store.PublishStored].
//
// # Durability
//
// The promise: when Append returns true, the chunk survives a crash of the
// process or of the machine. Its bytes are on stable storage (fdatasync of
// the file: the data and the size, not the timestamps), and so is every
// directory entry on the way to the file. The orchestrator acknowledges a
// chunk to the agent (job.ack_seq) only after Append returned, so a chunk
// the agent was told to forget is on disk; one not acknowledged is replayed
// by the agent and skipped if it was stored after all.
//
// The syncs it costs: one fdatasync per chunk; one directory sync per new
// step file (its job directory); one per job (the run directory, for the
// job directory's entry), the first time this process writes to the job;
// and one per run (the root, for the run directory's entry), the first time
// this process writes to the run. All come after the write, so a journaling
// file system commits them together. [Store.Prepare] does the job's and the
// run's directory syncs ahead of the first chunk.
//
// One Store must own its root directory: two stores (or two processes)
// appending under the same root would each believe their own last seq.
//
// # Live events
//
// [Store.Subscribe] and [Store.Publish] are an in-process publish/subscribe
// of a run's [Event]s: the lines Append stores (Append publishes them
// itself), and status changes the tracker publishes. Publish never blocks:
// each subscriber has a bounded buffer, and a subscriber that falls behind
// is dropped, its channel ending with an [EventLagged] event, after which
// the SSE handler tells its client to reload from its last cursor.
//
// # Use
//
// The orchestrator builds one Store in main and hands it to the packages
// that write logs (agentws through the tracker) and read them (api). All
// methods of a Store are safe for concurrent use. The package imports the
// standard library, internal/protocol (a [Line] is a protocol.LogLine) and
// internal/store (the rows of shared logs).
package logs
