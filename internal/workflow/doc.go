// Package workflow reads kici workflow files (.kici/workflows/*.yml), checks
// them, and compiles them into the versioned JSON plan that the orchestrator
// schedules and that `kici compile` prints.
//
// The package is pure: it never touches the network or a database, so the
// `kici` CLI and the orchestrator share it and an author's `kici validate`
// accepts exactly what the orchestrator will run.
//
// Entry points:
//
//   - Compile turns a set of workflow files into a *Plan, or returns an
//     ErrorList holding every problem of every file, each with its file,
//     line and column.
//   - ParseLock reads a committed .kici/kici.lock.json and refuses one of
//     another SchemaVersion.
//   - EvalIf evaluates an `if:` expression; Job.Bind fills a job with the
//     values of one event.
//
// Everything here is safe for concurrent use: compiled plans are plain data
// and the functions keep no state between calls.
package workflow
