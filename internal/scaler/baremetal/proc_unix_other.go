//go:build unix && !linux

package baremetal

import "errors"

// canRecover is false: without /proc a PID cannot be told from a reused
// one, so Recover reports every agent gone.
const canRecover = false

var errNoProc = errors.New("no /proc on this system")

func procStat(int) (procInfo, error) { return procInfo{}, errNoProc }

func bootID() string { return "" }

// waitExited reports false: this system has no portable wait that leaves the
// child unreaped, so the watcher reaps with Cmd.Wait (and a signal sent
// right then could, in theory, reach a reused PID).
func waitExited(int) bool { return false }

// killSession does nothing: without /proc the session cannot be listed, so
// only the agent's process group is killed.
func killSession(int) {}
