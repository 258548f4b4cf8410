// Package blobs keeps the orchestrator's large, immutable files: the
// artifacts jobs upload and the cache entries they save. The database
// holds what a blob is (its run, job, key, size and SHA-256); this package
// holds only the bytes, under a key the caller chooses.
//
// [Store] is the contract. [Dir] keeps blobs as files under a directory
// of the orchestrator's data dir; an implementation on an object store
// (S3 and the like) is expected to follow, for a cluster of several
// coordinators: a Dir is per node, so one coordinator cannot read what
// another stored (docs/orchestrator.md names this as a known limit).
//
// The orchestrator's artifacts and caches packages import it; the agent
// never does (it talks to the orchestrator over HTTP). Every Store is
// safe for concurrent use.
package blobs
