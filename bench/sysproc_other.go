//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing outside Linux; the deferred stops still run.
func dieWithParent(cmd *exec.Cmd) {}

// raiseNofile is a no-op outside Linux: it reports want as in force.
func raiseNofile(want uint64) (uint64, error) { return want, nil }
