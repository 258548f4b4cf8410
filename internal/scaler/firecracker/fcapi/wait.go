package fcapi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// WaitReady polls the API on socketPath every poll (100 ms when poll is not
// positive) until GET / answers, and returns nil then. It returns an error
// naming the last failure when ctx ends first; the caller bounds the wait
// with ctx, and should also stop waiting when the jailer or VMM it started
// exits with an error.
func WaitReady(ctx context.Context, socketPath string, poll time.Duration) error {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	c := New(socketPath)
	defer c.Close()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, max(poll, time.Second))
		err := c.Ping(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the firecracker api on %q: %w", socketPath, errors.Join(context.Cause(ctx), err))
		case <-ticker.C:
		}
	}
}
