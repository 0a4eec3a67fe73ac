package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// A lone item runs at once, alone, on its caller's goroutine.
func TestLoneItemRunsAlone(t *testing.T) {
	var sizes []int
	q := newQueue(1, 8, func(b []*Item[int, int]) {
		sizes = append(sizes, len(b))
		for _, it := range b {
			it.Answer(it.Value * 2)
		}
	})
	for i := 1; i <= 3; i++ {
		r, err := q.Do(context.Background(), i)
		if err != nil || r != 2*i {
			t.Fatalf("Do(%d) = %d, %v", i, r, err)
		}
	}
	if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 1 || sizes[2] != 1 {
		t.Fatalf("batches %v, want three of one", sizes)
	}
}

// Items that arrive while the only lane is busy wait and share the next batch, capped at max;
// each caller gets its own answer.
func TestItemsArrivingDuringABatchShareTheNext(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	q := newQueue(1, 4, func(b []*Item[int, int]) {
		mu.Lock()
		sizes = append(sizes, len(b))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // the first batch holds the lane while the others queue
		}
		for _, it := range b {
			it.Answer(it.Value + 100)
		}
	})
	var wg sync.WaitGroup
	answers := make([]int, 7)
	do := func(i int) {
		defer wg.Done()
		r, err := q.Do(context.Background(), i)
		if err != nil {
			t.Errorf("Do(%d): %v", i, err)
		}
		answers[i] = r
	}
	wg.Add(1)
	go do(0)
	testenv.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(sizes) != 1 {
			return fmt.Errorf("%d batches ran, want the first", len(sizes))
		}
		return nil
	})
	for i := 1; i < 7; i++ {
		wg.Add(1)
		go do(i)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := q.Len(); n != 6 {
			return fmt.Errorf("%d of 6 items queued", n)
		}
		return nil
	})
	close(release)
	wg.Wait()
	for i, r := range answers {
		if r != i+100 {
			t.Fatalf("answer %d = %d, want %d", i, r, i+100)
		}
	}
	if len(sizes) != 3 || sizes[1] != 4 || sizes[2] != 2 {
		t.Fatalf("batches %v, want [1 4 2]", sizes)
	}
}

// A caller whose context ends while its item still waits withdraws it: it never runs.
func TestCancelledWaitingItemIsWithdrawn(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan int, 8)
	q := newQueue(1, 8, func(b []*Item[int, int]) {
		for _, it := range b {
			ran <- it.Value
			if it.Value == 0 {
				<-release
			}
			it.Answer(it.Value)
		}
	})
	go func() { _, _ = q.Do(context.Background(), 0) }()
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := len(ran); n != 1 {
			return fmt.Errorf("%d items ran, want the first", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := q.Do(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do with an ended context: %v", err)
	}
	close(release)
	if r, err := q.Do(context.Background(), 2); err != nil || r != 2 {
		t.Fatalf("Do after: %d, %v", r, err)
	}
	close(ran)
	var got []int
	for v := range ran {
		got = append(got, v)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("ran %v, want [0 2]: the withdrawn item must not run", got)
	}
}

// A batch that panics still frees its lane.
func TestPanickingBatchFreesItsLane(t *testing.T) {
	q := newQueue(1, 8, func(b []*Item[int, int]) {
		if b[0].Value == 0 {
			panic("boom")
		}
		for _, it := range b {
			it.Answer(it.Value)
		}
	})
	func() {
		defer func() { _ = recover() }()
		_, _ = q.Do(context.Background(), 0)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := q.Do(ctx, 1); err != nil || r != 1 {
		t.Fatalf("Do after a panic: %d, %v", r, err)
	}
}

// newQueue is a queue whose lone items and batches both go to run, as a batch of one or more.
func newQueue(lanes, max int, run func(b []*Item[int, int])) *Queue[int, int] {
	return New(lanes, max, func(it *Item[int, int]) { run([]*Item[int, int]{it}) }, run)
}

// A batch of one goes to alone, never to together.
func TestBatchOfOneGoesAlone(t *testing.T) {
	var alone, together int
	q := New(1, 8, func(it *Item[int, int]) { alone++; it.Answer(it.Value) },
		func(b []*Item[int, int]) {
			together++
			for _, it := range b {
				it.Answer(it.Value)
			}
		})
	if r, err := q.Do(context.Background(), 7); err != nil || r != 7 {
		t.Fatalf("Do = %d, %v", r, err)
	}
	if alone != 1 || together != 0 {
		t.Fatalf("alone %d, together %d; want 1 and 0", alone, together)
	}
}
