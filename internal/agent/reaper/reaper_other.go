//go:build !linux

package reaper

import (
	"errors"
	"fmt"
	"io"
)

// Start returns a Guard that only marks the steps' processes with scope:
// this system has no /proc to find them by, so no reaper runs.
func Start(scope string, _ io.Writer) (*Guard, error) {
	if !validScope(scope) {
		return nil, fmt.Errorf("start reaper: scope %q: want 32 hex digits (NewScope)", scope)
	}
	return &Guard{scope: scope}, nil
}

// Main returns at once: no reaper runs on this system.
func Main() {}

// Sweep kills nothing on this system and returns 0.
func Sweep(string, map[int]uint64) int { return 0 }

// stat is unused on this system.
type stat struct{ start uint64 }

func readStat(int) (stat, error) { return stat{}, errors.New("no /proc on this system") }
