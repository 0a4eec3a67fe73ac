package main

import (
	"context"
	"sync"
)

// refundPrefix names the orders of refundsDuring.
const refundPrefix = "CXWH"

// refundsDuring pays n orders of their own and then refunds each twice, one notification after
// the other's success, while a fault lasts: orders with three events (order.paid, then two
// order.refunded), so that the webhook check has an order of events to hold the sink to. wait
// checks that each ended PAID with both refunds counted and three events.
func (c *chaos) refundsDuring(ctx context.Context, f *figures, n int) (wait func()) {
	orders, err := seed(ctx, c.db, refundPrefix, n)
	if err != nil {
		f.fail("seeding the refunded orders: %v", err)
		return func() {}
	}
	st := newStats()
	var wg sync.WaitGroup
	active := make(chan struct{}, 16)
	for i, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			active <- struct{}{}
			defer func() { <-active }()
			for k := range 3 { // the payment, then refund 1, then refund 2
				step := o
				step.Refund = k
				first, err := c.sender.signers[o.Channel].Sign(payment(step))
				if err != nil || !c.sender.chain(ctx, st, step, first, i%len(c.urls)) {
					return
				}
			}
		}()
	}
	return func() {
		wg.Wait()
		if g := st.gaveUp.Load(); g > 0 {
			f.fail("%d payment or refund notification(s) of the refunded orders gave up", g)
		}
		if err := checkRefunded(ctx, c, f, orders); err != nil {
			f.fail("checking the refunded orders: %v", err)
		}
		f.notef("%d orders paid and refunded twice each during the fault (%d requests): three events each for the webhook check", n, st.requests.Load())
	}
}

// checkRefunded holds each refunded order to PAID, refunded_fen of two parts, and three events.
func checkRefunded(ctx context.Context, c *chaos, f *figures, orders []order) error {
	const q = `SELECT o.trade_no, o.status, o.refunded_fen, (SELECT COUNT(*) FROM event e WHERE e.trade_no = o.trade_no)
		FROM orders o WHERE o.trade_no LIKE ?`
	rows, err := c.db.QueryContext(ctx, q, refundPrefix+"%")
	if err != nil {
		return err
	}
	defer rows.Close()
	amount := map[string]int64{}
	for _, o := range orders {
		amount[o.TradeNo] = o.AmountFen
	}
	bad := 0
	for rows.Next() {
		var tradeNo, status string
		var refunded int64
		var events int
		if err := rows.Scan(&tradeNo, &status, &refunded, &events); err != nil {
			return err
		}
		if want := 2 * refundPart(amount[tradeNo]); status != "PAID" || refunded != want || events != 3 {
			if bad++; bad <= 10 {
				f.fail("%s: %s, refunded %d fen, %d events; want PAID, %d, 3", tradeNo, status, refunded, events, want)
			}
		}
	}
	return rows.Err()
}
