package logs

import (
	"os"

	"github.com/kici-dev/kici/internal/durable"
)

// SetWrite replaces the function that writes a chunk's buffer to its file,
// to simulate a failing disk. Call it only while no Append runs.
func (s *Store) SetWrite(fn func(f *os.File, b []byte) (int, error)) {
	if fn == nil {
		fn = (*os.File).Write
	}
	s.write = fn
}

// SetSyncHooks wraps the store's syncs: file is called before each sync of
// a log file's data (with its path) and dir before each sync of a
// directory; a non-nil error they return is returned instead of syncing.
// Call it only while no Append runs.
func (s *Store) SetSyncHooks(file func(path string) error, dir func(path string) error) {
	s.syncFile = func(f *os.File) error {
		if err := file(f.Name()); err != nil {
			return err
		}
		return fdatasync(f)
	}
	s.syncDir = func(d string) error {
		if err := dir(d); err != nil {
			return err
		}
		return durable.Sync(d)
	}
}
