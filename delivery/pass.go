package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/repository"
)

// scanWindow is how many sequenced events one fan-out transaction reads; maxWindows bounds the
// windows of one pass, so a long backlog of events is fanned out between rounds of POSTs.
const (
	scanWindow = 1000
	maxWindows = 10
)

// run is a held shard: its POSTs in flight, by delivery and by endpoint. Each endpoint has its
// own Parallel slots, so a slow or dead endpoint (10 s timeouts) holds up only its own events.
type run struct {
	d     *Dispatcher
	shard int

	mu       sync.Mutex
	inflight map[int64]bool // delivery ids
	busy     map[string]int // endpoint -> POSTs in flight
	// finished holds the deliveries whose POST ended while a read of due ones may have been
	// under way: that read may answer them as still due, at the version just sent.
	finished map[int64]sent
	tick     int64
	wg       sync.WaitGroup
	wake     chan struct{} // a slot freed
	active   []string      // the configured endpoints enabled, as the last fanAll read them
	fanned   time.Time     // the last fan-out that caught up with the events
	woken    time.Time     // the last WakeWaiting
}

// wakeEvery is how often a shard looks for waiting deliveries no earlier one will wake.
const wakeEvery = time.Minute

// sent is a delivery's version that was POSTed, and when (run.tick) the POST ended.
type sent struct{ version, tick int64 }

// pass fans the shard's new events out to every configured endpoint (at most once per Poll once
// caught up; the endpoints' state is read then too), then starts POSTs of the due deliveries
// into each endpoint's free slots; it answers how much it did (0: nothing, wait for a slot or
// the next poll).
func (r *run) pass(ctx context.Context) (int, error) {
	d := r.d
	work := 0
	if time.Since(r.fanned) >= d.o.Poll {
		n, err := r.fanAll(ctx)
		work += n
		if err != nil {
			return work, err
		}
	}
	if time.Since(r.woken) >= wakeEvery {
		n, err := d.store.WakeWaiting(ctx, r.shard, d.o.Now(), scanWindow)
		if err != nil {
			return work, err
		}
		if n > 0 {
			d.o.Log.Warn().Int64("deliveries", n).Int("shard", r.shard).Msg("webhooks: woke deliveries that waited for no earlier one")
		}
		r.woken = time.Now()
	}
	for _, name := range r.active {
		n, err := r.startDue(ctx, name)
		work += n
		if err != nil {
			return work, err
		}
	}
	return work, nil
}

// fanAll reads the endpoints (which are enabled: active), disables the shard's pending
// deliveries to a disabled one, and fans the new events out to each.
func (r *run) fanAll(ctx context.Context) (int, error) {
	d := r.d
	rows, err := d.store.WebhookEndpoints(ctx)
	if err != nil {
		return 0, err
	}
	r.active = r.active[:0]
	caughtUp := true
	work := 0
	for _, row := range rows {
		if _, ok := d.byName[row.Name]; !ok {
			continue // no longer configured: its deliveries wait, untouched
		}
		disabled := row.Disabled.Valid
		if !disabled {
			r.active = append(r.active, row.Name)
		} else if _, err := d.store.DisableDeliveries(ctx, row.Name, r.shard); err != nil {
			return work, err
		}
		n, more, err := d.fanOut(ctx, r.shard, d.byName[row.Name], disabled)
		work += n
		caughtUp = caughtUp && !more
		if err != nil {
			return work, fmt.Errorf("fan-out to %s: %w", row.Name, err)
		}
	}
	if caughtUp {
		r.fanned = time.Now()
	}
	return work, nil
}

// startDue starts POSTs of the endpoint's due deliveries into its free slots.
func (r *run) startDue(ctx context.Context, endpoint string) (int, error) {
	r.mu.Lock()
	busy := r.busy[endpoint]
	r.mu.Unlock()
	free := r.d.o.Parallel - busy
	if free <= 0 {
		return 0, nil
	}
	r.mu.Lock()
	readAt := r.tick
	r.mu.Unlock()
	// The ones in flight are still pending and due: read past them.
	due, err := r.d.store.DueDeliveries(ctx, r.shard, []string{endpoint}, r.d.o.Now(), free+busy)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, dd := range due {
		if started == free || ctx.Err() != nil {
			break
		}
		if r.start(ctx, dd) {
			started++
		}
	}
	// A POST that ended before the read began was recorded before it: later reads see that.
	r.mu.Lock()
	for id, s := range r.finished {
		if s.tick <= readAt {
			delete(r.finished, id)
		}
	}
	r.mu.Unlock()
	return started, nil
}

// start POSTs dd unless it is in flight already.
func (r *run) start(ctx context.Context, dd repository.DueDelivery) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight[dd.ID] {
		return false
	}
	if s, ok := r.finished[dd.ID]; ok && s.version == dd.Version {
		return false // a read from before its bookkeeping
	}
	r.inflight[dd.ID] = true
	r.busy[dd.Endpoint]++
	r.wg.Add(1)
	// A POST under way finishes and is recorded when the holder stops (fewer duplicates at each
	// deploy; the lease is released after it), but stops at once if the lease is lost: another
	// replica may hold the shard now.
	post, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), lease.ErrLost) {
			cancel()
		}
	})
	go func() {
		defer r.wg.Done()
		defer cancel()
		defer stop()
		r.d.send(post, r.shard, dd)
		r.mu.Lock()
		delete(r.inflight, dd.ID)
		r.busy[dd.Endpoint]--
		r.tick++
		r.finished[dd.ID] = sent{version: dd.Version, tick: r.tick}
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}()
	return true
}

// fanOut inserts the deliveries of the shard's events after the endpoint's cursor, a window at a
// time, each window in the transaction that moves the cursor past it. An endpoint disabled gets
// them as disabled: its cursor moves on, so enabling it again sends nothing of the time between.
func (d *Dispatcher) fanOut(ctx context.Context, shard int, ep Endpoint, disabled bool) (added int, more bool, err error) {
	cursor, err := d.store.WebhookCursor(ctx, ep.Name, shard)
	if err != nil {
		return 0, false, err
	}
	status := repository.DeliveryPending
	if disabled {
		status = repository.DeliveryDisabled
	}
	for range maxWindows {
		events, err := d.store.EventsAfter(ctx, cursor, scanWindow)
		if err != nil || len(events) == 0 {
			return added, false, err
		}
		var rows []repository.NewDelivery
		now := d.o.Now()
		for _, ev := range events {
			if ShardOf(ev.TradeNo, d.o.Shards) == shard && ep.Wants(ev.Type) {
				rows = append(rows, repository.NewDelivery{Endpoint: ep.Name, Event: ev, Shard: shard, Status: status, Due: now})
			}
		}
		to := events[len(events)-1].Seq
		if err := d.store.FanOut(ctx, ep.Name, shard, cursor, to, rows); err != nil {
			if errors.Is(err, repository.ErrFenced) {
				err = fmt.Errorf("the cursor moved under this holder: %w", err)
			}
			return added, false, err
		}
		cursor = to
		added += len(rows)
		if len(events) < scanWindow {
			return added, false, nil
		}
	}
	return added, true, nil
}
