// Package bundle writes, lists and extracts bundles: the tar.gz archives
// that carry a job's artifacts and cache entries between agents and the
// orchestrator. A bundle holds directories, regular files and, where the
// caller allows them, symbolic links that stay inside the tree they were
// found in; never device nodes, FIFOs, hard links or absolute or ".."
// names.
//
// The agent's runner writes bundles (Writer) and extracts them (Extract);
// the orchestrator lists and checks the artifact bundles it receives
// (List); kici-admin extracts downloaded ones. Every function is bounded
// by a Limits value. Nothing here keeps state: the functions may be
// called concurrently, and a Writer belongs to one goroutine.
package bundle
