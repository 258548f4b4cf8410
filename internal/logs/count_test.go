package logs_test

import (
	"sync"
	"sync/atomic"

	"github.com/kici-dev/kici/internal/logs"
)

// syncCounts counts a store's syncs, and which directories were synced.
type syncCounts struct {
	files, dirs atomic.Int64

	mu      sync.Mutex
	dirSeen map[string]int
}

// countSyncs makes st count its syncs.
func countSyncs(st *logs.Store) *syncCounts {
	c := &syncCounts{dirSeen: map[string]int{}}
	st.SetSyncHooks(func(string) error {
		c.files.Add(1)
		return nil
	}, func(d string) error {
		c.dirs.Add(1)
		c.mu.Lock()
		c.dirSeen[d]++
		c.mu.Unlock()
		return nil
	})
	return c
}

// dirSyncs returns how many times each directory was synced.
func (c *syncCounts) dirSyncs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.dirSeen))
	for k, v := range c.dirSeen {
		out[k] = v
	}
	return out
}
