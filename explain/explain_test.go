package explain_test

import (
	"slices"
	"testing"
	"time"

	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/payment"
)

var t0 = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func ptr[T any](v T) *T { return &v }

func order(status string) payment.Order {
	return payment.Order{TradeNo: "T1", AmountFen: 1999, Currency: "CNY", Status: status, CreateTime: t0}
}

func asked(channel string, minute int, answer, status string) payment.Attempt {
	return payment.Attempt{TradeNo: "T1", Channel: channel, CreatedTime: at(1), QueryCount: 2, LastQueryAt: ptr(at(minute)),
		LastAnswer: answer, LastStatus: status}
}

// Every summary Of can give, each from the record that leads to it.
func TestSummary(t *testing.T) {
	paid := order(payment.OrderPaid)
	paid.Channel, paid.ChannelTxnID, paid.PaidTime = "alipay", "2026120322001", ptr(at(5))
	paidNoTime := paid
	paidNoTime.PaidTime = nil
	refunded := paid
	refunded.RefundedFen = 500
	mismatch := payment.Anomaly{Kind: payment.OutcomeAmountMismatch, Status: payment.AnomalyOpen, Detail: "paid 1.00 CNY, order 19.99 CNY", CreatedTime: at(3)}
	afterClose := payment.Anomaly{Kind: payment.OutcomePaidAfterClose, Status: payment.AnomalyOpen, CreatedTime: at(3)}
	resolved := afterClose
	resolved.Status = payment.AnomalyRefunded
	refusals := []explain.Refusal{
		{At: at(9), Channel: "wechatpay", Reason: "signature does not verify"},
		{At: at(8), Channel: "alipay", Reason: "sign_type"},
		{At: at(7), Channel: "wechatpay", Reason: "signature does not verify"},
	}

	for name, c := range map[string]struct {
		r    explain.Record
		want string
	}{
		"paid": {explain.Record{Order: paid},
			"Paid through alipay (transaction 2026120322001) at 2026-12-03T08:05:00Z."},
		"paid, no paid time": {explain.Record{Order: paidNoTime},
			"Paid through alipay (transaction 2026120322001)."},
		"paid, part refunded": {explain.Record{Order: refunded},
			"Paid through alipay (transaction 2026120322001) at 2026-12-03T08:05:00Z; 5.00 CNY of it refunded."},
		"paid, an open anomaly does not matter": {explain.Record{Order: paid, Anomalies: []payment.Anomaly{mismatch}},
			"Paid through alipay (transaction 2026120322001) at 2026-12-03T08:05:00Z."},
		"closed": {explain.Record{Order: order(payment.OrderClosed)},
			"Closed without a payment."},
		"closed, paid after the close": {explain.Record{Order: order(payment.OrderClosed), Anomalies: []payment.Anomaly{afterClose}},
			"Closed, but a payment arrived after the close and needs a person (PAID_AFTER_CLOSE)."},
		"closed, paid after the close, refunded": {explain.Record{Order: order(payment.OrderClosed), Anomalies: []payment.Anomaly{resolved}},
			"Closed without a payment."},
		"amount mismatch": {explain.Record{Order: order(payment.OrderWaitPay), Anomalies: []payment.Anomaly{mismatch}, Refusals: refusals},
			"Not paid: a payment arrived but does not match the order (paid 1.00 CNY, order 19.99 CNY)."},
		"refused, the latest group first": {explain.Record{Order: order(payment.OrderWaitPay), Refusals: refusals,
			Attempts: []payment.Attempt{asked("alipay", 4, "NOT_PAID", "WAIT_BUYER_PAY")}},
			"Not paid: 2 notification(s) from wechatpay refused: signature does not verify, last at 2026-12-03T08:09:00Z. Check that channel's keys in the configuration."},
		"asked, the latest answer": {explain.Record{Order: order(payment.OrderWaitPay), Attempts: []payment.Attempt{
			asked("alipay", 6, "NOT_PAID", "WAIT_BUYER_PAY"), {TradeNo: "T1", Channel: "stripe", CreatedTime: at(2)},
			asked("wechatpay", 4, "NOT_PAID", "NOTPAY")}},
			"Not paid: alipay answered NOT_PAID (WAIT_BUYER_PAY) when asked at 2026-12-03T08:06:00Z."},
		"sent, never asked": {explain.Record{Order: order(payment.OrderWaitPay), Attempts: []payment.Attempt{
			{TradeNo: "T1", Channel: "alipay", CreatedTime: at(1)}, {TradeNo: "T1", Channel: "stripe", CreatedTime: at(2)}}},
			"Not paid: the buyer was sent to alipay, stripe; no notification has come and no channel was asked yet."},
		"nothing": {explain.Record{Order: order(payment.OrderWaitPay)},
			"Not paid: no notification has come, and no payment attempt is recorded."},
	} {
		t.Run(name, func(t *testing.T) {
			if got := explain.Of(c.r).Summary; got != c.want {
				t.Fatalf("summary\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// The facts: one per source row, in the words of each kind, oldest first.
func TestFacts(t *testing.T) {
	r := explain.Record{
		Order: order(payment.OrderWaitPay),
		Attempts: []payment.Attempt{
			{TradeNo: "T1", Channel: "stripe", ChannelRef: "pi_1", CreatedTime: at(2)},
			asked("alipay", 6, "NOT_PAID", "WAIT_BUYER_PAY"),
		},
		Notifications: []payment.Notification{{Channel: "alipay", Source: payment.SourceNotify, ChannelStatus: "TRADE_SUCCESS",
			AmountFen: 100, Currency: "CNY", Outcome: payment.OutcomeAmountMismatch, ReceivedTime: at(3)}},
		Anomalies: []payment.Anomaly{{Kind: payment.OutcomeAmountMismatch, Status: payment.AnomalyOpen, Detail: "paid 1.00 CNY", CreatedTime: at(3)}},
		Refunds: []payment.Refund{
			{Channel: "alipay", Kind: payment.RefundTotal, ChannelTxnID: "P1", AmountFen: ptr(int64(50)), Currency: "CNY", Status: payment.RefundPending, CreatedTime: at(7)},
			{Channel: "stripe", Kind: payment.RefundItem, RefundID: "re_1", AmountFen: nil, Currency: "JPY", Status: payment.RefundPending, CreatedTime: at(8)},
			{Channel: "stripe", Kind: payment.RefundItem, RefundID: "re_2", AmountFen: ptr(int64(500)), Currency: "JPY", Status: payment.RefundApplied, CreatedTime: at(9)},
		},
		Refusals: []explain.Refusal{
			{At: at(11), Channel: "wechatpay", Reason: "bad signature"},
			{At: at(10), Channel: "wechatpay", Reason: "bad signature"},
		},
	}
	want := []explain.Fact{
		{At: t0, Source: "order", Text: "order created for 19.99 CNY"},
		{At: at(1), Source: "attempt", Text: "buyer sent to alipay"},
		{At: at(2), Source: "attempt", Text: "buyer sent to stripe (pi_1)"},
		{At: at(3), Source: "notify", Text: "alipay TRADE_SUCCESS 1.00 CNY: AMOUNT_MISMATCH"},
		{At: at(3), Source: "anomaly", Text: "AMOUNT_MISMATCH (open): paid 1.00 CNY"},
		{At: at(6), Source: "query", Text: "asked alipay (2 time(s)): NOT_PAID WAIT_BUYER_PAY"},
		{At: at(7), Source: "refund", Text: "alipay says 0.50 CNY of payment P1 refunded in all: PENDING"},
		{At: at(8), Source: "refund", Text: "stripe refund re_1, its amount not stated yet: PENDING"},
		{At: at(9), Source: "refund", Text: "stripe refund re_2 of 500 JPY: APPLIED"},
		{At: at(11), Source: "refused", Text: "2 notification(s) from wechatpay refused: bad signature, last at 2026-12-03T08:11:00Z"},
	}
	if got := explain.Of(r).Facts; !slices.Equal(got, want) {
		t.Fatalf("facts:\n%s\nwant:\n%s", show(got), show(want))
	}
}

func show(fs []explain.Fact) string {
	var s string
	for _, f := range fs {
		s += f.At.Format(time.TimeOnly) + " " + f.Source + ": " + f.Text + "\n"
	}
	return s
}

// Amounts are rendered from minor units exactly, in the currency's own exponent.
func TestMoney(t *testing.T) {
	for name, c := range map[string]struct {
		fen      int64
		currency string
		want     string
	}{
		"CNY":          {1999, "CNY", "order created for 19.99 CNY"},
		"zero":         {0, "CNY", "order created for 0.00 CNY"},
		"under a yuan": {5, "USD", "order created for 0.05 USD"},
		"negative":     {-150, "CNY", "order created for -1.50 CNY"},
		"JPY":          {1999, "JPY", "order created for 1999 JPY"},
		"KRW":          {500, "KRW", "order created for 500 KRW"},
		"KWD (three)":  {1234, "KWD", "order created for 1.234 KWD"},
		"ISK (none)":   {1000, "ISK", "order created for 1000 ISK"},
		"large":        {123456789012, "CNY", "order created for 1234567890.12 CNY"},
	} {
		t.Run(name, func(t *testing.T) {
			o := order(payment.OrderWaitPay)
			o.AmountFen, o.Currency = c.fen, c.currency
			if got := explain.Of(explain.Record{Order: o}).Facts[0].Text; got != c.want {
				t.Fatalf("%q, want %q", got, c.want)
			}
		})
	}
}
