package apply

import "sync"

// doneCache remembers the done markers this process has set or read. A marker states a
// committed fact that never becomes false (a payment's record, a notification's journal row), so
// a repeat found here needs neither Redis nor MySQL, and a stale entry cannot exist. Two
// generations bound the memory: when the current one fills it becomes the previous one, and the
// previous one is forgotten.
type doneCache struct {
	mu        sync.RWMutex
	cur, prev map[string]struct{}
	half      int
}

func newDoneCache(size int) *doneCache {
	half := max(1, size/2)
	return &doneCache{cur: make(map[string]struct{}, half), prev: map[string]struct{}{}, half: half}
}

func (c *doneCache) has(key string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if _, ok := c.cur[key]; ok {
		return true
	}
	_, ok := c.prev[key]
	return ok
}

func (c *doneCache) add(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if len(c.cur) >= c.half {
			c.prev, c.cur = c.cur, make(map[string]struct{}, c.half)
		}
		c.cur[k] = struct{}{}
	}
}
