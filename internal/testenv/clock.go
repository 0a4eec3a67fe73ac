package testenv

import (
	"sync"
	"time"
)

// Clock is a clock to inject where code takes a Now function: it moves only when the test
// advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the time the clock stands at.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
