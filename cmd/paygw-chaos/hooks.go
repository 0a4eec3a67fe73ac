package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"time"

	pay "github.com/paygw/paygw/payment" // not payment: the chaos tool has a func of that name
	"github.com/paygw/paygw/simulate"
)

// hookEvent is one row of paygw's event table; seq is its place in commit order, which for
// one order is its place in the order's history.
type hookEvent struct {
	id, typ, tradeNo string
	seq              int64
}

// hookVerdict is what the sink recorded, held against paygw's events and PAID orders.
type hookVerdict struct {
	events     int // rows of paygw's event table
	received   int // deliveries the sink answered 2xx (its record's lines)
	distinct   int // distinct event ids among them
	duplicates int // received - distinct
	paidTwice  int // PAID orders with other than one distinct order.paid id received
	missing    int // events never received
	outOfOrder int // events first received before an earlier event of their order
	unknown    int // ids received that are not in the event table
	problems   []string
}

func (v *hookVerdict) fail(format string, args ...any) {
	if len(v.problems) < 20 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

// checkHooks checks what the sink recorded (recs, in the order received), not what paygw's
// tables say it sent: (a) each PAID order was received as exactly one distinct order.paid event
// id, which is what a merchant would fulfil; (b) every event reached the sink at least once;
// (c) the first receipt of each event of an order comes after the first receipt of the order's
// earlier events (by seq). A unique key on the merchant's side would hide a second order.paid id;
// counting the ids the sink saw does not.
func checkHooks(events []hookEvent, paid []string, recs []simulate.SinkRecord) hookVerdict {
	v := hookVerdict{events: len(events), received: len(recs)}
	first := make(map[string]int, len(recs)) // event id -> index of its first receipt
	paidIDs := map[string]map[string]bool{}  // trade_no -> order.paid ids received
	for i, r := range recs {
		if _, seen := first[r.WebhookID]; seen {
			continue
		}
		first[r.WebhookID] = i
		if r.Type == pay.EventOrderPaid {
			if paidIDs[r.TradeNo] == nil {
				paidIDs[r.TradeNo] = map[string]bool{}
			}
			paidIDs[r.TradeNo][r.WebhookID] = true
		}
	}
	v.distinct = len(first)
	v.duplicates = v.received - v.distinct

	for _, t := range paid {
		if n := len(paidIDs[t]); n != 1 {
			v.paidTwice++
			v.fail("%s: PAID, and the sink received %d distinct order.paid event ids (%s), want exactly 1", t, n, idList(paidIDs[t]))
		}
	}
	known := make(map[string]bool, len(events))
	for _, e := range events {
		known[e.id] = true
		if _, ok := first[e.id]; !ok {
			v.missing++
			v.fail("%s (%s of %s): never received by the sink", e.id, e.typ, e.tradeNo)
		}
	}
	for id := range first {
		if !known[id] {
			v.unknown++
			v.fail("%s: received by the sink, not in paygw's event table", id)
		}
	}
	v.checkOrder(events, first)
	return v
}

// checkOrder is check (c): per order, by seq, each event's first receipt comes after its
// predecessor's. A pair of which one never arrived is check (b)'s to report.
func (v *hookVerdict) checkOrder(events []hookEvent, first map[string]int) {
	byOrder := map[string][]hookEvent{}
	for _, e := range events {
		byOrder[e.tradeNo] = append(byOrder[e.tradeNo], e)
	}
	for t, evs := range byOrder {
		sort.Slice(evs, func(i, j int) bool { return evs[i].seq < evs[j].seq })
		for k := 1; k < len(evs); k++ {
			prev, cur := evs[k-1], evs[k]
			ip, okp := first[prev.id]
			ic, okc := first[cur.id]
			if okp && okc && ic < ip {
				v.outOfOrder++
				v.fail("%s: %s (%s, seq %d) first received before its predecessor %s (%s, seq %d)", t, cur.id, cur.typ, cur.seq, prev.id, prev.typ, prev.seq)
			}
		}
	}
}

func idList(ids map[string]bool) string {
	l := make([]string, 0, len(ids))
	for id := range ids {
		l = append(l, id)
	}
	sort.Strings(l)
	return fmt.Sprint(l)
}

// hookFigures are the webhook side's results, for the report.
type hookFigures struct {
	v         hookVerdict
	attempted int           // POSTs paygw recorded (webhook_attempt)
	failed    int           // deliveries whose schedule ran out
	kills     int           // sink SIGKILLs
	drain     time.Duration // from the end of the faults to no pending delivery
	drained   bool
	problems  []string
}

// settleHooks waits (at most limit) until paygw has fanned out every event and reports no
// pending delivery, then checks what the sink recorded.
func (c *chaos) settleHooks(ctx context.Context, limit time.Duration) (*hookFigures, error) {
	h := &hookFigures{kills: c.sink.killCount()}
	start := time.Now()
	for {
		idle, err := c.hooksIdle(ctx)
		if err == nil && idle {
			h.drained = true
			break
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			h.problems = append(h.problems, fmt.Sprintf("webhook deliveries still pending or events not fanned out %s after the faults (last error: %v)", limit, err))
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	h.drain = time.Since(start)
	if h.kills == 0 {
		h.problems = append(h.problems, "the webhook sink was never killed: no phase lasted long enough")
	}

	events, paid, err := hookFacts(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := c.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM webhook_attempt),
		(SELECT COUNT(*) FROM webhook_delivery WHERE status = 'failed')`).Scan(&h.attempted, &h.failed); err != nil {
		return nil, err
	}
	f, err := os.Open(c.sink.record) // #nosec G304 -- the sink's record in the operator's --work directory
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := simulate.ReadSinkRecords(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.sink.record, err)
	}
	h.v = checkHooks(events, paid, recs)
	h.problems = append(h.problems, h.v.problems...)
	return h, nil
}

// hooksIdle reports whether every event is numbered and fanned out to the sink (the database)
// and no delivery is pending (GET /v1/webhooks/deliveries?status=pending, paygw's own report).
func (c *chaos) hooksIdle(ctx context.Context) (bool, error) {
	var unsequenced, unfanned int
	if err := c.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM event WHERE seq IS NULL),
		(SELECT COUNT(*) FROM event e WHERE NOT EXISTS (SELECT 1 FROM webhook_delivery d WHERE d.endpoint = ? AND d.event_id = e.event_id))`,
		sinkEndpoint).Scan(&unsequenced, &unfanned); err != nil {
		return false, err
	}
	if unsequenced+unfanned > 0 {
		return false, nil
	}
	q := url.Values{"endpoint": {sinkEndpoint}, "status": {"pending"}, "limit": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.urls[0]+"/v1/webhooks/deliveries?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET /v1/webhooks/deliveries: %s", res.Status)
	}
	var page struct {
		Deliveries []json.RawMessage `json:"deliveries"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		return false, err
	}
	return len(page.Deliveries) == 0, nil
}

// hookFacts reads paygw's events and its PAID orders.
func hookFacts(ctx context.Context, c *chaos) ([]hookEvent, []string, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT event_id, type, trade_no, COALESCE(seq, 0) FROM event`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var events []hookEvent
	for rows.Next() {
		var e hookEvent
		if err := rows.Scan(&e.id, &e.typ, &e.tradeNo, &e.seq); err != nil {
			return nil, nil, err
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var paid []string
	prows, err := c.db.QueryContext(ctx, `SELECT trade_no FROM orders WHERE status = 'PAID'`)
	if err != nil {
		return nil, nil, err
	}
	defer prows.Close()
	for prows.Next() {
		var t string
		if err := prows.Scan(&t); err != nil {
			return nil, nil, err
		}
		paid = append(paid, t)
	}
	return events, paid, prows.Err()
}
