package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/outbox"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/webhook"
)

// Webhook delivery: a backlog of events, committed and numbered, is drained by the real gateway
// (its dispatcher as shipped: 8 shards, 8 POSTs in flight an endpoint) into a local receiver
// that verifies every signature. Two backlogs, each on a fresh database: a small one for the
// delivery rate, and 100,000 events (x BENCH_SCALE) for how long a long backlog takes; each is
// bounded by drainTimeout (what came by then is reported, with how many did not).

// hooksDB is the delivery phase's database; set with benchDB (main.go).
var hooksDB = "paygw_bench_hooks"

const (
	// eventsPerOrder: each order of a backlog has its order.paid and then refunds, so the
	// per-order order of deliveries (a later event waits for the earlier one) is part of the
	// work, as in delivery's BenchmarkDrain.
	eventsPerOrder = 4
	// drainTimeout bounds one drain.
	drainTimeout = 10 * time.Minute
	// sinkEndpoint is the endpoint's name in the gateway's configuration.
	sinkEndpoint = "bench_sink"
)

// drained is one drain's outcome.
type drained struct {
	Events     int           // the backlog
	Took       time.Duration // from the gateway's start to the last event verified
	Flowing    time.Duration // from the first event verified to the last
	Duplicates int64         // events received again after they were verified once
	Rejected   int64         // requests whose signature did not verify (must be 0)
	Unfinished int           // events of the backlog not received within drainTimeout
}

// rate is the events delivered a second while they flowed: the gateway's start (leases taken
// at its first look, a second apart) is left out, as it weighs on a small backlog more.
func (d drained) rate() float64 {
	if d.Flowing <= 0 {
		return 0
	}
	return float64(d.Events-1) / d.Flowing.Seconds()
}

// sink is the receiver: it verifies each delivery's signature (Standard Webhooks) and counts the
// distinct event ids; done is closed once want of them came.
type sink struct {
	verifier  *webhook.Verifier
	want      int
	mu        sync.Mutex
	seen      map[string]bool
	dups, bad atomic.Int64
	done      chan struct{}
	srv       *http.Server
	url       string
	first     time.Time // the first event verified
	last      time.Time // the want-th
}

func startSink(secret string, want int) (*sink, error) {
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{verifier: v, want: want, seen: make(map[string]bool, want), done: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	s.url = "http://" + l.Addr().String() + "/hooks"
	go func() { _ = s.srv.Serve(l) }() // ends with Close
	return s, nil
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = s.verifier.Verify(body, r.Header, time.Now())
	}
	if err != nil {
		s.bad.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	s.mu.Lock()
	if s.seen[id] {
		s.dups.Add(1)
	} else {
		s.seen[id] = true
		switch len(s.seen) {
		case 1:
			s.first = time.Now()
		case s.want:
			s.last = time.Now()
			close(s.done)
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *sink) close() { _ = s.srv.Close() }

// deliveries runs the delivery phase: the rate backlog, then the long one.
func (b *bench) deliveries(ctx context.Context) error {
	for _, d := range []struct {
		name string
		n    int
	}{{"delivery_rate", b.backlogSize(10_000)}, {"delivery_backlog", b.backlogSize(100_000)}} {
		res, err := b.drain(ctx, d.name, d.n)
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		b.drains[d.name] = res
		b.drainOrder = append(b.drainOrder, d.name)
		b.logf("%-18s %7d events drained in %6.1fs: %6.0f events/s once flowing  duplicates %d  bad signatures %d  not received %d",
			d.name, res.Events, res.Took.Seconds(), res.rate(), res.Duplicates, res.Rejected, res.Unfinished)
	}
	return nil
}

// backlogSize scales a backlog (BENCH_SCALE) to whole orders, at least 100 of them.
func (b *bench) backlogSize(base int) int {
	orders := max(100, int(float64(base)*b.opts.scale)/eventsPerOrder)
	return orders * eventsPerOrder
}

// drain builds a backlog of n events on a fresh hooksDB, then starts the gateway with the sink as
// its one endpoint and times until the sink has verified every event.
func (b *bench) drain(ctx context.Context, name string, n int) (drained, error) {
	if err := b.admin.recreate(ctx, hooksDB); err != nil {
		return drained{}, err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return drained{}, err
	}
	s, err := startSink(secret, n)
	if err != nil {
		return drained{}, err
	}
	defer s.close()
	t := time.Now()
	if err := b.backlog(ctx, n, s.url); err != nil {
		return drained{}, err
	}
	b.logf("%s: %d events committed and numbered in %.1fs", name, n, time.Since(t).Seconds())
	extra := fmt.Sprintf("webhooks:\n  endpoints:\n    - name: %s\n      url: %q\n      secret: %q\n", sinkEndpoint, s.url, secret)
	start := time.Now()
	gw, err := b.startGatewayWith(ctx, b.keys, hooksDB, name, b.opts.groupLanes, b.opts.gatewayBin, extra)
	if err != nil {
		return drained{}, err
	}
	defer gw.stop()
	timeout := false
	select {
	case <-s.done:
	case <-time.After(drainTimeout):
		timeout = true
	case <-ctx.Done():
		return drained{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := drained{Events: n, Took: s.last.Sub(start), Flowing: s.last.Sub(s.first), Duplicates: s.dups.Load(),
		Rejected: s.bad.Load()}
	if timeout { // what came within the bound, reported as a drain that did not finish
		d.Unfinished, d.Events = n-len(s.seen), len(s.seen)
		d.Took, d.Flowing = drainTimeout, time.Since(s.first)
	}
	return d, nil
}

// backlog registers the sink's endpoint as the gateway does when it starts (from the events'
// seq then: none), then writes n events through the repository's own state changes (each order
// paid, then refunded eventsPerOrder-1 times) and numbers them with the outbox's sequencer.
func (b *bench) backlog(ctx context.Context, n int, url string) error {
	repo, err := repository.Open(ctx, b.admin.dsn(hooksDB), 4)
	if err != nil {
		return err
	}
	defer repo.Close()
	if err := repo.EnsureWebhookEndpoint(ctx, sinkEndpoint, url, time.Now().UTC()); err != nil {
		return err
	}
	orders := make([]order, n/eventsPerOrder)
	for i := range orders {
		orders[i] = order{tradeNo: fmt.Sprintf("H%07d", i), amountFen: 1000 + int64(i%9000)}
	}
	if err := b.admin.seedOrders(ctx, hooksDB, orders); err != nil {
		return err
	}
	if err := payAndRefund(ctx, repo, orders); err != nil {
		return err
	}
	seq := outbox.New(repo, zerolog.Nop())
	numbered, err := seq.Pass(ctx)
	if err != nil {
		return err
	}
	if numbered != n {
		return fmt.Errorf("the sequencer numbered %d events, want %d", numbered, n)
	}
	return nil
}

// payAndRefund pays the orders, 500 to a transaction (group apply's MarkPaidGroup), then
// refunds each of them eventsPerOrder-1 times (SetRefunded), a round of every order per refund,
// so that an order's events lie apart in seq; 100 orders to a transaction, four at once.
func payAndRefund(ctx context.Context, repo *repository.DB, orders []order) error {
	const group, per = 500, 100
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := parallel((len(orders)+group-1)/group, 4, func(g int) error {
		part := orders[g*group : min((g+1)*group, len(orders))]
		items := make([]repository.PaidItem, len(part))
		for i, o := range part {
			items[i] = repository.PaidItem{TradeNo: o.tradeNo, Channel: "alipay", ChannelTxnID: "2026H" + o.tradeNo,
				AmountFen: o.amountFen, Currency: "CNY", PaidAt: now}
		}
		return repo.InTx(ctx, func(tx *repository.Tx) error {
			n, err := tx.MarkPaidGroup(ctx, items, now)
			if err == nil && n != int64(len(items)) {
				err = fmt.Errorf("paid %d of %d orders", n, len(items))
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("pay the backlog's orders: %w", err)
	}
	for k := 1; k < eventsPerOrder; k++ {
		err := parallel((len(orders)+per-1)/per, 4, func(c int) error {
			return repo.InTx(ctx, func(tx *repository.Tx) error {
				for _, o := range orders[c*per : min((c+1)*per, len(orders))] {
					ok, err := tx.SetRefunded(ctx, o.tradeNo, int64(k), fmt.Sprintf("R%d", k), 1, now)
					if err == nil && !ok {
						err = errors.New("refused")
					}
					if err != nil {
						return fmt.Errorf("refund %d of %s: %w", k, o.tradeNo, err)
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// drainFigures adds the drains to the report's JSON and answers their figures.
func (b *bench) drainFigures(out map[string]any) []figure {
	for _, name := range b.drainOrder {
		d := b.drains[name]
		out[name+"_events"] = d.Events
		out[name+"_s"] = round(d.Took.Seconds(), 2)
		out[name+"_flowing_s"] = round(d.Flowing.Seconds(), 2)
		out[name+"_events_per_s"] = round(d.rate(), 0)
		out[name+"_duplicates"] = d.Duplicates
		out[name+"_bad_signatures"] = d.Rejected
		out[name+"_not_received"] = d.Unfinished
	}
	rate, okR := b.drains["delivery_rate"]
	long, okL := b.drains["delivery_backlog"]
	if !okR || !okL {
		return nil
	}
	holds := long.rate() / rate.rate()
	return []figure{
		{"delivery_events_per_s", "", rate.rate(), fmt.Sprintf("(a backlog of %d)", rate.Events), true},
		{"delivery_backlog_s", "", long.Took.Seconds(), fmt.Sprintf("(%d, start included)", long.Events), true},
		{"delivery_backlog_events_per_s", "", long.rate(), "", true},
		{"delivery_backlog_rate_over_rate", "", holds, ">= 0.80 (rate holds)", holds >= 0.80},
		{"delivery_bad_signatures", "", float64(rate.Rejected + long.Rejected), "0", rate.Rejected+long.Rejected == 0},
		{"delivery_not_received", "", float64(rate.Unfinished + long.Unfinished), fmt.Sprintf("0 (within %s)", drainTimeout),
			rate.Unfinished+long.Unfinished == 0},
	}
}
