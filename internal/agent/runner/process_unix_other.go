//go:build unix && !linux

package runner

import "os"

// waitExited reports false: this system has no portable wait that leaves
// the process unreaped, so the caller waits with Cmd.Wait and kills the
// group after it.
func waitExited(*os.Process) bool { return false }
