package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

type orderPage struct {
	Orders     []orderView `json:"orders"`
	NextCursor string      `json:"next_cursor"`
}

// search asks GET /v1/orders with q and wants 200.
func (h *harness) search(q url.Values) orderPage {
	h.t.Helper()
	r := h.do("GET", "/v1/orders?"+q.Encode(), testToken, nil, "")
	if r.code != 200 {
		h.t.Fatalf("GET /v1/orders?%s: %d %s", q.Encode(), r.code, r.body)
	}
	var p orderPage
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// seedUserOrders inserts n WAIT_PAY orders of user, created at base, base+1s, ... in groups of
// ten sharing one create_time (so the id breaks the ties), and returns their trade_nos oldest first.
func (h *harness) seedUserOrders(user int64, n int, base time.Time) []string {
	h.t.Helper()
	var out []string
	err := h.db.InTx(context.Background(), func(tx *repository.Tx) error {
		for i := range n {
			o := payment.Order{TradeNo: orders.NewTradeNo(time.Now()), UserID: user, SKU: "SEED", Num: 1, AmountFen: 100,
				Currency: "CNY", CreateTime: base.Add(time.Duration(i/10) * time.Second)}
			if err := tx.InsertOrder(context.Background(), o, "", "", ""); err != nil {
				return err
			}
			out = append(out, o.TradeNo)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func tradeNos(p orderPage) []string {
	var out []string
	for _, o := range p.Orders {
		out = append(out, o.TradeNo)
	}
	return out
}

// The search finds an order by what a complaint comes with, pages newest first across ties of
// created_at, and combines filters.
func TestSearchOrders(t *testing.T) {
	h := newHarness(t, options{})
	base := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	many := h.seedUserOrders(77, 2*pageSize+5, base)

	// Every order of user 77, newest first, in three pages.
	var got []string
	q := url.Values{"user_id": {"77"}}
	for range 3 {
		p := h.search(q)
		got = append(got, tradeNos(p)...)
		q.Set("cursor", p.NextCursor)
		if p.NextCursor == "" {
			break
		}
	}
	want := slices.Clone(many)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("user 77's orders: %d, want all %d newest first (first %v, want %v)", len(got), len(want), got[:3], want[:3])
	}

	// A stockless order with the merchant's own id, then paid: found by that id, by the
	// transaction that paid it, and by status with a time range.
	r := h.do("POST", "/v1/orders", testToken, map[string]string{"Idempotency-Key": "search-1"},
		`{"user_id":78,"amount_fen":1999,"currency":"CNY","merchant_order_id":"ERP-4711"}`)
	wantCode(t, "create", r, 201)
	var created orderView
	if err := json.Unmarshal([]byte(r.body), &created); err != nil {
		t.Fatal(err)
	}
	if n := h.notifyAlipay(alipayPayment(created.TradeNo, 1999)); n.body != "success" {
		t.Fatalf("notify: %d %s", n.code, n.body)
	}
	paid, err := h.db.GetOrder(context.Background(), created.TradeNo)
	if err != nil || paid.ChannelTxnID == "" {
		t.Fatalf("the paid order: %+v, %v", paid, err)
	}
	for _, q := range []url.Values{
		{"merchant_order_id": {"ERP-4711"}},
		{"channel_txn_id": {paid.ChannelTxnID}},
		{"status": {"PAID"}},
		{"user_id": {"78"}, "status": {"PAID"}, "created_from": {paid.CreateTime.Add(-time.Second).Format(time.RFC3339Nano)}},
	} {
		if p := h.search(q); !slices.Equal(tradeNos(p), []string{created.TradeNo}) || p.NextCursor != "" ||
			p.Orders[0].ChannelTxnID != paid.ChannelTxnID || p.Orders[0].MerchantID != "ERP-4711" {
			t.Errorf("search %s: %+v, want only %s", q.Encode(), p, created.TradeNo)
		}
	}
	for _, q := range []url.Values{
		{"merchant_order_id": {"ERP-4712"}},
		{"channel_txn_id": {paid.ChannelTxnID + "0"}},
		{"user_id": {"78"}, "status": {"WAIT_PAY"}},
		{"user_id": {"77"}, "created_to": {base.Format(time.RFC3339)}},
	} {
		if p := h.search(q); len(p.Orders) != 0 {
			t.Errorf("search %s: %d orders, want none", q.Encode(), len(p.Orders))
		}
	}
	// A time range: the 10 orders created in base's second second.
	p := h.search(url.Values{"created_from": {base.Add(time.Second).Format(time.RFC3339)}, "created_to": {base.Add(2 * time.Second).Format(time.RFC3339)}})
	if !slices.Equal(tradeNos(p), want[len(want)-20:len(want)-10]) {
		t.Errorf("created in [base+1s, base+2s): %v, want %v", tradeNos(p), want[len(want)-20:len(want)-10])
	}
}

// A bad or unknown parameter is a 400 problem naming it, and the search runs nothing.
func TestSearchOrdersRefusesBadQueries(t *testing.T) {
	h := newHarness(t, options{})
	for _, q := range []string{"user=1", "user_id=x", "status=REFUNDED", "created_from=yesterday", "cursor=abc",
		"user_id=1&user_id=2", "merchant_order_id=", fmt.Sprintf("channel_txn_id=%0129d", 0)} {
		if r := h.do("GET", "/v1/orders?"+q, testToken, nil, ""); r.code != 400 {
			t.Errorf("GET /v1/orders?%s: %d %s, want 400", q, r.code, r.body)
		}
	}
}

// FuzzOrderSearchQuery: any query string is parsed or refused with errBadQuery, never panics,
// and a cursor it accepts is one the search itself spells.
func FuzzOrderSearchQuery(f *testing.F) {
	seeds := []string{"user_id=77&status=PAID", "cursor=" + encodeOrderCursor(repository.OrderCursor{CreateTime: time.UnixMilli(1764576000123), ID: 42}),
		"created_from=2026-11-01T08:00:00Z&created_to=2026-11-02T00:00:00%2B08:00", "channel_txn_id=2026%20x", "cursor=bzE6MTox"}
	fuzzQuery(f, seeds, parseOrderSearch, func(t *testing.T, raw string, v url.Values, got repository.OrderFilter) {
		if got.After != nil && encodeOrderCursor(*got.After) != v.Get("cursor") {
			t.Fatalf("%q: accepted a cursor spelt otherwise", raw)
		}
	})
}
