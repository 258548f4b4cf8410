package vmproc

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// ErrNotConfirmed means Kill did not signal because Probe could not confirm
// that the process the pid file names is the jail's Firecracker. The
// process may still run out of the jail, so its chroot must be kept.
var ErrNotConfirmed = errors.New("firecracker process identity not confirmed")

// ErrStillRunning means the process had not exited when the wait ended
// (ctx, or Kill's grace).
var ErrStillRunning = errors.New("firecracker process still running")

// PIDFileName is the name of the pid file the jailer writes in the jail
// root (the exec file's name plus ".pid").
const PIDFileName = "firecracker.pid"

// comm is what /proc/<pid>/comm holds for a Firecracker process.
const comm = "firecracker"

// recycleSlack is how long after the pid file was written the process may
// have started and still be the one it names. The jailer writes the file
// right before it execs Firecracker; the slack covers a slow host and the
// whole-second precision of the boot time.
const recycleSlack = 60 * time.Second

// userHZ is the unit of the times in /proc/<pid>/stat (sysconf(_SC_CLK_TCK)):
// the kernel exports USER_HZ, which is 100 on every architecture
// Firecracker runs on, whatever the kernel's own HZ.
const userHZ = 100

// PIDFile is the pid file of the jail rooted at jailRoot.
func PIDFile(jailRoot string) string { return filepath.Join(jailRoot, PIDFileName) }

// State is Probe's verdict about a pid file's process.
type State int

const (
	// Unconfirmed: a process with the PID runs, but it could not be
	// confirmed to be the jail's Firecracker (another program, another
	// root, or unreadable). It is the zero State, the safe answer for every
	// consumer: not to be signalled, and not to be deleted from under.
	Unconfirmed State = iota
	// Gone: no process is behind the pid file any more.
	Gone
	// Confirmed: the PID is a process named firecracker, running inside
	// the jail root, started no later than the pid file's mtime + 60 s.
	Confirmed
)

func (s State) String() string {
	switch s {
	case Unconfirmed:
		return "unconfirmed"
	case Gone:
		return "gone"
	case Confirmed:
		return "confirmed"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Identity is what Probe found behind a pid file.
type Identity struct {
	// PID is the pid file's PID; 0 when the file is missing or does not
	// hold a number > 0.
	PID int
	// State is the verdict.
	State State
	// Detail says how Probe decided, for logs and the operator.
	Detail string
	// Started is when the process started (its start time after boot plus
	// the boot time, to the second); zero when unknown.
	Started time.Time
}

// Running reports whether a process may still run out of the jail: true
// for Confirmed and Unconfirmed. A chroot is deleted only when it is false.
func (id Identity) Running() bool { return id.State != Gone }

// errBadPID means a pid file holds no PID > 0.
var errBadPID = errors.New("no pid > 0")

// parsePID parses a pid file's content.
func parsePID(data []byte) (int, error) {
	s := string(bytes.TrimSpace(data))
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%w: %q", errBadPID, truncate(s, 32))
	}
	return pid, nil
}

// procStat is what Probe reads from /proc/<pid>/stat.
type procStat struct {
	// state is field 3: 'R', 'S', 'D', 'Z' (zombie), 'X' (dead), ...
	state byte
	// startTicks is field 22: the start time after boot, in 1/userHZ s.
	startTicks uint64
}

// parseStat parses a /proc/<pid>/stat line. Field 2, comm, is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted after the last ')'.
func parseStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("parse /proc stat: no command name")
	}
	f := bytes.Fields(data[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 20", len(f))
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat: start time: %w", err)
	}
	return procStat{state: f[0][0], startTicks: start}, nil
}

// startedAt is when a process started ticks after the boot at bootTime.
func startedAt(bootTime time.Time, ticks uint64) time.Time {
	return bootTime.Add(time.Duration(ticks) * (time.Second / userHZ))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
