// Package batch runs work the way InnoDB groups commits: at most `lanes` batches at once, and
// whatever arrives while every lane is busy waits, to be taken whole (up to a cap) by the next
// caller that gets a lane. A caller that finds a lane free runs its own item at once, alone: an
// idle queue adds no latency. There is no timer.
//
// Group apply (apply/group.go) and the grouped idempotent create (orders/group.go) use it.
package batch

import (
	"context"
	"slices"
	"sync"
)

// DefaultLanes is mysql.group_lanes' default: how many transactions of payments (group apply),
// and of creates (grouped creates), run at once before what arrives queues into batches.
const DefaultLanes = 2

// Item is one caller's piece of work. Run answers it exactly once, with Answer.
type Item[T, R any] struct {
	Ctx   context.Context // the caller's; a batch should outlive none of them by much
	Value T
	done  chan R // buffered: whoever runs the item never waits on its caller
}

// Answer gives the item's caller its result. Call it once per item.
func (it *Item[T, R]) Answer(r R) { it.done <- r }

// Queue batches items: a batch of one goes to alone, a bigger one to together. Each must Answer
// every item it is given.
type Queue[T, R any] struct {
	lanes    chan struct{}
	max      int
	alone    func(it *Item[T, R])
	together func(batch []*Item[T, R])

	mu      sync.Mutex
	pending []*Item[T, R]
}

// New makes a queue of lanes concurrent batches (at least 1) of at most max items each. A lone
// item is run by alone (the caller's single path, at once), two or more by together.
func New[T, R any](lanes, max int, alone func(it *Item[T, R]), together func(batch []*Item[T, R])) *Queue[T, R] {
	return &Queue[T, R]{lanes: make(chan struct{}, lanes), max: max, alone: alone, together: together}
}

// Do queues v and returns its answer. Whoever gets a lane while its own item is still queued
// runs the queue as it stands, its own item with others'. A caller whose item another lane took
// only waits for the answer: it never runs others' items, which would delay its own reply.
//
// err is ctx's error when ctx ended first. The item may then still be run (it was taken before
// ctx ended): its effects are for the caller's next attempt to find.
func (q *Queue[T, R]) Do(ctx context.Context, v T) (r R, err error) {
	it := &Item[T, R]{Ctx: ctx, Value: v, done: make(chan R, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, it)
	q.mu.Unlock()
	for q.isPending(it) {
		select {
		case r := <-it.done: // another lane took it and answered meanwhile
			return r, nil
		case q.lanes <- struct{}{}:
			q.runLane(it)
		case <-ctx.Done():
			if q.withdraw(it) {
				return r, ctx.Err()
			}
		}
	}
	// A batch has it.
	select {
	case r := <-it.done:
		return r, nil
	case <-ctx.Done():
		select {
		case r := <-it.done: // answered at the same moment: the answer wins
			return r, nil
		default:
			return r, ctx.Err()
		}
	}
}

// runLane runs one batch from the queue on the lane the caller holds, unless the caller's own
// item was taken by another lane meanwhile; the lane is freed whatever happens.
func (q *Queue[T, R]) runLane(it *Item[T, R]) {
	defer func() { <-q.lanes }()
	if !q.isPending(it) {
		return
	}
	if b := q.take(); len(b) == 1 { // never empty: it was pending
		q.alone(b[0])
	} else {
		q.together(b)
	}
}

// take empties the queue into one batch (max at most; the rest waits for the next lane).
func (q *Queue[T, R]) take() []*Item[T, R] {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.pending), q.max)
	batch := slices.Clone(q.pending[:n])
	q.pending = slices.Delete(q.pending, 0, n)
	return batch
}

// Len is how many items wait for a lane right now.
func (q *Queue[T, R]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *Queue[T, R]) isPending(it *Item[T, R]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Contains(q.pending, it)
}

// withdraw takes it out of the queue if no batch has taken it yet.
func (q *Queue[T, R]) withdraw(it *Item[T, R]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.pending, it)
	if i >= 0 {
		q.pending = slices.Delete(q.pending, i, i+1)
	}
	return i >= 0
}
