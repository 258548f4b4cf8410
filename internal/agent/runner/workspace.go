package runner

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// maxSpareDirs bounds the emptied job directories a Runner keeps for the
// next jobs.
const maxSpareDirs = 8

// spares are emptied job directories (their src, scripts and tmp kept,
// empty), named "spare-…" under WorkDir, for makeDirs to rename into the
// next job's instead of creating four directories. On a busy agent host
// creating a directory is not free: the file system allocates an inode,
// and with thousands created and removed each minute its allocator shows
// in the agent's profile.
type spares struct {
	mu   sync.Mutex
	dirs []string
	seq  atomic.Uint64 // names renamed directories uniquely in this process
}

func (s *spares) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirs) == 0 {
		return ""
	}
	d := s.dirs[len(s.dirs)-1]
	s.dirs = s.dirs[:len(s.dirs)-1]
	return d
}

// put keeps dir unless the pool is full; it reports whether it did.
func (s *spares) put(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirs) >= maxSpareDirs {
		return false
	}
	s.dirs = append(s.dirs, dir)
	return true
}

func (s *spares) name(workDir, prefix string) string {
	return filepath.Join(workDir, fmt.Sprintf("%s-r%d", prefix, s.seq.Add(1)))
}

// jobDirsAt names the parts of a job directory rooted at root.
func jobDirsAt(root string) jobDirs {
	return jobDirs{
		root:    root,
		src:     filepath.Join(root, "src"),
		scripts: filepath.Join(root, "scripts"),
		tmp:     filepath.Join(root, "tmp"),
	}
}

// makeDirs gives a job a fresh, empty directory under WorkDir, named after
// its id: a spare one renamed, or a new one. On an error after the job's
// root was made, the root is returned too, for removal.
func (r *Runner) makeDirs(id string) (jobDirs, error) {
	prefix := "job-" + safeName(id)
	for {
		spare := r.spares.take()
		if spare == "" {
			break
		}
		root := r.spares.name(r.cfg.WorkDir, prefix)
		if err := os.Rename(spare, root); err == nil {
			return jobDirsAt(root), nil
		}
		_ = os.RemoveAll(spare) // gone or unusable: make a new one
	}
	root, err := os.MkdirTemp(r.cfg.WorkDir, prefix+"-")
	if err != nil {
		return jobDirs{}, err
	}
	d := jobDirsAt(root)
	for _, dir := range []string{d.src, d.scripts, d.tmp} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return jobDirs{root: root}, err
		}
	}
	return d, nil
}

// recycle empties an ended job's directory and keeps it as a spare, or
// removes it when it cannot be kept: the pool is full, or the job left it
// in a shape other than the one makeDirs made (a part that is no longer a
// directory of mode 0700, a symbolic link, something beside the three
// parts), or emptying it failed. A job runs as the agent's user and could
// have changed anything in it; only a directory back to exactly what a
// new one would be is given to another job.
func (r *Runner) recycle(log *slog.Logger, root string) {
	d := jobDirsAt(root)
	if !r.reusable(d) {
		r.removeDirs(log, root)
		return
	}
	spare := r.spares.name(r.cfg.WorkDir, "spare")
	if err := os.Rename(root, spare); err != nil {
		r.removeDirs(log, root)
		return
	}
	if !r.spares.put(spare) {
		r.removeDirs(log, spare)
	}
}

// reusable empties d's parts and reports whether d is now what makeDirs
// makes.
func (r *Runner) reusable(d jobDirs) bool {
	entries, err := os.ReadDir(d.root)
	if err != nil || len(entries) != 3 {
		return false
	}
	for _, e := range entries {
		if !slices.Contains([]string{"src", "scripts", "tmp"}, e.Name()) {
			return false
		}
	}
	for _, dir := range []string{d.root, d.src, d.scripts, d.tmp} {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode()&os.ModeType != os.ModeDir || fi.Mode().Perm() != 0o700 {
			return false
		}
	}
	for _, dir := range []string{d.src, d.scripts, d.tmp} {
		children, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, c := range children {
			if os.RemoveAll(filepath.Join(dir, c.Name())) != nil {
				return false // removeDirs makes read-only trees writable first
			}
		}
	}
	return true
}

// RemoveSpares removes the emptied job directories kept for later jobs;
// call it once no job runs, before the process exits, so that a stopped
// agent leaves nothing in WorkDir. Jobs that end later keep theirs again.
func (r *Runner) RemoveSpares() {
	for {
		d := r.spares.take()
		if d == "" {
			return
		}
		r.removeDirs(r.log, d)
	}
}
