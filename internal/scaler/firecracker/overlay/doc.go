// Package overlay keeps one pre-formatted ext4 file per overlay drive size,
// so that a Firecracker spawn gets its writable overlay drive by a sparse
// copy instead of running mkfs.ext4. A per-spawn mkfs fsyncs, and behind a
// disk write-back backlog that can take tens of seconds on the spawn's
// critical path; the copy (`cp --reflink=auto --sparse=always`) copies only
// the allocated blocks and never fsyncs.
//
// # Layout
//
// The templates live in a directory beside the per-VM chroots, so that the
// orchestrator can already create it:
//
//	<chrootBaseDir>/firecracker/.overlay-templates/overlay-<MiB>mib.ext4
//
// The leading dot keeps it out of every chroot scan (the orphan sweep and
// the live-VM listing read every other entry as a VM id); those scans must
// skip dot-entries. The directory, and so every template in it, is shared
// by every scaler (and every orchestrator process) that uses the same
// chroot base dir.
//
// A file is a template for a size only if it is a regular file of exactly
// that many MiB whose ext4 superblock magic (0xEF53, little-endian, at
// offset 1024+0x38) is in place; anything else at that path (a wrong size,
// a truncated or zeroed file, a directory) is rebuilt. A build formats a
// temp file `<template>.tmp-<pid>-<8 hex>` and renames it into place, so
// readers never see a half-formatted template, and two processes that build
// the same size at once both end with a complete file. A temp file is never
// read as a template; one that a killed builder left behind is removed by a
// later build of its size once it has not been written to for
// max(1 h, 2 × Config.MkfsTimeout).
//
// # Use
//
// The Firecracker backend builds one *Templates per chroot base dir, calls
// Prebuild for its configured sizes in the background when it starts, and
// Copy for each spawn. A missing mkfs.ext4 or cp is a *MissingToolError,
// which the backend reports as a deterministic spawn failure.
//
// A *Templates is safe for concurrent use. Within one *Templates, concurrent
// first users of a size share one build; two *Templates on the same
// directory are safe too, but may each format the same size once.
package overlay
