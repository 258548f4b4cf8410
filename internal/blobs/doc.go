// Package blobs keeps the orchestrator's large, immutable files: the
// artifacts jobs upload and the cache entries they save. The database
// holds what a blob is (its run, job, key, size and SHA-256); this package
// holds only the bytes, under a key the caller chooses.
//
// [Store] is the contract, and package blobstest its conformance suite.
// [Dir] keeps blobs as files under a directory of the orchestrator's data
// dir, so it is per node: with several coordinators, one cannot read what
// another stored. Package s3store keeps them in an S3-compatible bucket
// that every coordinator shares (KICI_BLOB_STORE, docs/orchestrator.md).
//
// The orchestrator's artifacts and caches packages import it; the agent
// never does (it talks to the orchestrator over HTTP). Every Store is
// safe for concurrent use.
package blobs
