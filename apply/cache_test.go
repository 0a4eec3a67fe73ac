package apply

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// clock is a hand-moved clock for the cache's age.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestDoneCacheBoundedAndRemembers(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := newDoneCache(10, time.Minute, clk.now)
	c.add("ns:", "a", "b")
	if !c.has("ns:", "a") || !c.has("ns:", "b") || c.has("ns:", "c") {
		t.Fatal("cache lost or invented a marker")
	}
	if c.has("other:", "a") {
		t.Fatal("a marker answered for another namespace")
	}
	for i := range 100 {
		c.add("ns:", fmt.Sprint(i))
	}
	if n := len(c.cur) + len(c.prev); n > 10 {
		t.Fatalf("cache holds %d entries, bound is 10", n)
	}
	if !c.has("ns:", "99") || !c.has("ns:", "95") || c.has("ns:", "a") {
		t.Fatal("want the newest kept and the oldest forgotten")
	}
	c.reset()
	if c.has("ns:", "99") {
		t.Fatal("reset kept a marker")
	}
}

// Entries are forgotten within minutes even when nothing new arrives to push them out.
func TestDoneCacheExpires(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := newDoneCache(1000, time.Minute, clk.now)
	c.add("ns:", "old")
	clk.t = clk.t.Add(90 * time.Second)
	if !c.has("ns:", "old") {
		t.Fatal("forgotten before two generations passed")
	}
	c.add("ns:", "new") // rotates: old moves to the previous generation
	clk.t = clk.t.Add(59 * time.Second)
	if !c.has("ns:", "old") || !c.has("ns:", "new") {
		t.Fatal("the previous generation was dropped early")
	}
	clk.t = clk.t.Add(2 * time.Second)
	if c.has("ns:", "old") {
		t.Fatal("an entry outlived its previous generation")
	}
	clk.t = clk.t.Add(2 * time.Minute)
	if c.has("ns:", "new") {
		t.Fatal("an entry outlived both generations with no add to rotate it out")
	}
}

func TestDoneCacheConcurrent(t *testing.T) {
	c := newDoneCache(100_000, time.Hour, time.Now) // room for all 4000: nothing rotates out
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := fmt.Sprint(g, ":", i)
				c.add("ns:", k)
				_ = c.has("ns:", k)
			}
		}()
	}
	wg.Wait()
	for g := range 8 {
		if k := fmt.Sprint(g, ":", 499); !c.has("ns:", k) {
			t.Fatalf("marker %s is missing", k)
		}
	}
}
