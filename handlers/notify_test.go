package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/simulate"
)

const (
	alipaySuccess = "success"
	alipayFail    = "fail"
)

func wantReply(t *testing.T, r response, code int, body string) {
	t.Helper()
	if r.code != code || r.body != body {
		t.Fatalf("reply = %d %q, want %d %q", r.code, r.body, code, body)
	}
}

// rows counts what one trade_no left behind: records, journal rows, anomalies.
func (h *harness) rows(tradeNo string) (records, journal, anomalies int) {
	h.t.Helper()
	records = h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify' AND JSON_VALUE(result_json, '$.trade_no') = ?`, tradeNo)
	journal = h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ?`, tradeNo)
	anomalies = h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, tradeNo)
	return
}

func TestAlipayFirstPaymentThenRepeats(t *testing.T) {
	h := newHarness(t, options{})
	tradeNo := h.seedOrder(8888)
	p := simulate.AlipayPayment{TradeNo: tradeNo, AmountFen: 8888}
	body := alipayBody(t, p)

	wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	o := h.order(tradeNo)
	if o.Status != "PAID" || o.Channel != "alipay" || o.ChannelTxnID != "2026"+tradeNo || o.PaidTime == nil {
		t.Fatalf("order after payment = %+v", o)
	}
	firstUpdate := o.UpdateTime

	// Repeats: the same bytes again, a later retry with a new signature, TRADE_FINISHED for the
	// same Alipay transaction, and the same through a replica whose Redis is down.
	wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	wantReply(t, h.notifyAlipay(p), 200, alipaySuccess)
	wantReply(t, h.notifyAlipay(simulate.AlipayPayment{TradeNo: tradeNo, AmountFen: 8888, TradeStatus: "TRADE_FINISHED"}), 200, alipaySuccess)
	down := newHarness(t, options{dsn: h.dsn, redisDown: true})
	wantReply(t, down.post("/notify/alipay", body), 200, alipaySuccess)

	// One record; two journal rows: TRADE_SUCCESS applied, TRADE_FINISHED (a new notify id for
	// the same transaction) as a REPEAT.
	if rec, j, a := h.rows(tradeNo); rec != 1 || j != 2 || a != 0 {
		t.Fatalf("records, journal, anomalies = %d, %d, %d; want 1, 2, 0", rec, j, a)
	}
	if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'REPEAT' AND channel_status = 'TRADE_FINISHED'`, tradeNo); n != 1 {
		t.Fatalf("TRADE_FINISHED journalled %d times as REPEAT, want 1", n)
	}
	if o := h.order(tradeNo); o.UpdateTime != firstUpdate || o.Status != "PAID" {
		t.Fatalf("a repeat touched the order: %+v", o)
	}
}

func TestAlipayOutcomeTable(t *testing.T) {
	h := newHarness(t, options{})
	type want struct {
		code                        int
		body                        string
		status                      string // order status after
		records, journal, anomalies int
		anomalyKind                 string
	}
	paid := simulate.AlipayPayment{AmountFen: 1000}
	closed := simulate.AlipayPayment{AmountFen: 1000, TradeStatus: "TRADE_CLOSED"}
	cases := []struct {
		name    string
		unknown bool                     // a trade_no paygw never issued; otherwise a WAIT_PAY order of 10.00
		prior   *simulate.AlipayPayment  // notified first, to bring the order where the case starts
		send    []simulate.AlipayPayment // TradeNo is the case's order's
		want    want
	}{
		{
			name: "amount differs: untouched, AMOUNT_MISMATCH once",
			send: twice(simulate.AlipayPayment{AmountFen: 999}),
			want: want{200, alipaySuccess, "WAIT_PAY", 1, 1, 1, "AMOUNT_MISMATCH"},
		},
		{
			name:  "paid after close: untouched, PAID_AFTER_CLOSE once",
			prior: &closed,
			send:  twice(paid),
			want:  want{200, alipaySuccess, "CLOSED", 1, 2, 1, "PAID_AFTER_CLOSE"},
		},
		{
			name:  "second Alipay transaction for a PAID order: DUPLICATE_PAYMENT once",
			prior: &paid,
			send:  twice(simulate.AlipayPayment{AmountFen: 1000, AlipayTxn: "2099000000000000000001"}),
			want:  want{200, alipaySuccess, "PAID", 2, 2, 1, "DUPLICATE_PAYMENT"},
		},
		{
			name:    "unknown trade_no: nothing, retry",
			unknown: true,
			send:    []simulate.AlipayPayment{paid},
			want:    want{503, alipayFail, "", 0, 0, 0, ""},
		},
		{
			name:    "TRADE_CLOSED or a refund for an unknown trade_no: nothing, retry",
			unknown: true,
			send:    []simulate.AlipayPayment{closed, {AmountFen: 1000, RefundFen: 100}},
			want:    want{503, alipayFail, "", 0, 0, 0, ""},
		},
		{
			name: "TRADE_CLOSED for WAIT_PAY: closed",
			send: twice(closed),
			want: want{200, alipaySuccess, "CLOSED", 0, 1, 0, ""},
		},
		{
			name: "WAIT_BUYER_PAY: unchanged, journalled",
			send: []simulate.AlipayPayment{{AmountFen: 1000, TradeStatus: "WAIT_BUYER_PAY"}},
			want: want{200, alipaySuccess, "WAIT_PAY", 0, 1, 0, ""},
		},
		{
			name:  "refund notice (TRADE_SUCCESS with refund_fee): still paid once, journalled",
			prior: &paid,
			send:  []simulate.AlipayPayment{{AmountFen: 1000, RefundFen: 300, NotifyID: "refund-notice"}},
			want:  want{200, alipaySuccess, "PAID", 1, 2, 0, ""},
		},
		{
			name: "app_id not ours: refused",
			send: []simulate.AlipayPayment{{AmountFen: 1000, AppID: "2021999999999999"}},
			want: want{400, alipayFail, "WAIT_PAY", 0, 0, 0, ""},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := fmt.Sprintf("NOSUCHORDER%010d", i)
			if !tc.unknown {
				tn = h.seedOrder(1000)
			}
			if tc.prior != nil {
				p := *tc.prior
				p.TradeNo = tn
				wantReply(t, h.notifyAlipay(p), 200, alipaySuccess)
			}
			var last response
			for _, p := range tc.send {
				p.TradeNo = tn
				last = h.notifyAlipay(p)
			}
			wantReply(t, last, tc.want.code, tc.want.body)
			if tc.want.status != "" {
				if got := h.order(tn).Status; got != tc.want.status {
					t.Errorf("order status = %s, want %s", got, tc.want.status)
				}
			}
			rec, j, a := h.rows(tn)
			if rec != tc.want.records || j != tc.want.journal || a != tc.want.anomalies {
				t.Errorf("records, journal, anomalies = %d, %d, %d; want %d, %d, %d", rec, j, a,
					tc.want.records, tc.want.journal, tc.want.anomalies)
			}
			if tc.want.anomalyKind != "" {
				if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = ?`, tn, tc.want.anomalyKind); n != 1 {
					t.Errorf("%s anomalies = %d, want 1", tc.want.anomalyKind, n)
				}
			}
		})
	}
}

// twice is p sent twice: a channel's redelivery.
func twice(p simulate.AlipayPayment) []simulate.AlipayPayment { return []simulate.AlipayPayment{p, p} }

func TestAlipayRefusesWhatFailsVerification(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1000)
	valid := string(alipayBody(t, simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000}))
	other := mustKey()
	forged, err := simulate.AlipayBody(simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000, AppID: testAppID,
		AlipayTxn: "2026" + tn, NotifyID: "x", TradeStatus: "TRADE_SUCCESS"}, other)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"signed with another key": string(forged),
		"tampered amount":         strings.Replace(valid, "total_amount=10.00", "total_amount=0.01", 1),
		"tampered status":         strings.Replace(valid, "trade_status=TRADE_SUCCESS", "trade_status=TRADE_FINISHED", 1),
		"field added":             valid + "&fund_bill_list=x",
		"no signature":            strings.Split(valid, "&sign=")[0],
		"not a form":              "%zz%",
		"empty":                   "",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if body == valid {
				t.Fatal("the case does not change the body")
			}
			wantReply(t, h.post("/notify/alipay", []byte(body)), 400, alipayFail)
		})
	}
	if rec, j, a := h.rows(tn); rec+j+a != 0 || h.order(tn).Status != "WAIT_PAY" {
		t.Fatalf("a refused notification left rows: %d %d %d", rec, j, a)
	}
	// The valid one still works afterwards: refusals changed nothing.
	wantReply(t, h.post("/notify/alipay", []byte(valid)), 200, alipaySuccess)
}

func TestAlipayRetryWhenWeCannotFinish(t *testing.T) {
	t.Run("MySQL down", func(t *testing.T) {
		h := newHarness(t, options{closedDB: true})
		live := testenvOpen(t, h.dsn)
		tn := live.seedOrder(1000)
		wantReply(t, h.notifyAlipay(simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000}), 503, alipayFail)
		if live.order(tn).Status != "WAIT_PAY" {
			t.Fatal("order changed while MySQL was down")
		}
	})
	t.Run("guard held by a twin", func(t *testing.T) {
		h := newHarness(t, options{twinWait: 50 * time.Millisecond})
		tn := h.seedOrder(1000)
		lock, err := h.guard.Acquire(context.Background(), "trade:"+tn, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wantReply(t, h.notifyAlipay(simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000}), 503, alipayFail)
		if rec, j, _ := h.rows(tn); rec+j != 0 {
			t.Fatal("rows written while the twin held the guard")
		}
		lock.Release(context.Background())
		wantReply(t, h.notifyAlipay(simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000}), 200, alipaySuccess)
	})
	t.Run("body over the limit", func(t *testing.T) {
		h := newHarness(t, options{bodyLimit: 2048})
		r := h.post("/notify/alipay", []byte("a="+strings.Repeat("x", 4096)))
		if r.code != 413 {
			t.Fatalf("oversize body: %d %q", r.code, r.body)
		}
	})
}

// testenvOpen is a second view of a harness's database, for seeding while the harness's own
// pool is closed.
func testenvOpen(t *testing.T, dsn string) *harness {
	return newHarness(t, options{dsn: dsn})
}

func TestAlipayConcurrentStorm(t *testing.T) {
	for _, redisDown := range []bool{false, true} {
		name := "redis up"
		if redisDown {
			name = "redis down"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, options{redisDown: redisDown, twinWait: 5 * time.Second})
			tn := h.seedOrder(1999)
			body := alipayBody(t, simulate.AlipayPayment{TradeNo: tn, AmountFen: 1999})
			replies := together(50, func() response { return h.post("/notify/alipay", body) })
			for i, r := range replies {
				if r.code != 200 || r.body != alipaySuccess {
					t.Fatalf("reply %d = %d %q", i, r.code, r.body)
				}
			}
			if rec, j, a := h.rows(tn); rec != 1 || j != 1 || a != 0 {
				t.Fatalf("records, journal, anomalies = %d, %d, %d; want 1, 1, 0", rec, j, a)
			}
			if h.order(tn).Status != "PAID" {
				t.Fatal("order not paid")
			}
		})
	}
}
