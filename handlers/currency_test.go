package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// createdOrder is the part of an order view these tests read.
type createdOrder struct {
	TradeNo         string `json:"trade_no"`
	SKU             string `json:"sku"`
	Num             int    `json:"num"`
	AmountFen       int64  `json:"amount_fen"`
	Currency        string `json:"currency"`
	MerchantOrderID string `json:"merchant_order_id"`
	Status          string `json:"status"`
}

func (h *harness) createOK(token, key, body string) createdOrder {
	h.t.Helper()
	r := h.create(token, key, body)
	if r.code != 201 {
		h.t.Fatalf("create %s: %d %s", body, r.code, r.body)
	}
	var o createdOrder
	if err := json.Unmarshal([]byte(r.body), &o); err != nil {
		h.t.Fatal(err)
	}
	return o
}

// wantProblem checks r is the problem typ with status code, its detail naming every one of words.
func wantProblem(t *testing.T, r response, code int, typ string, words ...string) {
	t.Helper()
	var p problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.code != code || p.Type != typ {
		t.Fatalf("%d %s, want %d %s", r.code, r.body, code, typ)
	}
	for _, w := range words {
		if !strings.Contains(p.Detail, w) {
			t.Fatalf("detail %q does not name %q", p.Detail, w)
		}
	}
}

func TestStockCurrency(t *testing.T) {
	h := newHarness(t, options{})
	if r := h.do("PUT", "/v1/stock/USD-1", testToken, nil, `{"num":5,"price_fen":1999,"currency":"USD"}`); r.code != 200 || !strings.Contains(r.body, `"currency":"USD"`) {
		t.Fatalf("put stock USD: %d %s", r.code, r.body)
	}
	h.putStock("CNY-1", 5, 1999) // no currency: CNY
	for name, body := range map[string]string{
		"lower case": `{"num":1,"price_fen":1,"currency":"usd"}`,
		"unknown":    `{"num":1,"price_fen":1,"currency":"XYZ"}`,
		"metal":      `{"num":1,"price_fen":1,"currency":"XAU"}`,
		"not a code": `{"num":1,"price_fen":1,"currency":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, h.do("PUT", "/v1/stock/BAD", testToken, nil, body), 400, typeInvalid)
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM stock WHERE sku = 'BAD'`); n != 0 {
		t.Fatalf("refused stock stored %d rows", n)
	}
	if o := h.createOK(testToken, "k-usd", `{"user_id":1,"sku":"USD-1","num":2}`); o.Currency != "USD" || o.AmountFen != 3998 {
		t.Fatalf("order from USD stock: %+v", o)
	}
	if o := h.createOK(testToken, "k-cny", `{"user_id":1,"sku":"CNY-1","num":1}`); o.Currency != "CNY" || o.AmountFen != 1999 {
		t.Fatalf("order from CNY stock: %+v", o)
	}
	// The stock's currency changed: the next order takes the new one.
	if r := h.do("PUT", "/v1/stock/USD-1", testToken, nil, `{"num":5,"price_fen":500,"currency":"JPY"}`); r.code != 200 {
		t.Fatalf("put stock JPY: %d %s", r.code, r.body)
	}
	if o := h.createOK(testToken, "k-jpy", `{"user_id":1,"sku":"USD-1","num":1}`); o.Currency != "JPY" || o.AmountFen != 500 {
		t.Fatalf("order from JPY stock: %+v", o)
	}
}

func TestCreateOrderWithoutStock(t *testing.T) {
	h := newHarness(t, options{})
	body := `{"user_id":7,"amount_fen":1234,"currency":"KWD","merchant_order_id":"M-1"}`
	first := h.create(testToken, "k1", body)
	var o createdOrder
	if first.code != 201 || json.Unmarshal([]byte(first.body), &o) != nil {
		t.Fatalf("create: %d %s", first.code, first.body)
	}
	if o.SKU != "" || o.Num != 1 || o.AmountFen != 1234 || o.Currency != "KWD" || o.MerchantOrderID != "M-1" || o.Status != payment.OrderWaitPay {
		t.Fatalf("created %+v", o)
	}
	// The same key and body (keys in another order) replay, even though the merchant id is taken.
	again := h.create(testToken, "k1", `{"merchant_order_id":"M-1","currency":"KWD","amount_fen":1234,"user_id":7}`)
	if again.code != 201 || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", again.code, again.body)
	}
	// The same key with another amount, currency or merchant id: 422.
	for _, other := range []string{
		`{"user_id":7,"amount_fen":1235,"currency":"KWD","merchant_order_id":"M-1"}`,
		`{"user_id":7,"amount_fen":1234,"currency":"BHD","merchant_order_id":"M-1"}`,
		`{"user_id":7,"amount_fen":1234,"currency":"KWD","merchant_order_id":"M-2"}`,
		`{"user_id":7,"amount_fen":1234,"currency":"KWD"}`,
	} {
		wantProblem(t, h.create(testToken, "k1", other), 422, typeKeyReused)
	}
	// Another key with the same merchant id: 409, stored and replayed for that key.
	taken := h.create(testToken, "k2", `{"user_id":8,"amount_fen":1,"currency":"USD","merchant_order_id":"M-1"}`)
	wantProblem(t, taken, 409, typeMerchantIDTaken, `"M-1"`)
	replayed := h.create(testToken, "k2", `{"user_id":8,"amount_fen":1,"currency":"USD","merchant_order_id":"M-1"}`)
	if replayed.code != 409 || replayed.body != taken.body || replayed.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("taken, replayed: %d %s", replayed.code, replayed.body)
	}
	// An order from stock with the same merchant id: 409 too, and its units stay.
	h.putStock("A-100", 3, 100)
	wantProblem(t, h.create(testToken, "k3", `{"user_id":8,"sku":"A-100","num":1,"merchant_order_id":"M-1"}`), 409, typeMerchantIDTaken)
	if n := h.stockNum("A-100"); n != 3 {
		t.Fatalf("stock = %d after a refused create, want 3", n)
	}
	// Another API client has merchant ids of its own.
	if o2 := h.createOK(otherToken, "k1", body); o2.TradeNo == o.TradeNo || o2.MerchantOrderID != "M-1" {
		t.Fatalf("other client: %+v", o2)
	}
	if n := h.count(`SELECT COUNT(*) FROM orders WHERE merchant_order_id = 'M-1'`); n != 2 {
		t.Fatalf("orders holding M-1 = %d, want 2 (one per client)", n)
	}
	// Every view of the order shows the merchant id.
	if r := h.do("GET", "/v1/orders/"+o.TradeNo, testToken, nil, ""); r.code != 200 || !strings.Contains(r.body, `"merchant_order_id":"M-1"`) {
		t.Fatalf("get order: %d %s", r.code, r.body)
	}
	r := h.do("GET", "/v1/payments/"+o.TradeNo, testToken, nil, "")
	if r.code != 200 || !strings.Contains(r.body, `"merchant_order_id":"M-1"`) || !strings.Contains(r.body, `order created for 1.234 KWD (merchant order \"M-1\")`) {
		t.Fatalf("payment view: %d %s", r.code, r.body)
	}
}

func TestCreateOrderWithoutStockRefusals(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 3, 100)
	for name, body := range map[string]string{
		"unknown currency":         `{"user_id":1,"amount_fen":100,"currency":"XYZ"}`,
		"lower-case currency":      `{"user_id":1,"amount_fen":100,"currency":"usd"}`,
		"no currency":              `{"user_id":1,"amount_fen":100}`,
		"no amount":                `{"user_id":1,"currency":"USD"}`,
		"zero amount":              `{"user_id":1,"amount_fen":0,"currency":"USD"}`,
		"negative amount":          `{"user_id":1,"amount_fen":-5,"currency":"USD"}`,
		"amount over 1e11":         `{"user_id":1,"amount_fen":100000000001,"currency":"USD"}`,
		"amount past int64":        `{"user_id":1,"amount_fen":9223372036854775808,"currency":"USD"}`,
		"fractional amount":        `{"user_id":1,"amount_fen":1.5,"currency":"USD"}`,
		"amount as a string":       `{"user_id":1,"amount_fen":"100","currency":"USD"}`,
		"num without sku":          `{"user_id":1,"num":2,"amount_fen":100,"currency":"USD"}`,
		"amount with sku":          `{"user_id":1,"sku":"A-100","num":1,"amount_fen":100}`,
		"currency with sku":        `{"user_id":1,"sku":"A-100","num":1,"currency":"CNY"}`,
		"empty merchant id":        `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":""}`,
		"merchant id of 65":        `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":"` + strings.Repeat("m", 65) + `"}`,
		"merchant id with newline": `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":"a\nb"}`,
		"merchant id padded":       `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":" a"}`,
		"no user":                  `{"amount_fen":100,"currency":"USD"}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, h.create(testToken, "k-"+name, body), 400, typeInvalid)
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record`) + h.count(`SELECT COUNT(*) FROM orders`); n != 0 {
		t.Fatalf("refused requests left %d rows", n)
	}
	// 64 characters, not bytes: a merchant id of 64 CJK characters is good.
	if o := h.createOK(testToken, "k-cjk", `{"user_id":1,"amount_fen":100,"currency":"CNY","merchant_order_id":"`+strings.Repeat("单", 64)+`"}`); o.MerchantOrderID != strings.Repeat("单", 64) {
		t.Fatalf("cjk merchant id: %+v", o)
	}
}

func TestChannelRefusesCurrency(t *testing.T) {
	h := newHarness(t, options{})
	// At order time, an order without stock: the Chinese channels take CNY alone.
	for _, ch := range []string{"alipay", "wechatpay", "unionpay"} {
		wantProblem(t, h.create(testToken, "k-"+ch, `{"user_id":1,"amount_fen":100,"currency":"USD","channel":"`+ch+`"}`), 400, typeInvalid, ch, `"USD"`)
		h.createOK(testToken, "k-cny-"+ch, `{"user_id":1,"amount_fen":100,"currency":"CNY","channel":"`+ch+`"}`)
	}
	// Stripe takes what it supports, not what it does not (the Iraqi dinar).
	h.createOK(testToken, "k-stripe-usd", `{"user_id":1,"amount_fen":100,"currency":"USD","channel":"stripe"}`)
	wantProblem(t, h.create(testToken, "k-stripe-iqd", `{"user_id":1,"amount_fen":100,"currency":"IQD","channel":"stripe"}`), 400, typeInvalid, "stripe", `"IQD"`)
	// At order time, an order from stock: the stock's currency.
	if r := h.do("PUT", "/v1/stock/JPY-1", testToken, nil, `{"num":5,"price_fen":500,"currency":"JPY"}`); r.code != 200 {
		t.Fatalf("put stock: %d %s", r.code, r.body)
	}
	wantProblem(t, h.create(testToken, "k-jpy-wechat", `{"user_id":1,"sku":"JPY-1","num":1,"channel":"wechatpay"}`), 400, typeInvalid, "wechatpay", `"JPY"`)
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record`); n != 4 { // the four created above
		t.Fatalf("records = %d: a refused currency stored something", n)
	}
	if n := h.stockNum("JPY-1"); n != 5 {
		t.Fatalf("stock = %d, want 5", n)
	}
	jpy := h.createOK(testToken, "k-jpy-stripe", `{"user_id":1,"sku":"JPY-1","num":1,"channel":"stripe"}`)

	// At attempt time.
	for _, ch := range []string{"alipay", "wechatpay", "unionpay"} {
		r := h.do("POST", "/v1/orders/"+jpy.TradeNo+"/attempts", testToken, nil, `{"channel":"`+ch+`"}`)
		wantProblem(t, r, 400, typeInvalid, ch, `"JPY"`)
	}
	if n := h.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ?`, jpy.TradeNo); n != 1 {
		t.Fatalf("attempts = %d, want the first one (stripe) alone", n)
	}
	if r := h.do("POST", "/v1/orders/"+jpy.TradeNo+"/attempts", testToken, nil, `{"channel":"stripe","channel_ref":"pi_JPY1"}`); r.code != 201 {
		t.Fatalf("stripe attempt: %d %s", r.code, r.body)
	}
}

// A verified Stripe notification in the order's currency pays it, in Stripe's own minor units:
// the same as ISO 4217 for USD, JPY and KWD, hundredths for ISK, none for MGA.
func TestStripePaysInAnyCurrency(t *testing.T) {
	h := newHarness(t, options{})
	for _, c := range []struct {
		currency          string
		orderFen, sentFen int64
	}{
		{"USD", 1999, 1999},
		{"JPY", 5000, 5000},
		{"KWD", 1234, 1234},
		{"ISK", 1000, 100000},
		{"MGA", 50000, 500},
	} {
		t.Run(c.currency, func(t *testing.T) {
			o := h.createOK(testToken, "k-"+c.currency, `{"user_id":1,"amount_fen":`+itoa(c.orderFen)+`,"currency":"`+c.currency+`","channel":"stripe"}`)
			r := h.send("stripe", simulate.Payment{TradeNo: o.TradeNo, AmountFen: c.sentFen, Currency: c.currency})
			wantChannelReply(t, "stripe", r, payment.ReplySuccess)
			got := h.order(o.TradeNo)
			if got.Status != payment.OrderPaid || got.Currency != c.currency || got.AmountFen != c.orderFen {
				t.Fatalf("order after the notification: %+v", got)
			}
			if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, o.TradeNo); n != 0 {
				t.Fatalf("%d anomalies", n)
			}
		})
	}
	// Another currency than the order's is still a mismatch, not a payment.
	o := h.createOK(testToken, "k-usd-jpy", `{"user_id":1,"amount_fen":1999,"currency":"USD","channel":"stripe"}`)
	h.send("stripe", simulate.Payment{TradeNo: o.TradeNo, AmountFen: 1999, Currency: "JPY"})
	if got := h.order(o.TradeNo); got.Status != payment.OrderWaitPay {
		t.Fatalf("USD order paid in JPY: %+v", got)
	}
	if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'AMOUNT_MISMATCH'`, o.TradeNo); n != 1 {
		t.Fatalf("mismatch anomalies = %d, want 1", n)
	}
}
