//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing outside Linux; the deferred stops still run.
func dieWithParent(cmd *exec.Cmd) {}
