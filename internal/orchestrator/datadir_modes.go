package orchestrator

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// ownerOnlyDataDir takes the group and other permission bits off the data
// directory and everything in it that has them (left by an older kici, or
// by git under a loose umask), so that the database, logs and keys are
// readable by their owner only. Symbolic links are neither followed nor
// changed. It logs what it changed and what it could not change; an
// entry it cannot fix does not stop the start.
func ownerOnlyDataDir(log *slog.Logger, dir string) {
	fixed, failed := 0, 0
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
		failed++
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			fail(err)
			if d != nil && d.IsDir() && path != dir {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			fail(err)
			return nil
		}
		perm := fi.Mode().Perm()
		if perm&0o077 == 0 {
			return nil
		}
		if err := os.Chmod(path, perm&^0o077); err != nil {
			fail(err)
			return nil
		}
		fixed++
		return nil
	})
	if err != nil {
		fail(err)
	}
	if fixed > 0 {
		log.Info("data dir entries made readable by their owner only", "data_dir", dir, "count", fixed)
	}
	if failed > 0 {
		log.Warn("some data dir entries may be readable by others", "data_dir", dir, "count", failed, "first_error", firstErr)
	}
}
