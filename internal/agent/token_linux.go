package agent

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HideToken keeps the agent token out of the environment the kernel shows
// in /proc/<pid>/environ, which the agent's steps (same user) can read.
// Changing the environment in-process (os.Unsetenv) does not change that
// view, which is the one execve was given; so when environ holds
// KICI_AGENT_TOKEN, HideToken writes the token into a pipe, and
// re-executes the running binary (/proc/self/exe, with args) without the
// variable, naming the pipe's read end, inherited, in KICI_AGENT_TOKEN_FD;
// FromEnv reads and closes it. The process id stays the same. On success
// it does not return.
//
// It returns nil at once when environ has no KICI_AGENT_TOKEN, and when
// KICI_AGENT_TOKEN_FILE is set too (FromEnv reports that conflict, and the
// agent exits before any step runs), and when /proc is not mounted (then
// there is no /proc/<pid>/environ to read either). Call it first in main.
func HideToken(args, environ []string) error {
	var tok string
	var found, hasFile bool
	var rest []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case "KICI_AGENT_TOKEN":
			tok, found = value, true
			continue
		case "KICI_AGENT_TOKEN_FILE":
			hasFile = hasFile || value != ""
		case envTokenFD:
			continue // a stale one would name nothing
		}
		rest = append(rest, kv)
	}
	if !found || hasFile {
		return nil
	}
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		return nil // no /proc mounted: no one can read the environment there either
	}
	if err := checkToken(tok); err != nil {
		return fmt.Errorf("KICI_AGENT_TOKEN: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("hide agent token: create pipe: %w", err)
	}
	// The token (at most maxTokenBytes) fits the pipe's buffer (64 KiB),
	// so the write completes with no reader yet.
	for b := []byte(tok); len(b) > 0; {
		n, err := unix.Write(p[1], b)
		if err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return fmt.Errorf("hide agent token: write pipe: %w", err)
		}
		b = b[n:]
	}
	unix.Close(p[1])
	if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFD, 0); err != nil { // inherited by the exec
		unix.Close(p[0])
		return fmt.Errorf("hide agent token: %w", err)
	}
	env := append(slices.Clip(rest), envTokenFD+"="+strconv.Itoa(p[0]))
	err := unix.Exec("/proc/self/exe", args, env)
	unix.Close(p[0])
	return fmt.Errorf("hide agent token: re-execute /proc/self/exe: %w", err)
}
