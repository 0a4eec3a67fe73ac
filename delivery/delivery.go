// Package delivery sends the outbox's events to the merchant's webhook endpoints as Standard
// Webhooks says: a fan-out per endpoint without backfill, signed POSTs, retries on a schedule,
// per-order order, and the work split into shards, each under a lease, so every replica shares it
// and a killed one loses nothing.
//
// The choices, in short:
//   - An order's events share a shard (crc32 of trade_no mod Shards); each shard is a job_lease
//     row (lease.WebhookShard) its holder keeps while it runs. Only the holder moves the shard's
//     cursors and updates its deliveries, so no row is written by every replica.
//   - An endpoint first seen starts after the largest event seq then (no backfill). Its cursor
//     per shard moves in the transaction that inserts the deliveries, one per event it takes.
//   - The first attempt is at once; after attempt n fails, Schedule[n-1] passes before the next;
//     once the schedule is spent the delivery is failed. A later event of the same order to the
//     same endpoint waits (next_attempt_at NULL) until the earlier one is delivered or failed.
//   - 410 Gone disables the endpoint: its pending deliveries, and those fanned out while it is
//     disabled, become disabled and are never sent. A changed url, or a redelivery naming it,
//     enables it again; the events of the disabled time stay disabled (each can be redelivered).
//   - At least once: a POST is recorded (attempt row, status, next attempt) after it returns. A
//     stopping replica finishes and records its POSTs before it releases the lease; one that loses
//     the lease cuts them and records nothing, and the next holder sends them again. Duplicates
//     come only from a crash (or a lost lease) between a POST and its bookkeeping.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/repository"
)

// Endpoint is one of the merchant's receivers.
type Endpoint struct {
	Name   string
	URL    string
	Events []string // the event types it takes; empty for all
	// Sign answers the webhook-signature header for the message id, timestamp and body
	// (webhook.Sign with the endpoint's secrets).
	Sign func(id string, ts time.Time, body []byte) string
}

// Wants reports whether the endpoint takes events of type typ.
func (e Endpoint) Wants(typ string) bool { return len(e.Events) == 0 || slices.Contains(e.Events, typ) }

// DefaultSchedule is the Standard Webhooks specification's: the wait before each retry.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 10 * time.Hour}

// Defaults of Options.
const (
	DefaultShards   = 8
	DefaultTimeout  = 10 * time.Second // a 2xx must come within it
	DefaultPoll     = time.Second
	DefaultBatch    = 100
	DefaultParallel = 8
	DefaultLeaseTTL = 30 * time.Second
	DefaultBacklog  = 15 * time.Second
)

// Store is what delivery keeps in MySQL (repository.DB).
type Store interface {
	lease.Store
	EnsureWebhookEndpoint(ctx context.Context, name, url string, now time.Time) error
	WebhookEndpoints(ctx context.Context) ([]repository.WebhookEndpoint, error)
	DisableWebhookEndpoint(ctx context.Context, name string, at time.Time) error
	EnableWebhookEndpoint(ctx context.Context, name string) error
	WebhookCursor(ctx context.Context, endpoint string, shard int) (int64, error)
	WebhookReplicas(ctx context.Context, holder string, ttl time.Duration) (int, error)
	LeaveWebhookReplicas(ctx context.Context, holder string) error
	EventsAfter(ctx context.Context, after int64, limit int) ([]repository.SequencedEvent, error)
	EventByID(ctx context.Context, eventID string) (repository.SequencedEvent, error)
	FanOut(ctx context.Context, endpoint string, shard int, from, to int64, rows []repository.NewDelivery) error
	DueDeliveries(ctx context.Context, shard int, endpoints []string, now time.Time, limit int) ([]repository.DueDelivery, error)
	RecordAttempt(ctx context.Context, d repository.DueDelivery, a repository.WebhookAttempt, status string, next *time.Time, now time.Time) error
	DisableDeliveries(ctx context.Context, endpoint string, shard int) (int64, error)
	WakeWaiting(ctx context.Context, shard int, now time.Time, limit int) (int64, error)
	OldestUndelivered(ctx context.Context) (map[string]time.Time, error)
	Redeliver(ctx context.Context, ev repository.SequencedEvent, shard int, endpoints []string, now time.Time) error
	Deliveries(ctx context.Context, f repository.DeliveryFilter) ([]repository.WebhookDelivery, error)
}

var _ Store = (*repository.DB)(nil)

// Options configure a Dispatcher; the zero value of each field takes its default.
type Options struct {
	Endpoints []Endpoint
	Schedule  []time.Duration // the wait before each retry; DefaultSchedule when nil
	// Shards splits the work: an order's events share a shard (by its trade_no), each shard is
	// one lease. Every replica must use the same number.
	Shards   int
	Now      func() time.Time // the clock of due times and attempts; time.Now when nil
	Client   *http.Client     // copied; its Timeout (DefaultTimeout if none) bounds a POST; redirects are not followed
	Holder   string           // this replica in the leases (lease.Holder)
	Poll     time.Duration    // how often an idle shard, or a shard held by another, is looked at
	Batch    int              // due deliveries read at once per shard
	Parallel int              // POSTs in flight at once per endpoint and shard
	LeaseTTL time.Duration
	Backlog  time.Duration // how often the oldest-undelivered gauge is read
	Metrics  *metrics.Metrics
	Log      zerolog.Logger
}

// Dispatcher fans out and delivers the events. Its methods are safe for concurrent use.
type Dispatcher struct {
	store  Store
	o      Options
	byName map[string]Endpoint

	live     atomic.Int32 // replicas present (webhook_replica), this one included
	held     atomic.Int32 // shards this replica holds
	yielding atomic.Bool  // a shard is being given up, one at a time
}

// ErrUnknownEndpoint is a redelivery to an endpoint the configuration does not name.
var ErrUnknownEndpoint = errors.New("no webhook endpoint of that name")

// New checks the options and fills in their defaults.
func New(store Store, o Options) (*Dispatcher, error) {
	d := &Dispatcher{store: store, byName: map[string]Endpoint{}}
	for _, ep := range o.Endpoints {
		switch {
		case ep.Name == "" || len(ep.Name) > 64:
			return nil, fmt.Errorf("webhook endpoint name %q: 1 to 64 bytes", ep.Name)
		case ep.URL == "":
			return nil, fmt.Errorf("webhook endpoint %s: no url", ep.Name)
		case ep.Sign == nil:
			return nil, fmt.Errorf("webhook endpoint %s: no signer", ep.Name)
		}
		if _, dup := d.byName[ep.Name]; dup {
			return nil, fmt.Errorf("webhook endpoint %s: named twice", ep.Name)
		}
		d.byName[ep.Name] = ep
	}
	if o.Schedule == nil {
		o.Schedule = DefaultSchedule
	}
	for _, w := range o.Schedule {
		if w <= 0 {
			return nil, fmt.Errorf("webhook retry schedule: %s is not a positive wait", w)
		}
	}
	o.Shards = orDefault(o.Shards, DefaultShards)
	o.Poll = orDefault(o.Poll, DefaultPoll)
	o.Batch = orDefault(o.Batch, DefaultBatch)
	o.Parallel = orDefault(o.Parallel, DefaultParallel)
	o.LeaseTTL = orDefault(o.LeaseTTL, DefaultLeaseTTL)
	o.Backlog = orDefault(o.Backlog, DefaultBacklog)
	if o.Now == nil {
		o.Now = time.Now
	}
	// A copy: a redirect is an answer (not 2xx, so retried), never followed, since a client
	// would turn the POST into a GET; no timeout is DefaultTimeout.
	client := http.Client{}
	if o.Client != nil {
		client = *o.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if client.Timeout <= 0 {
		client.Timeout = DefaultTimeout
	}
	o.Client = &client
	if o.Holder == "" {
		o.Holder = lease.Holder("webhooks")
	}
	d.o = o
	return d, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ShardOf is the shard of an order's events among n.
func ShardOf(tradeNo string, n int) int { return int(crc32.ChecksumIEEE([]byte(tradeNo)) % uint32(n)) }

// Serve registers the configured endpoints, then runs every shard whose lease this replica can
// take, and the backlog gauge, until ctx ends.
func (d *Dispatcher) Serve(ctx context.Context) {
	if len(d.byName) == 0 {
		return
	}
	names := d.names()
	d.o.Metrics.Webhooks(names)
	lease.Every(ctx, d.o.Poll, true, func(ctx context.Context) {
		if err := d.Sync(ctx); err != nil {
			d.o.Log.Warn().Err(err).Msg("webhooks: registering the endpoints failed; trying again")
			return
		}
		d.presence(ctx)
		defer d.leave(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease.Every(ctx, d.o.LeaseTTL/3, false, d.presence)
		}()
		for shard := range d.o.Shards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A shard held by another is looked at less often than work is: each look is a
				// statement per replica and shard.
				lease.Every(ctx, max(d.o.Poll, d.o.LeaseTTL/6), true, func(ctx context.Context) { d.hold(ctx, shard) })
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease.Every(ctx, d.o.Backlog, true, d.backlog)
		}()
		wg.Wait()
	})
}

// presence renews this replica's row and reads how many replicas share the shards.
func (d *Dispatcher) presence(ctx context.Context) {
	n, err := d.store.WebhookReplicas(ctx, d.o.Holder, d.o.LeaseTTL)
	if err != nil {
		d.o.Log.Warn().Err(err).Msg("webhooks: renewing this replica's presence failed")
		return
	}
	d.live.Store(int32(max(n, 1)))
}

// leave removes this replica's presence when it stops.
func (d *Dispatcher) leave(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = d.store.LeaveWebhookReplicas(lctx, d.o.Holder) // its row lapses anyway
}

// share is how many shards this replica may hold: a ceiling of shards / replicas present.
func (d *Dispatcher) share() int {
	live := int(max(d.live.Load(), 1))
	return (d.o.Shards + live - 1) / live
}

// Sync adds the configured endpoints unknown to the database (after the events there now: no
// backfill) and enables again an endpoint whose url changed.
func (d *Dispatcher) Sync(ctx context.Context) error {
	for _, name := range d.names() {
		if err := d.store.EnsureWebhookEndpoint(ctx, name, d.byName[name].URL, d.o.Now()); err != nil {
			return fmt.Errorf("webhook endpoint %s: %w", name, err)
		}
	}
	return nil
}

func (d *Dispatcher) names() []string {
	names := make([]string, 0, len(d.byName))
	for _, ep := range d.o.Endpoints {
		names = append(names, ep.Name)
	}
	return names
}

// hold takes the shard's lease if it is free and this replica holds less than its share, and
// works the shard until the lease or ctx ends, or, holding more than its share since another
// replica came, gives it up (one shard at a time) for that one to take.
func (d *Dispatcher) hold(ctx context.Context, shard int) {
	if int(d.held.Load()) >= d.share() {
		return
	}
	held, release, err := lease.Hold(ctx, d.store, lease.WebhookShard(shard), d.o.Holder, d.o.LeaseTTL)
	var busy *lease.HeldError
	if errors.As(err, &busy) || ctx.Err() != nil {
		return
	}
	if err != nil {
		d.o.Log.Warn().Err(err).Int("shard", shard).Msg("webhooks: taking the shard's lease failed")
		return
	}
	d.held.Add(1)
	r := &run{d: d, shard: shard, inflight: map[int64]bool{}, busy: map[string]int{}, finished: map[int64]sent{}, wake: make(chan struct{}, 1)}
	yielded := false
	defer func() {
		r.wg.Wait() // before release: no POST of this holder outlives its lease
		release()
		d.held.Add(-1)
		if yielded {
			d.yielding.Store(false)
		}
	}()
	for held.Err() == nil {
		if int(d.held.Load()) > d.share() && d.yielding.CompareAndSwap(false, true) {
			yielded = true
			d.o.Log.Info().Int("shard", shard).Msg("webhooks: giving a shard up to another replica")
			return
		}
		n, err := r.pass(held)
		if err != nil && held.Err() == nil {
			d.o.Log.Warn().Err(err).Int("shard", shard).Msg("webhooks: a delivery pass failed")
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-held.Done():
		case <-r.wake:
		case <-time.After(d.o.Poll):
		}
	}
}

// backlog sets the age of each endpoint's oldest pending event.
func (d *Dispatcher) backlog(ctx context.Context) {
	if d.o.Metrics == nil {
		return
	}
	oldest, err := d.store.OldestUndelivered(ctx)
	if err != nil {
		d.o.Log.Warn().Err(err).Msg("webhooks: reading the backlog failed")
		return
	}
	now := d.o.Now()
	for name := range d.byName {
		var age time.Duration
		if t, ok := oldest[name]; ok {
			age = now.Sub(t)
		}
		d.o.Metrics.WebhookBacklog(name, age)
	}
	// A disabled endpoint has no pending delivery, so its backlog reads 0: say it apart.
	eps, err := d.store.WebhookEndpoints(ctx)
	if err != nil {
		d.o.Log.Warn().Err(err).Msg("webhooks: reading the endpoints failed")
		return
	}
	for _, ep := range eps {
		if _, ok := d.byName[ep.Name]; ok {
			d.o.Metrics.WebhookEndpointDisabled(ep.Name, ep.Disabled.Valid)
		}
	}
}
