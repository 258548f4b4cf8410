// Package runstate is the one state machine of runs, jobs and steps. Every
// status write in the orchestrator asks it which current statuses may move
// to the new one and passes that set to the store's guarded update, so an
// illegal transition (success → running, say) never reaches the database,
// whoever attempts it.
//
// It holds tables only and is safe for concurrent use.
package runstate

import "github.com/kici-dev/kici/internal/store"

// Job transitions:
//
//	            ┌──────────── skipped (needs unmet, if false)
//	            │
//	waiting ────┼──► queued ──► dispatched ──► running ──► success
//	            │      ▲            │  │          │   └───► failure
//	            │      └────────────┘  │          └───────► cancelled
//	            │   (ack timeout,      └──► success|failure|cancelled
//	            │    reject, lost before ack)    (agent ended it before
//	            │                                 reporting running)
//	            └──► cancelled
//	queued ──► failure (queue timeout, dispatch attempts exhausted)
//	queued ──► cancelled
//	queued | dispatched | running ──► queued (retry: an attempt ended with
//	        a cause the job's retry: names; the next attempt waits in the queue)
//
// A terminal status (success, failure, cancelled, skipped) never changes.
// A retry takes the place of the failure that would have ended the job,
// so the job is never terminal between two attempts (see RetryFrom).
var jobFrom = map[store.JobStatus][]store.JobStatus{
	store.JobQueued:     {store.JobWaiting, store.JobDispatched},
	store.JobDispatched: {store.JobQueued},
	store.JobRunning:    {store.JobDispatched},
	store.JobSuccess:    {store.JobDispatched, store.JobRunning},
	store.JobFailure:    {store.JobQueued, store.JobDispatched, store.JobRunning, store.JobWaiting},
	store.JobCancelled:  {store.JobWaiting, store.JobQueued, store.JobDispatched, store.JobRunning},
	store.JobSkipped:    {store.JobWaiting, store.JobQueued},
}

// JobFrom returns the statuses a job may be in to move to to.
func JobFrom(to store.JobStatus) []store.JobStatus { return jobFrom[to] }

// retryFrom are the statuses an attempt of a job may end in and be
// retried: every one from which the job could fail.
var retryFrom = []store.JobStatus{store.JobQueued, store.JobDispatched, store.JobRunning}

// RetryFrom returns the statuses a job may be in to go back to the queue
// for another attempt (store.Tx.RetryJob).
func RetryFrom() []store.JobStatus { return retryFrom }

// JobTerminal reports whether a job status is final.
func JobTerminal(s store.JobStatus) bool {
	switch s {
	case store.JobSuccess, store.JobFailure, store.JobCancelled, store.JobSkipped:
		return true
	}
	return false
}

// Run transitions:
//
//	awaiting_approval ──► pending ──► running ──► success | failure | cancelled
//	        │                └──────────────────► success | failure | cancelled
//	        └──► running (approved, a job already running: never today)
//	        └──► cancelled
//
// (a run whose jobs are all skipped, or that is cancelled or fails before
// any job runs, ends straight from pending). A run awaiting approval (a
// pull request from a fork) is approved to pending, or cancelled; it
// cannot succeed or fail, since none of its jobs may run.
var runFrom = map[store.RunStatus][]store.RunStatus{
	store.RunPending:   {store.RunAwaitingApproval},
	store.RunRunning:   {store.RunAwaitingApproval, store.RunPending},
	store.RunSuccess:   {store.RunPending, store.RunRunning},
	store.RunFailure:   {store.RunPending, store.RunRunning},
	store.RunCancelled: {store.RunAwaitingApproval, store.RunPending, store.RunRunning},
}

// RunFrom returns the statuses a run may be in to move to to.
func RunFrom(to store.RunStatus) []store.RunStatus { return runFrom[to] }

// RunTerminal reports whether a run status is final.
func RunTerminal(s store.RunStatus) bool {
	switch s {
	case store.RunSuccess, store.RunFailure, store.RunCancelled:
		return true
	}
	return false
}

// Step transitions:
//
//	pending ──► running ──► success | failure | cancelled
//	   └──────► skipped | cancelled | success | failure
var stepFrom = map[store.StepStatus][]store.StepStatus{
	store.StepRunning:   {store.StepPending},
	store.StepSuccess:   {store.StepPending, store.StepRunning},
	store.StepFailure:   {store.StepPending, store.StepRunning},
	store.StepCancelled: {store.StepPending, store.StepRunning},
	store.StepSkipped:   {store.StepPending},
}

// StepFrom returns the statuses a step may be in to move to to.
func StepFrom(to store.StepStatus) []store.StepStatus { return stepFrom[to] }

// StepTerminal reports whether a step status is final.
func StepTerminal(s store.StepStatus) bool {
	switch s {
	case store.StepSuccess, store.StepFailure, store.StepCancelled, store.StepSkipped:
		return true
	}
	return false
}
