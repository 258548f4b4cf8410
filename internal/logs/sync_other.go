//go:build !linux

package logs

import "os"

// fdatasync is fsync where the system has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
