package logs

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and the metadata needed to read it back
// (its size), to stable storage, skipping the timestamps fsync would also
// write.
func fdatasync(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
