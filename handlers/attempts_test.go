package handlers

import (
	"encoding/json"
	"testing"
)

func (h *harness) attempt(tradeNo, body string) response {
	h.t.Helper()
	return h.do("POST", "/v1/orders/"+tradeNo+"/attempts", testToken, map[string]string{"Content-Type": "application/json"}, body)
}

func TestPaymentAttempts(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1999)

	first := h.attempt(tn, `{"channel":"stripe","channel_ref":"pi_3Mtw1aLkdIwHu7ix28a3tqPa"}`)
	wantCode(t, "first attempt", first, 201)
	var a struct {
		TradeNo    string `json:"trade_no"`
		Channel    string `json:"channel"`
		ChannelRef string `json:"channel_ref"`
		QueryCount *int   `json:"query_count"`
	}
	if err := json.Unmarshal([]byte(first.body), &a); err != nil || a.TradeNo != tn || a.Channel != "stripe" ||
		a.ChannelRef != "pi_3Mtw1aLkdIwHu7ix28a3tqPa" || a.QueryCount == nil || *a.QueryCount != 0 {
		t.Fatalf("attempt body %s (%v)", first.body, err)
	}
	if again := h.attempt(tn, `{"channel":"stripe","channel_ref":"pi_3Mtw1aLkdIwHu7ix28a3tqPa"}`); again.code != 200 || again.body != first.body {
		t.Fatalf("the same attempt again: %d %s, want 200 and the first body", again.code, again.body)
	}
	// The buyer switched channel: another attempt, normal.
	if r := h.attempt(tn, `{"channel":"unionpay","channel_ref":"20261203153000"}`); r.code != 201 {
		t.Fatalf("second channel: %d %s", r.code, r.body)
	}
	if r := h.attempt(tn, `{"channel":"alipay"}`); r.code != 201 {
		t.Fatalf("no ref: %d %s", r.code, r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ?`, tn); n != 3 {
		t.Fatalf("attempts = %d, want 3", n)
	}

	for name, c := range map[string]struct {
		tradeNo, body string
		code          int
		typ           string
	}{
		"unknown order":    {"PNOSUCHORDER", `{"channel":"alipay"}`, 404, "urn:paygw:problem:not-found"},
		"unknown channel":  {tn, `{"channel":"paypal"}`, 400, "urn:paygw:problem:invalid-request"},
		"no channel":       {tn, `{}`, 400, "urn:paygw:problem:invalid-request"},
		"bad stripe ref":   {tn, `{"channel":"stripe","channel_ref":"cs_123"}`, 400, "urn:paygw:problem:invalid-request"},
		"bad unionpay ref": {tn, `{"channel":"unionpay","channel_ref":"2026-12-03"}`, 400, "urn:paygw:problem:invalid-request"},
		"ref for alipay":   {tn, `{"channel":"alipay","channel_ref":"x"}`, 400, "urn:paygw:problem:invalid-request"},
		"unknown field":    {tn, `{"channel":"alipay","amount":1}`, 400, "urn:paygw:problem:invalid-request"},
	} {
		r := h.attempt(c.tradeNo, c.body)
		if r.code != c.code || problemType(t, r) != c.typ {
			t.Errorf("%s: %d %s, want %d %s", name, r.code, r.body, c.code, c.typ)
		}
	}

	h.exec(`UPDATE orders SET status = 'PAID' WHERE trade_no = ?`, tn)
	if r := h.attempt(tn, `{"channel":"wechatpay"}`); r.code != 409 || problemType(t, r) != "urn:paygw:problem:order-not-payable" {
		t.Fatalf("attempt on a PAID order: %d %s", r.code, r.body)
	}
	if r := h.do("POST", "/v1/orders/"+tn+"/attempts", "", nil, `{"channel":"alipay"}`); r.code != 401 {
		t.Fatalf("without a token: %d", r.code)
	}
}

// POST /v1/orders takes the first attempt with the order, in the same transaction.
func TestCreateOrderWithAttempt(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 10, 1999)
	r := h.create(testToken, "with-attempt", `{"user_id":1,"sku":"A-100","num":1,"channel":"unionpay","channel_ref":"20261203153000"}`)
	wantCode(t, "create", r, 201)
	var o struct {
		TradeNo string `json:"trade_no"`
	}
	_ = json.Unmarshal([]byte(r.body), &o)
	if n := h.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND channel = 'unionpay' AND channel_ref = '20261203153000'`, o.TradeNo); n != 1 {
		t.Fatalf("attempts recorded with the order = %d, want 1", n)
	}
	if r := h.create(testToken, "bad-channel", `{"user_id":1,"sku":"A-100","num":1,"channel":"paypal"}`); r.code != 400 {
		t.Fatalf("disabled channel: %d %s", r.code, r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM orders`); n != 1 {
		t.Fatalf("orders = %d, want 1: a refused attempt makes no order", n)
	}
}
