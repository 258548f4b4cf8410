//go:build !unix

package baremetal

import (
	"os"
	"os/exec"
)

// supported is false: the backend needs process groups and signals.
const supported = false

const canRecover = false

func setProcAttr(*exec.Cmd)                  {}
func terminateGroup(int) error               { return errUnsupported }
func killGroup(int) error                    { return errUnsupported }
func procStat(int) (procInfo, error)         { return procInfo{}, errUnsupported }
func bootID() string                         { return "" }
func waitExited(int) bool                    { return false }
func describeExit(s *os.ProcessState) string { return s.String() }
