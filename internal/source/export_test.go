package source

import "syscall"

// catOf returns the cat-file process keeper of a local or git source.
func catOf(src Source) *catFile {
	switch s := src.(type) {
	case *Local:
		r, err := s.repo()
		if err != nil {
			return nil
		}
		return r.cat
	case *Git:
		return s.repo().cat
	}
	return nil
}

// CatFilePID returns the pid of src's cat-file process; 0 when none runs.
func CatFilePID(src Source) int {
	c := catOf(src)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil {
		return 0
	}
	select {
	case <-c.p.exited:
		return 0
	default:
	}
	return c.p.cmd.Process.Pid
}

// KillCatFile kills src's cat-file process from outside, as a crash or
// the OOM killer would, and waits for it to exit; false if none ran.
func KillCatFile(src Source) bool {
	c := catOf(src)
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	if p == nil {
		return false
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return true
}

// SetCatFileAfterWrite makes f run in each request of src's cat-file
// process once the request is written, before the answer is read.
func SetCatFileAfterWrite(src Source, f func()) {
	c := catOf(src)
	c.mu.Lock()
	c.afterWrite = f
	c.mu.Unlock()
}
