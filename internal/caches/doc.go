// Package caches keeps the cache entries jobs save: bundles of
// dependency and build trees, restored before a later job's steps. It
// decides which entries a run may read and write (scopes), finds the
// entry a job asks for, stores new ones as blobs (internal/blobs), and
// evicts the least recently used beyond a total size.
//
// # Scopes
//
// Every entry belongs to a source and a scope: the branch, tag or pull
// request of the run that saved it. A run writes its own scope only, and
// reads its own scope, then its fallbacks: a pull request's base branch,
// then the default branch. So a pull request (from a fork too) can use
// what its base branch built, but never writes there, and nothing one
// branch saves reaches another branch but the default one's readers.
//
// # Lookup order
//
// An exact key is looked for in each scope the run reads, in order; then
// each restore key, in the order given, as a prefix of the keys of each
// scope, in order. In each place the newest entry wins. An entry matches
// only with the same version (a digest of the cache's declared paths).
//
// The API (internal/api) calls it. A *Service is safe for concurrent use.
package caches
