package main

import (
	"context"
	"fmt"
	"sync/atomic"
)

// The phases of a run (bench.run calls them in order; --only picks some).

// throughput: unique payments at 32 in flight against the raw ceiling, and the outbox's
// variants (outbox.go).
func (b *bench) throughput(ctx context.Context) error {
	db := b.admin.dsn(benchDB)
	steps := []step{
		{name: "raw", fn: func(r int) result {
			res, err := rawCeiling(ctx, db, chunk(b.sets["raw"].events, r, rounds), b.opts.concurrency)
			if err != nil {
				b.logf("raw ceiling: %v", err)
			}
			return res
		}},
		{name: "unique", profile: "unique", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(b.sets["unique"].msgs, r, rounds)) }},
	}
	return b.interleave(ctx, rounds, append(steps, b.variantSteps(ctx)...)...)
}

// throughput256: group apply at 256 in flight, against the raw ceiling at 256.
func (b *bench) throughput256(ctx context.Context) error {
	db := b.admin.dsn(benchDB)
	cl256 := newClient(256)
	return b.interleave(ctx, rounds,
		step{name: "raw_256", fn: func(r int) result {
			res, err := rawCeiling(ctx, db, chunk(b.sets["raw256"].events, r, rounds), 256)
			if err != nil {
				b.logf("raw ceiling at 256: %v", err)
			}
			return res
		}},
		step{name: "unique_256", fn: func(r int) result { return cl256.run(ctx, b.url, chunk(b.sets["unique256"].msgs, r, rounds)) }},
	)
}

// serial: one request at a time; group apply must not tax a quiet gateway. The same gateway
// with group apply off (mysql.group_lanes 0) is today's path.
func (b *bench) serial(ctx context.Context) error {
	single, err := b.startGateway(ctx, b.keys, benchDB, "single", 0)
	if err != nil {
		return err
	}
	defer single.stop()
	cl1 := newClient(1)
	return b.interleave(ctx, rounds,
		step{name: "serial_single", fn: func(r int) result {
			return cl1.run(ctx, single.url+"/notify/alipay", chunk(b.sets["serials"].msgs, r, rounds))
		}},
		step{name: "serial_group", fn: func(r int) result { return cl1.run(ctx, b.url, chunk(b.sets["serialg"].msgs, r, rounds)) }},
	)
}

// creates: the idempotent create on one hot SKU from 32 clients, against a bare client running
// the same statements one create to a transaction.
func (b *bench) creates(ctx context.Context) error {
	db := b.admin.dsn(benchDB)
	nCreates := b.n(4000)
	if err := b.admin.stockHot(ctx, benchDB, 4*nCreates); err != nil {
		return err
	}
	return b.interleave(ctx, rounds,
		step{name: "create_raw", fn: func(r int) result {
			res, err := rawCreates(ctx, db, nCreates/rounds, b.opts.concurrency, fmt.Sprintf("raw-%d", r))
			if err != nil {
				b.logf("raw creates: %v", err)
			}
			return res
		}},
		step{name: "create_hot", fn: func(r int) result {
			return b.cl.runCreates(ctx, b.gw.url, nCreates/rounds, fmt.Sprintf("gw-%d", r))
		}},
	)
}

// tail: latency at 70 % of the unique peak, sent at a steady rate (open loop). Beside it, in the
// same rounds, a reference: the raw ceiling's transaction with nothing in front of it, at 70 % of
// its own peak, the tail this machine gives today's path at that load.
func (b *bench) tail(ctx context.Context) error {
	rate := 0.7 * b.results["unique"].RPS
	rawRate := 0.7 * b.results["raw"].RPS
	// An open loop has more requests in flight at its peaks than the 32 connections the closed
	// loops left open: without this, its first round dialled about 100 new connections (6 % of
	// its requests) and the later ones almost none. The warm set's repeats, 4 x 32 at a time,
	// leave that many keep-alive connections in the client's pool, so no round dials.
	warmPool := &client{hc: b.cl.hc, concurrency: 4 * b.opts.concurrency}
	warmPool.run(ctx, b.url, b.sets["warm"].msgs)
	db := b.admin.dsn(benchDB)
	if err := b.interleave(ctx, rounds,
		step{name: "unique_at_70pct", fn: func(r int) result {
			return b.cl.runRate(ctx, b.url, chunk(b.sets["rate70"].msgs, r, rounds), rate)
		}},
		step{name: "raw_at_70pct", fn: func(r int) result {
			res, err := rawAtRate(ctx, db, chunk(b.sets["raw70"].events, r, rounds), rawRate, 256)
			if err != nil {
				b.logf("raw at 70 %%: %v", err)
			}
			return res
		}},
	); err != nil {
		return err
	}
	b.logf("at 70 %%: unique sent at %.0f req/s, raw at %.0f", rate, rawRate)
	return nil
}

// others: do refunds and closes pay for grouping? They take the single path, a transaction
// each. Payments with one refund and one close in every ten notifications (mix_8_1_1) against
// payments alone (payments_only), in alternating rounds, tell what they cost a realistic
// stream; refunds alone (refund_only, a mass refund) and closes alone (close_only) tell what each
// costs. The orders refunded are paid first, outside the timing.
func (b *bench) others(ctx context.Context) error {
	if paid := b.cl.run(ctx, b.url, b.sets["topay"].msgs); paid.Errors > 0 {
		return fmt.Errorf("paying the orders to refund: %d of %d failed", paid.Errors, paid.Requests)
	}
	refunds, closes, pays := b.sets["refunds"].msgs, b.sets["closes"].msgs, b.sets["mixpay"].msgs
	var stream []message
	for i := range pays {
		stream = append(stream, pays[i])
		if i%8 == 7 {
			stream = append(stream, refunds[i/8], closes[i/8])
		}
	}
	refundOnly, closeOnly := refunds[len(pays)/8:], closes[len(pays)/8:]
	return b.interleave(ctx, rounds,
		step{name: "payments_only", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(b.sets["payonly"].msgs, r, rounds)) }},
		step{name: "mix_8_1_1", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(stream, r, rounds)) }},
		step{name: "refund_only", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(refundOnly, r, rounds)) }},
		step{name: "close_only", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(closeOnly, r, rounds)) }},
	)
}

// repeats: a fresh process knows nothing, so the first repeat of each payment asks Redis; then
// repeats it remembers, and the mixed storm of one unique to 7 repeats sent at once.
func (b *bench) repeats(ctx context.Context) error {
	if err := b.gw.restart(ctx); err != nil {
		return err
	}
	b.warm()
	unique := b.sets["unique"].msgs
	repeats := append(append(append([]message(nil), unique...), unique...), unique...)
	if err := b.interleave(ctx, rounds,
		step{name: "verify_only", fn: func(r int) result { return b.cl.run(ctx, b.verifyURL, chunk(repeats, r, rounds)) }},
		step{name: "repeat_first", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(unique, r, rounds)) }},
		step{name: "repeat", profile: "repeat", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(repeats, r, rounds)) }},
	); err != nil {
		return err
	}
	return b.interleave(ctx, rounds, step{name: "mixed", fn: func(r int) result {
		return b.cl.runTwins(ctx, b.url, chunk(b.sets["mixed"].msgs, r, rounds), 8)
	}})
}

// growth: unique payments on the full table against the same on the (nearly) empty one.
func (b *bench) growth(ctx context.Context) error {
	return b.interleave(ctx, rounds,
		step{name: "unique_empty", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(b.sets["empty"].msgs, r, rounds)) }},
		step{name: "growth_unique", profile: "growth_unique", gw: b.gwGrowth, fn: func(r int) result {
			return b.cl.run(ctx, b.growthURL, chunk(b.sets["growth"].msgs, r, rounds))
		}},
	)
}

// purge: unique payments while the purge deletes the growth table's rows (all 30 days old, past
// the default retention) in its batches, against the same without a purge.
func (b *bench) purge(ctx context.Context) error {
	var purged atomic.Int64
	if err := b.interleave(ctx, rounds,
		step{name: "purge_off", fn: func(r int) result { return b.cl.run(ctx, b.growthURL, chunk(b.sets["purgeoff"].msgs, r, rounds)) }},
		step{name: "purge_on", fn: func(r int) result {
			pctx, stop := context.WithCancel(ctx)
			done, deleting := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				n, err := purgeWhile(pctx, b.admin.dsn(growthDB), deleting)
				purged.Add(n)
				if err != nil && pctx.Err() == nil {
					b.logf("purge: %v", err)
				}
			}()
			select { // the payments start once the purge is deleting
			case <-deleting:
			case <-done:
			}
			res := b.cl.run(ctx, b.growthURL, chunk(b.sets["purgeon"].msgs, r, rounds))
			stop()
			<-done
			return res
		}},
	); err != nil {
		return err
	}
	b.purgedRows = purged.Load()
	b.logf("the purge deleted %d rows while unique payments ran", b.purgedRows)
	b.gwGrowth.stop()
	return nil
}

// redisDown: Redis stopped; unique payments through MySQL alone, and repeats of payments this
// process never saw (the raw ceiling's), which only the database can answer.
func (b *bench) redisDown(ctx context.Context) error {
	b.redis.stop()
	b.logf("redis-server stopped")
	b.warm()
	return b.interleave(ctx, rounds,
		step{name: "unique_redis_down", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(b.sets["down"].msgs, r, rounds)) }},
		step{name: "repeat_redis_down", fn: func(r int) result { return b.cl.run(ctx, b.url, chunk(b.sets["raw"].msgs, r, rounds)) }},
	)
}
