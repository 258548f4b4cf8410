// Package checks reports kici's runs to GitHub as check runs: one check
// run per workflow run of a source tied to a GitHub repository (a github
// source, or a local or git source with a GitHub repository set), created
// when the run is created, moved to in_progress when its first job runs
// and completed with the run's conclusion (success, failure, cancelled, or
// action_required while the run awaits approval).
//
// Reports go through a durable queue, the store's check_reports table,
// so that reporting never blocks or fails a run: a run's state change
// only wakes the [Reporter] ([Reporter.Notify]), which writes the row's
// desired state and then, in its own goroutine, talks to GitHub. A failed
// report is retried with back-off, honouring GitHub's Retry-After and
// X-RateLimit-Reset; one that keeps failing is given up on (the row keeps
// its last error). Reports are idempotent across restarts: GitHub's check
// run id is stored in the statement that records the creation, and before
// creating a check run the reporter looks for one already carrying the
// run's id as its external_id, in case an earlier creation's answer was
// lost.
//
// One orchestrator reports for one database (the orchestrator's
// single-instance claim sees to that); two reporters on one database
// could create a run's check run twice.
//
// The GitHub API is reached with google/go-github, authenticated by a
// token or as a GitHub App (see [Config]). Only the orchestrator imports
// this package. A Reporter is safe for concurrent use.
package checks
