// Package store is kici's database: the embedded SQLite file (the default,
// $KICI_DATA_DIR/kici.db) or a PostgreSQL server (KICI_DATABASE_URL), behind
// one set of queries, migrations and transactions. It holds sources, runs
// with their jobs, steps and needs edges, the concurrency groups of runs
// and jobs (concurrency.go), the dispatch queue, the webhook
// delivery log and dedup records, agent and admin tokens (hashes only),
// secrets (sealed by the secrets package; the store never sees a value)
// with their key check, the audit log, and the manifests of jobs'
// artifacts and cache entries (their bytes are blobs, internal/blobs).
//
// The orchestrator's domain packages (queue, tracker, scheduler, pipeline,
// auth) and cmd/kici-orchestrator import it; the agent, the dashboard and
// the wire protocol never do. It imports workflow only, for the compiled
// job and workflow it stores as JSON.
//
// # What the store decides, and what it does not
//
// The store has no business rules. Statuses are the contract's
// vocabularies (RunStatus, JobStatus, StepStatus), enforced by CHECK
// constraints, but which transitions are legal is the caller's state
// machine's business: each status update names the from-states it allows
// and applies only if the row is in one of them, checked and written in one
// statement ("guarded update"), and reports whether it changed the row.
// ApplyJobMessage is the same idea for agent message sequence numbers:
// called in the same transaction as the writes a message causes, it makes
// the message apply exactly once. ClaimForAgent takes a queue row in one
// statement, so two claimers never get the same row.
//
// # Concurrency
//
// A *DB is safe for concurrent use by many goroutines. A *Tx belongs to the
// function given to DB.Tx, runs on that function's goroutine, and must not
// be kept after it returns. Both have the same query methods, so a consumer
// declares the narrow interface it needs (say, UpdateJobStatus and
// ApplyJobMessage) and accepts either.
//
// On SQLite there is exactly one write connection, in WAL mode, and a pool
// of read-only connections: writes from all goroutines queue for the writer
// inside database/sql and never fail with "database is locked", and reads
// never wait for writes. Hence, inside DB.Tx, use the tx, never the db: the
// transaction holds the only writer. On PostgreSQL one pool serves both,
// claims lock the row they take (FOR UPDATE SKIP LOCKED), and DB.Tx retries
// serialization failures and deadlocks a bounded number of times.
//
// # Two dialects, one set of queries
//
// Every query is written once, in SQL both engines accept, with "?"
// placeholders; for PostgreSQL they are rewritten to $1, $2, … before the
// call. The few fragments that cannot be portable (expanding a JSON array,
// row locking) are methods of the dialect type, in one file. Column types
// are chosen to read back identically on both engines: IDs are text
// (UUIDs made in Go, see NewID), timestamps are UTC with microsecond
// precision (TIMESTAMP text in SQLite, TIMESTAMPTZ in PostgreSQL), JSON is
// TEXT in SQLite and JSONB in PostgreSQL, absent values are NULL. Driver
// errors are mapped to ErrNotFound and ErrConflict in one place.
//
// # Prepared statements
//
// The queries run for every agent message and dispatch are parsed once per
// connection, not at each call. On SQLite the store keeps a bounded cache
// of prepared statements per pool (stmtCache, keyed by query text, placeholders
// rewritten once), used inside transactions through the copy prepared on
// the transaction's connection; a query whose text varies with its input
// (an IN list of IDs, a multi-row INSERT) runs unprepared. On PostgreSQL
// pgx itself prepares and caches each query per connection
// (default_query_exec_mode=cache_statement, statement_cache_capacity=512;
// the URL may change either), so the store adds no layer. Either way a
// statement lives with its connection: one the server ended is prepared
// again on the next, and DB.Close closes them all.
//
// # Migrations
//
// The schema is migrations/<dialect>/NNNNN_<what>.sql, embedded in the
// binary and applied by goose. Each file makes one change and has an Up and
// a Down section; both dialects have the same file names, so a version
// means the same change on both engines (a test checks this, and another
// migrates an empty database to head on both). A migration that has been
// released is never edited: change the schema with a new file. Open never
// migrates; the server calls Migrate at start, `kici-orchestrator migrate`
// calls it alone, and /readyz reports MigrationStatus.
package store
