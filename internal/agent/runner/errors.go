package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Cancel causes. The caller of [Runner.Start] cancels the job's context with
// one of them (context.WithCancelCause), wrapped with detail if it likes, so
// that the job's [Result] and its steps say why the job stopped.
var (
	// ErrCancelled means a user (or the orchestrator on a user's behalf)
	// cancelled the job. The job and its running step end "cancelled". A
	// context cancelled without a cause counts as ErrCancelled.
	ErrCancelled = errors.New("cancelled")
	// ErrShutdown means the agent is stopping and cancelled the job. The job
	// and its running step end "cancelled".
	ErrShutdown = errors.New("agent shutting down")
	// ErrTimeout is matched (errors.Is) by every [*TimeoutError].
	ErrTimeout = errors.New("timed out")
)

// ErrInfrastructure is matched (errors.Is) by the Err of a job that failed
// before its first step for a reason outside the workflow's steps: its code
// could not be fetched, no Docker engine was reachable for its image or
// services, or an image could not be pulled or was not on the engine. Such
// a job may well succeed on another agent or a moment later; the message
// is unchanged by the match.
var ErrInfrastructure = errors.New("infrastructure failure")

// infrastructure marks err as an infrastructure failure (see
// [ErrInfrastructure]); nil stays nil.
func infrastructure(err error) error {
	if err == nil {
		return nil
	}
	return &infraError{err: err}
}

type infraError struct{ err error }

func (e *infraError) Error() string        { return e.err.Error() }
func (e *infraError) Unwrap() error        { return e.err }
func (e *infraError) Is(target error) bool { return target == ErrInfrastructure }

// TimeoutError is the cancel cause of a step or job that ran out of time.
// It turns the step, and the job, into "failure" rather than "cancelled".
type TimeoutError struct {
	// Scope is "step" or "job".
	Scope string
	// After is the timeout that expired.
	After time.Duration
}

// Error says what timed out and after how long, e.g. "step timed out after
// 2m0s".
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s timed out after %s", e.Scope, e.After)
}

// Is makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Forced wraps a cancel cause so that the running step's process group is
// killed at once (SIGKILL), without SIGTERM and grace period. The wrapped
// cause's message and errors.Is identity are unchanged.
func Forced(cause error) error { return &forcedError{err: cause} }

type forcedError struct{ err error }

func (e *forcedError) Error() string { return e.err.Error() }
func (e *forcedError) Unwrap() error { return e.err }

// isForced reports whether a cancel cause was wrapped with Forced.
func isForced(cause error) bool {
	var f *forcedError
	return errors.As(cause, &f)
}

// causeOf returns why ctx ended, turning a bare context.Canceled into
// ErrCancelled.
func causeOf(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil || cause == context.Canceled { //nolint:errorlint // only the bare sentinel, not a cause that wraps it
		return ErrCancelled
	}
	return cause
}

// statusOf maps a cancel cause to the status it gives a step or a job: a
// timeout is a failure, anything else a cancel.
func statusOf(cause error) Status {
	if errors.Is(cause, ErrTimeout) {
		return StatusFailure
	}
	return StatusCancelled
}
