//go:build unix

package orchestrator

import "golang.org/x/sys/unix"

// diskFree returns the bytes available to this process and the total size
// of the file system holding dir.
func diskFree(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}
