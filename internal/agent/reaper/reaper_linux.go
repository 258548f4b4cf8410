package reaper

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts the reaper of an agent whose steps carry scope: a copy of
// the running binary (/proc/self/exe) in reaper mode, in a process group of
// its own, writing what it kills to stderr. The binary's main must call
// [Main] first. Close the Guard when the agent stops.
func Start(scope string, stderr io.Writer) (*Guard, error) {
	if !validScope(scope) {
		return nil, fmt.Errorf("start reaper: scope %q: want 32 hex digits (NewScope)", scope)
	}
	r, w, err := os.Pipe() // both ends close-on-exec: no step inherits the write end
	if err != nil {
		return nil, fmt.Errorf("start reaper: create pipe: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"kici-agent-reaper"}
	cmd.Env = []string{envFD + "=3", envScope + "=" + scope}
	cmd.ExtraFiles = []*os.File{r} // fd 3
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start reaper: %w", err)
	}
	g := &Guard{scope: scope, cmd: cmd, done: make(chan struct{}), w: w}
	go func() {
		_ = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// Main runs the reaper and exits, when this process was started by
// [Start]; otherwise it returns at once. kici-agent's main calls it first,
// and so does the TestMain of a test binary that calls Start.
func Main() {
	fd, ok := os.LookupEnv(envFD)
	if !ok {
		return
	}
	os.Exit(run(fd, os.Getenv(envScope), os.Stderr))
}

// run is the reaper: it tracks the agent's process groups until the pipe
// ends, then kills what the agent's steps left.
func run(fdText, scope string, stderr io.Writer) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 || !validScope(scope) {
		fmt.Fprintf(stderr, "kici-agent reaper: bad %s=%q or %s=%q\n", envFD, fdText, envScope, scope)
		return 2
	}
	pipe := os.NewFile(uintptr(fd), "reaper pipe")
	groups := track(pipe)
	pipe.Close()
	if n := Sweep(scope, groups); n > 0 {
		fmt.Fprintf(stderr, "kici-agent reaper: the agent is gone; killed %d processes its steps left\n", n)
	}
	return 0
}

// track reads the agent's lines ("+PGID START" when a group starts, "-PGID"
// when it ends) until the pipe ends, and returns the groups still running
// with the start times of their leaders. A line it cannot parse is ignored;
// a line too long ends the reading, as the end of the pipe would.
func track(r io.Reader) map[int]uint64 {
	groups := map[int]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 128), 128)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "-"); ok {
			if pgid, err := strconv.Atoi(rest); err == nil {
				delete(groups, pgid)
			}
			continue
		}
		pgidText, startText, ok := strings.Cut(strings.TrimPrefix(line, "+"), " ")
		pgid, err1 := strconv.Atoi(pgidText)
		start, err2 := strconv.ParseUint(startText, 10, 64)
		if ok && err1 == nil && err2 == nil && pgid > 1 && len(groups) < maxGroups {
			groups[pgid] = start
		}
	}
	return groups
}

// Sweep kills (SIGKILL) every process but this one whose environment holds
// ScopeVar=scope, and every process of a group in groups (pgid → start time
// of its leader, in clock ticks since boot) that is in this process's
// session and started no earlier than the leader. It scans /proc until a
// scan finds nothing new (at least three times, 10 ms apart, since a
// process may fork while it is being killed), and returns how many
// processes it killed.
func Sweep(scope string, groups map[int]uint64) int {
	self := os.Getpid()
	sid, _ := unix.Getsid(0)
	mark := []byte(ScopeVar + "=" + scope)
	type key struct {
		pid   int
		start uint64
	}
	killed := map[key]bool{}
	for round := 0; round < 100; round++ {
		found := 0
		for _, pid := range pids() {
			if pid == self || pid == 1 {
				continue
			}
			st, err := readStat(pid)
			if err != nil || st.state == 'Z' || st.state == 'X' || killed[key{pid, st.start}] {
				continue
			}
			leader, inGroup := groups[st.pgrp]
			if !(inGroup && st.session == sid && st.start >= leader) && !hasEnv(pid, mark) {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed[key{pid, st.start}] = true
				found++
			}
		}
		if found == 0 && round >= 2 {
			break
		}
		if found == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(killed)
}

// pids lists the processes in /proc.
func pids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// stat is what the reaper needs of /proc/<pid>/stat.
type stat struct {
	state         byte
	pgrp, session int
	start         uint64 // clock ticks after boot
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything;
	// the fields after the last ')' start with field 3, the state.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, errors.New("malformed stat")
	}
	pgrp, err1 := strconv.Atoi(f[2])                // field 5
	session, err2 := strconv.Atoi(f[3])             // field 6
	start, err3 := strconv.ParseUint(f[19], 10, 64) // field 22
	if err := errors.Join(err1, err2, err3); err != nil {
		return stat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return stat{state: f[0][0], pgrp: pgrp, session: session, start: start}, nil
}

// hasEnv reports whether the environment pid started with holds the entry
// mark. A process this one may not read (another user's) has none.
func hasEnv(pid int, mark []byte) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for entry := range bytes.SplitSeq(data, []byte{0}) {
		if bytes.Equal(entry, mark) {
			return true
		}
	}
	return false
}
