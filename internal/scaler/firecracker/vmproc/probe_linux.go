package vmproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxPIDFileBytes bounds the read of a pid file: a PID is a few digits.
const maxPIDFileBytes = 64

// Probe reports what runs behind the pid file pidFile of the jail rooted
// at jailRoot (see the package doc for the decision order). It only reads
// the pid file and /proc, never signals, and does not block on anything
// but those reads.
func Probe(pidFile, jailRoot string) Identity {
	pid, written, err := readPIDFile(pidFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Identity{State: Gone, Detail: "no pid file"}
	case errors.Is(err, errBadPID):
		return Identity{State: Gone, Detail: "pid file holds " + err.Error()}
	case err != nil:
		return Identity{State: Unconfirmed, Detail: "pid file unreadable: " + err.Error()}
	}
	return probePID(pid, written, jailRoot)
}

// readPIDFile returns the PID in a pid file and when the file was written.
func readPIDFile(path string) (int, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPIDFileBytes))
	if err != nil {
		return 0, time.Time{}, err
	}
	pid, err := parsePID(data)
	return pid, fi.ModTime(), err
}

func probePID(pid int, written time.Time, jailRoot string) Identity {
	id := Identity{PID: pid}
	proc := "/proc/" + strconv.Itoa(pid)
	verdict := func(s State, format string, args ...any) Identity {
		id.State, id.Detail = s, fmt.Sprintf(format, args...)
		return id
	}
	// unreadable tells a process that exited from one whose /proc entry
	// could not be read.
	unreadable := func(what string, err error) Identity {
		if exited(err) || !procExists(proc) {
			return verdict(Gone, "pid %d has exited", pid)
		}
		return verdict(Unconfirmed, "pid %d runs, but its %s is unreadable: %v", pid, what, err)
	}

	data, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return unreadable("stat", err)
	}
	st, err := parseStat(data)
	if err != nil {
		return verdict(Unconfirmed, "pid %d runs, but %v", pid, err)
	}
	if st.state == 'Z' || st.state == 'X' {
		return verdict(Gone, "pid %d has exited (not reaped yet)", pid)
	}
	if boot, err := bootTime(); err == nil {
		id.Started = startedAt(boot, st.startTicks)
		if id.Started.After(written.Add(recycleSlack)) {
			return verdict(Gone, "pid %d was recycled: its process started at %s, more than %s after the pid file was written at %s",
				pid, id.Started.UTC().Format(time.RFC3339), recycleSlack, written.UTC().Format(time.RFC3339))
		}
	}

	name, err := os.ReadFile(proc + "/comm")
	if err != nil {
		return unreadable("comm", err)
	}
	if got := strings.TrimSuffix(string(name), "\n"); got != comm {
		return verdict(Unconfirmed, "pid %d is %q, not %q", pid, got, comm)
	}

	var root, jail unix.Stat_t
	if err := unix.Stat(proc+"/root", &root); err != nil {
		return unreadable("root", err)
	}
	if err := unix.Stat(jailRoot, &jail); err != nil {
		return verdict(Unconfirmed, "pid %d is firecracker, but the jail root is unreadable: %v", pid, err)
	}
	if root.Dev != jail.Dev || root.Ino != jail.Ino {
		return verdict(Unconfirmed, "pid %d is firecracker, but its root (device %d inode %d) is not the jail root %q (device %d inode %d)",
			pid, root.Dev, root.Ino, jailRoot, jail.Dev, jail.Ino)
	}
	return verdict(Confirmed, "pid %d is firecracker in the jail", pid)
}

// exited reports whether a read of /proc/<pid>/... failed because the
// process is gone.
func exited(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// procExists reports whether /proc still has an entry for proc.
func procExists(proc string) bool {
	_, err := os.Lstat(proc)
	return !exited(err)
}

// bootTime is when the host booted, per the btime line of /proc/stat (to
// the second). It is read on each call, since the kernel recomputes it
// when the wall clock is set.
func bootTime() (time.Time, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("btime ")); ok {
			sec, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("parse btime in /proc/stat: %w", err)
			}
			return time.Unix(sec, 0), nil
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}
