package orchestrator

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// ownerOnlyDataDir takes the group and other permission bits off the data
// directory and everything in it that has them (left by an older kici, or
// by git under a loose umask), so that the database, logs and keys are
// readable by their owner only. Symbolic links are neither followed nor
// changed. The work dirs of the agents a bare-metal scaler runs
// (scalers/NAME/agents/ID) are made owner-only, but not walked: what
// their jobs put inside is theirs. It logs what it changed and what it
// could not change; an entry it cannot fix does not stop the start.
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
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(path, perm&^0o077); err != nil {
				fail(err)
			} else {
				fixed++
			}
		}
		if d.IsDir() && agentWorkDir(dir, path) {
			return fs.SkipDir
		}
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

// agentWorkDir reports whether path is a bare-metal scaler's agent work
// dir, dataDir/scalers/NAME/agents/ID.
func agentWorkDir(dataDir, path string) bool {
	rel, err := filepath.Rel(dataDir, path)
	if err != nil {
		return false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	return len(parts) == 4 && parts[0] == "scalers" && parts[2] == "agents"
}
