package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/paygw/paygw/repository"
)

// scanWindow is how many sequenced events one fan-out transaction reads; maxWindows bounds the
// windows of one pass, so a long backlog of events is fanned out between rounds of POSTs.
const (
	scanWindow = 1000
	maxWindows = 10
)

// pass fans the shard's new events out to every configured endpoint, then POSTs the shard's due
// deliveries; it answers how much it did (0: nothing to do, wait before the next pass).
func (d *Dispatcher) pass(ctx context.Context, shard int) (int, error) {
	rows, err := d.store.WebhookEndpoints(ctx)
	if err != nil {
		return 0, err
	}
	var active []string
	work := 0
	for _, row := range rows {
		if _, ok := d.byName[row.Name]; !ok {
			continue // no longer configured: its deliveries wait, untouched
		}
		disabled := row.Disabled.Valid
		if disabled {
			if _, err := d.store.DisableDeliveries(ctx, row.Name, shard); err != nil {
				return work, err
			}
		} else {
			active = append(active, row.Name)
		}
		n, err := d.fanOut(ctx, shard, d.byName[row.Name], disabled)
		work += n
		if err != nil {
			return work, fmt.Errorf("fan-out to %s: %w", row.Name, err)
		}
	}
	due, err := d.store.DueDeliveries(ctx, shard, active, d.o.Now(), d.o.Batch)
	if err != nil {
		return work, err
	}
	d.sendAll(ctx, shard, due)
	return work + len(due), nil
}

// fanOut inserts the deliveries of the shard's events after the endpoint's cursor, a window at a
// time, each window in the transaction that moves the cursor past it. An endpoint disabled gets
// them as disabled: its cursor moves on, so enabling it again sends nothing of the time between.
func (d *Dispatcher) fanOut(ctx context.Context, shard int, ep Endpoint, disabled bool) (int, error) {
	cursor, err := d.store.WebhookCursor(ctx, ep.Name, shard)
	if err != nil {
		return 0, err
	}
	status := repository.DeliveryPending
	if disabled {
		status = repository.DeliveryDisabled
	}
	added := 0
	for range maxWindows {
		events, err := d.store.EventsAfter(ctx, cursor, scanWindow)
		if err != nil || len(events) == 0 {
			return added, err
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
				return added, fmt.Errorf("the cursor moved under this holder: %w", err)
			}
			return added, err
		}
		cursor = to
		added += len(rows)
		if len(events) < scanWindow {
			break
		}
	}
	return added, nil
}

// sendAll POSTs the due deliveries, Parallel at a time. No two are of one order and endpoint:
// the later one waits for the earlier (DueDeliveries).
func (d *Dispatcher) sendAll(ctx context.Context, shard int, due []repository.DueDelivery) {
	sem := make(chan struct{}, d.o.Parallel)
	var wg sync.WaitGroup
	for _, dd := range due {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.send(ctx, shard, dd)
		}()
	}
	wg.Wait()
}
