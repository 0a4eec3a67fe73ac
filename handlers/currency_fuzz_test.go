package handlers

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
)

// FuzzCreateOrderEndToEnd posts any body to POST /v1/orders on a real MariaDB and Redis, every
// exchange checked against the OpenAPI contract, and holds the create's promises: never our own
// 5xx for a client's body; a 400 stores nothing; a 201 stored exactly the order it answers (an
// order without stock at its own amount and currency, sku "" and num 1; an order from stock at
// the stock's price and currency), and the key replays it byte for byte.
func FuzzCreateOrderEndToEnd(f *testing.F) {
	for _, s := range []string{
		`{"user_id":1,"amount_fen":1999,"currency":"USD"}`,
		`{"user_id":2,"amount_fen":1234,"currency":"KWD","merchant_order_id":"M-1"}`,
		`{"user_id":3,"amount_fen":5000,"currency":"JPY","merchant_order_id":"M-1","channel":"stripe"}`,
		`{"user_id":4,"amount_fen":100,"currency":"USD","channel":"alipay"}`,
		`{"user_id":5,"sku":"FZ-USD","num":2,"merchant_order_id":"订单-1"}`,
		`{"user_id":6,"sku":"FZ-USD","num":1,"currency":"USD"}`,
		`{"user_id":7,"amount_fen":0,"currency":"XYZ"}`,
		`{"user_id":8,"amount_fen":1,"currency":"CNY","merchant_order_id":""}`,
		`{"user_id":9,"amount_fen":100000000000,"currency":"BHD","num":1}`,
		`{"user_id":1,"amount_fen":1e3,"currency":"USD"}`,
	} {
		f.Add([]byte(s))
	}
	dsn := testenv.NewDatabase(f)
	db := testenv.Open(f, dsn)
	if err := db.PutStock(context.Background(), payment.Stock{SKU: "FZ-USD", Num: 1 << 30, PriceFen: 250, Currency: "USD"}); err != nil {
		f.Fatal(err)
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte) {
		h := newHarness(t, options{dsn: dsn})
		key := "fz-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(n.Add(1), 10)
		before := h.count(`SELECT COUNT(*) FROM orders`) + h.count(`SELECT COUNT(*) FROM idempotent_record`)
		r := h.create(testToken, key, string(body))
		switch {
		case r.code >= 500:
			t.Fatalf("%s -> %d %s", body, r.code, r.body)
		case r.code == 400:
			if after := h.count(`SELECT COUNT(*) FROM orders`) + h.count(`SELECT COUNT(*) FROM idempotent_record`); after != before {
				t.Fatalf("%s -> 400 yet stored %d rows", body, after-before)
			}
			return
		case r.code != 201:
			return // 404 unknown sku, 409 out of stock or merchant id taken: final answers
		}
		var v orderView
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			t.Fatal(err)
		}
		canonical, err := orders.Canonical(body)
		if err != nil {
			t.Fatalf("%s -> 201 but not canonical: %v", body, err)
		}
		in, err := orders.ParseNewOrder(canonical)
		if err != nil {
			t.Fatalf("%s -> 201 but refused by ParseNewOrder: %v", body, err)
		}
		want := payment.Order{SKU: "", Num: 1, AmountFen: in.AmountFen, Currency: in.Currency}
		if in.SKU != "" {
			want = payment.Order{SKU: in.SKU, Num: in.Num, AmountFen: 250 * int64(in.Num), Currency: "USD"}
		}
		got := h.order(v.TradeNo)
		if got.SKU != want.SKU || got.Num != want.Num || got.AmountFen != want.AmountFen || got.Currency != want.Currency ||
			got.MerchantOrderID != in.MerchantOrderID || got.UserID != in.UserID || viewOf(got).MerchantID != v.MerchantID ||
			v.AmountFen != got.AmountFen || v.Currency != got.Currency {
			t.Fatalf("%s -> %s, stored %+v", body, r.body, got)
		}
		if again := h.create(testToken, key, string(body)); again.code != 201 || again.body != r.body {
			t.Fatalf("%s: replay %d %s, want %s", body, again.code, again.body, r.body)
		}
	})
}
