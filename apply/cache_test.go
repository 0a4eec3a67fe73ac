package apply

import (
	"fmt"
	"sync"
	"testing"
)

func TestDoneCacheBoundedAndRemembers(t *testing.T) {
	c := newDoneCache(10)
	c.add("a", "b")
	if !c.has("a") || !c.has("b") || c.has("c") {
		t.Fatal("cache lost or invented a marker")
	}
	for i := range 100 {
		c.add(fmt.Sprint(i))
	}
	if n := len(c.cur) + len(c.prev); n > 10 {
		t.Fatalf("cache holds %d entries, bound is 10", n)
	}
	if !c.has("99") || !c.has("95") || c.has("a") {
		t.Fatal("want the newest kept and the oldest forgotten")
	}
}

func TestDoneCacheConcurrent(t *testing.T) {
	c := newDoneCache(100_000) // room for all 4000: nothing rotates out
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := fmt.Sprint(g, ":", i)
				c.add(k)
				_ = c.has(k)
			}
		}()
	}
	wg.Wait()
	for g := range 8 {
		if k := fmt.Sprint(g, ":", 499); !c.has(k) {
			t.Fatalf("marker %s is missing", k)
		}
	}
}
