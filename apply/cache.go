package apply

import (
	"sync"
	"time"
)

// doneCache remembers the done markers this process has set or read, each under the namespace
// (the database's instance and epoch) it was true for. A marker states a committed fact, so a
// repeat found here needs neither Redis nor MySQL; but a database can go back in time, so the
// cache forgets: two generations bound both memory and age. The current one becomes the previous
// one when it fills or grows older than genAge, and the previous one is forgotten; reset (a new
// epoch) forgets everything at once.
type doneCache struct {
	mu        sync.RWMutex
	cur, prev map[string]struct{}
	half      int
	born      time.Time // when cur was started
	genAge    time.Duration
	now       func() time.Time
}

// doneCacheAge bounds a generation's life: an entry is forgotten at most three times this after
// it was added.
const doneCacheAge = 2 * time.Minute

func newDoneCache(size int, genAge time.Duration, now func() time.Time) *doneCache {
	half := max(1, size/2)
	return &doneCache{cur: make(map[string]struct{}, half), prev: map[string]struct{}{}, half: half,
		born: now(), genAge: genAge, now: now}
}

func (c *doneCache) has(ns, key string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.now().Sub(c.born) >= 2*c.genAge {
		return false // both generations are past their age; add rotates them out
	}
	if _, ok := c.cur[ns+key]; ok {
		return true
	}
	if c.now().Sub(c.born) >= c.genAge {
		return false // prev is past its age
	}
	_, ok := c.prev[ns+key]
	return ok
}

func (c *doneCache) add(ns string, keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if age := c.now().Sub(c.born); len(c.cur) >= c.half || age >= c.genAge {
			c.prev, c.cur = c.cur, make(map[string]struct{}, c.half)
			if age >= 2*c.genAge {
				c.prev = map[string]struct{}{} // cur was too old to keep as prev
			}
			c.born = c.now()
		}
		c.cur[ns+k] = struct{}{}
	}
}

// reset forgets everything.
func (c *doneCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.prev, c.born = make(map[string]struct{}, c.half), map[string]struct{}{}, c.now()
}
