//go:build !linux

package vmproc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Probe says Unconfirmed: without Linux's /proc, nothing can be known.
func Probe(pidFile, jailRoot string) Identity {
	return Identity{State: Unconfirmed, Detail: "process identity needs Linux /proc"}
}

// Kill signals nothing without Linux's pidfds.
func Kill(ctx context.Context, pidFile, jailRoot string, grace time.Duration) (Identity, error) {
	return Probe(pidFile, jailRoot), fmt.Errorf("kill firecracker: %w", errors.ErrUnsupported)
}

// WaitGone cannot wait without Linux's pidfds.
func WaitGone(ctx context.Context, pidFile, jailRoot string) error {
	return fmt.Errorf("wait for firecracker to exit: %w", errors.ErrUnsupported)
}
