package simulate_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

const alipayAppID = "2021000000000009"

func testAlipay(tb testing.TB) (*alipay.Channel, simulate.AlipaySigner) {
	tb.Helper()
	alipayKey := testenv.RSAKey(tb, "alipay")
	return alipay.New(alipayAppID, "", &alipayKey.PublicKey), simulate.AlipaySigner{AppID: alipayAppID, Key: alipayKey}
}

// TestAlipaySignerAgainstVerifier: each status, in each charset, comes out as the event the
// gateway expects; refunds carry their refund_fee (the running total) and out_biz_no.
func TestAlipaySignerAgainstVerifier(t *testing.T) {
	a, signer := testAlipay(t)
	now := time.Now()
	base := simulate.Payment{TradeNo: "T20260501-0001", AmountFen: 8888, Time: now}
	with := func(edit func(p *simulate.Payment)) simulate.Payment { p := base; edit(&p); return p }

	tests := map[string]struct {
		p          simulate.Payment
		kind       payment.Kind
		status     string
		refundID   string
		refundFen  int64
		wantInBody string // a form field as sent
	}{
		"paid":    {p: base, kind: payment.KindPaid, status: "TRADE_SUCCESS"},
		"pending": {p: with(func(p *simulate.Payment) { p.Status = simulate.StatusPending }), kind: payment.KindPending, status: "WAIT_BUYER_PAY"},
		"closed unpaid": {p: with(func(p *simulate.Payment) { p.Status = simulate.StatusClosed }), kind: payment.KindClosed,
			status: "TRADE_CLOSED"},
		"partial refund": {p: with(func(p *simulate.Payment) { p.Status, p.RefundFen, p.RefundID = simulate.StatusRefund, 1000, "R-1" }),
			kind: payment.KindRefund, status: "TRADE_SUCCESS", refundID: "R-1", refundFen: 1000, wantInBody: "refund_fee=10.00"},
		"second refund states the total": {
			p: with(func(p *simulate.Payment) {
				p.Status, p.RefundFen, p.RefundTotalFen, p.RefundID = simulate.StatusRefund, 500, 1500, "R-2"
			}),
			kind: payment.KindRefund, status: "TRADE_SUCCESS", refundID: "R-2", refundFen: 1500, wantInBody: "refund_fee=15.00"},
		"full refund closes the trade": {p: with(func(p *simulate.Payment) { p.Status, p.RefundID = simulate.StatusRefund, "R-3" }),
			kind: payment.KindRefund, status: "TRADE_CLOSED", refundID: "R-3", refundFen: 8888, wantInBody: "trade_status=TRADE_CLOSED"},
	}
	for name, tc := range tests {
		for _, charset := range []string{"", "GBK", "gb2312"} {
			t.Run(name+"/"+charset, func(t *testing.T) {
				s := signer
				s.Charset = charset
				msg, err := s.Sign(tc.p)
				if err != nil {
					t.Fatal(err)
				}
				ev, err := a.Verify(msg.Body, msg.Header, now)
				if err != nil {
					t.Fatalf("gateway refuses the simulator's notification: %v", err)
				}
				if ev.Kind != tc.kind || ev.Status != tc.status || ev.TradeNo != tc.p.TradeNo || ev.AmountFen != 8888 {
					t.Errorf("event %+v, want %s %s", ev, tc.kind, tc.status)
				}
				if ev.RefundID != tc.refundID || ev.RefundFen != tc.refundFen || ev.RefundIsTotal != (tc.kind == payment.KindRefund) {
					t.Errorf("refund %q %d total=%v, want %q %d", ev.RefundID, ev.RefundFen, ev.RefundIsTotal, tc.refundID, tc.refundFen)
				}
				if tc.wantInBody != "" && !strings.Contains(unescape(t, msg.Body), tc.wantInBody) {
					t.Errorf("body lacks %s: %s", tc.wantInBody, msg.Body)
				}
			})
		}
	}
}

func unescape(t *testing.T, body []byte) string {
	t.Helper()
	s, err := url.QueryUnescape(string(body))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAlipayBodyGBK: a GBK notification is sent and signed as GBK bytes, and its subject arrives
// intact; what GBK cannot hold is an error, not a mangled notification.
func TestAlipayBodyGBK(t *testing.T) {
	a, signer := testAlipay(t)
	alipayKey := signer.Key
	const subject = "测试商品：红茶 & 绿茶 100%"
	p := simulate.AlipayPayment{
		AppID: alipayAppID, TradeNo: "T20260501-0002", AlipayTxn: "2026050122001400000000000002", NotifyID: "n-gbk",
		AmountFen: 1230, TradeStatus: "TRADE_SUCCESS", Subject: subject, Charset: "GBK",
	}
	body, err := simulate.AlipayBody(p, alipayKey)
	if err != nil {
		t.Fatal(err)
	}
	gbk, err := simplifiedchinese.GBK.NewEncoder().String(subject)
	if err != nil {
		t.Fatal(err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if form.Get("subject") != gbk || form.Get("charset") != "GBK" {
		t.Fatalf("subject sent as %q (charset %q), want the GBK bytes %q", form.Get("subject"), form.Get("charset"), gbk)
	}
	ev, err := a.Verify(body, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Subject != subject {
		t.Errorf("Subject = %q, want %q", ev.Subject, subject)
	}

	p.Charset = "big5"
	if _, err := simulate.AlipayBody(p, alipayKey); err == nil {
		t.Error("an unknown charset was rendered")
	}
	p.Charset, p.Subject = "GBK", "emoji 🙂 has no GBK form"
	if _, err := simulate.AlipayBody(p, alipayKey); err == nil {
		t.Error("a subject GBK cannot hold was rendered")
	}
}
