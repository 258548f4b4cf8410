package baremetal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// errBadStat means a /proc/<pid>/stat line could not be parsed.
var errBadStat = errors.New("bad /proc stat line")

// procInfo is what the backend reads from /proc/<pid>/stat.
type procInfo struct {
	// State is field 3: 'R', 'S', 'D', 'Z' (zombie), ...
	State byte
	// Session is field 6, the session id.
	Session int
	// StartTime is field 22: clock ticks after boot.
	StartTime uint64
}

// parseStat parses a /proc/<pid>/stat line. Field 2, the command name, is
// in parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseStat(data []byte) (procInfo, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("%w: no command name", errBadStat)
	}
	f := bytes.Fields(data[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, fmt.Errorf("%w: %d fields after the command name, want at least 20", errBadStat, len(f))
	}
	sid, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return procInfo{}, fmt.Errorf("%w: session: %w", errBadStat, err)
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("%w: start time: %w", errBadStat, err)
	}
	return procInfo{State: f[0][0], Session: sid, StartTime: start}, nil
}

// sameProcess reports whether the process a record describes still runs
// (ours), and whether it is a zombie that has exited but was not reaped
// yet. A record without a start time, from another boot, or naming this
// very process (a corrupt record) is never ours.
func sameProcess(r record) (ours, zombie bool) {
	if r.StartTime == 0 || r.PID <= 1 || r.PID == os.Getpid() || r.BootID != bootID() {
		return false, false
	}
	info, err := procStat(r.PID)
	if err != nil || info.StartTime != r.StartTime {
		return false, false
	}
	return true, info.State == 'Z'
}
