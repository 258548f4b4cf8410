// Package trigger turns provider deliveries into one provider-neutral Event
// and decides which workflows of a compiled plan that event starts.
//
// It has two halves:
//
//   - Normalisers. NormalizeGitHub reads a GitHub webhook delivery body (the
//     X-GitHub-Event header names its kind) and NormalizeGeneric reads the
//     documented generic git push payload. PushEvent, TagEvent,
//     PullRequestEvent, ManualEvent and ScheduleEvent build events for the
//     API, the CLI and the cron scheduler. A delivery that is understood but
//     starts nothing (a ping, a branch deletion, an event kind kici does not
//     act on) yields an *IgnoredError, so callers can answer the provider
//     with success and record why nothing ran.
//   - The matcher. Match and MatchAll compare an Event with the triggers of
//     a workflow.Plan and return one Decision per workflow: whether it
//     matched, which trigger matched, a reason in words, the per-filter
//     Checks that led there, and the resolved inputs of a manual run.
//
// The rules both halves follow, including the mapping of GitHub fields and
// the path-filter rule for unknown changed files, are written down for users
// in docs/events.md; keep that page and this package in step.
//
// The package knows nothing about runs, stores or the network. It is
// imported by the webhook and API handlers (to normalise), by the pipeline
// (to match) and by the `kici preview` command (to do both offline). It
// imports only the workflow package for the plan types.
//
// Every function is safe for concurrent use: the package holds no state, and
// Match and MatchAll only read the plan and the event they are given. An
// Event or a Decision is plain data; share it between goroutines only while
// nobody modifies it.
package trigger
