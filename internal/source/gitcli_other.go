//go:build !unix

package source

import "os/exec"

// setProcessGroup is a no-op where process groups are not available;
// exec.CommandContext kills git itself.
func setProcessGroup(*exec.Cmd) {}

// killGroup is a no-op where process groups are not available.
func killGroup(*exec.Cmd) {}
