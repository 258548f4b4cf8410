// Package durable writes files that must survive a crash: the data synced
// before the file is closed, and the directory synced after a rename or a
// create in it.
package durable

import (
	"fmt"
	"os"
)

// WriteFile writes data to a file opened with flag|O_WRONLY (os.O_CREATE
// with O_TRUNC to replace, O_EXCL to refuse an existing file) and perm,
// and syncs it before closing. A failed write leaves what it wrote.
func WriteFile(path string, data []byte, flag int, perm os.FileMode) error {
	f, err := os.OpenFile(path, flag|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Sync fsyncs a file or a directory (a directory so that a rename or a
// create in it survives a crash). The error names the path.
func Sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
