package pipeline

import (
	"container/list"
	"sync"

	"github.com/kici-dev/kici/internal/workflow"
)

// planCacheSize bounds the compiled plans a pipeline keeps.
const planCacheSize = 256

// planKey names what a plan was read from: the source by name, kind and
// location (a source changed to another repository misses), and the
// commit. What a commit holds never changes, so an entry is never stale;
// the pipeline's MaxJobsPerRun, which the plan is checked against, is
// the same for every entry.
type planKey struct {
	source, kind, location, sha string
}

// planResult is what plan returned for a key: a plan (maybe with the
// problems of its invalid files), or an error that reading the same
// commit again would give again. A failed read of the source is never
// kept.
type planResult struct {
	plan    *workflow.Plan
	invalid *WorkflowError
	err     error
}

// planCache is a least-recently-used cache of plans, safe for concurrent
// use. The plans it returns are shared: callers must not modify them
// (selectWorkflows copies, trigger.MatchAll and scheduler.CreateRun only
// read).
type planCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *planEntry, most recently used first
	byKey map[planKey]*list.Element
}

type planEntry struct {
	key planKey
	res planResult
}

func newPlanCache(max int) *planCache {
	return &planCache{max: max, order: list.New(), byKey: map[planKey]*list.Element{}}
}

// get returns the result kept for k.
func (c *planCache) get(k planKey) (planResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return planResult{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*planEntry).res, true
}

// put keeps res for k, dropping the least recently used entry past max.
func (c *planCache) put(k planKey, res planResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		el.Value.(*planEntry).res = res
		c.order.MoveToFront(el)
		return
	}
	c.byKey[k] = c.order.PushFront(&planEntry{key: k, res: res})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*planEntry).key)
	}
}

// len returns the number of entries.
func (c *planCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
