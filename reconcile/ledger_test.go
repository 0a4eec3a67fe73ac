package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
)

// refund applies a refund statement as a channel's notification states it: its own amount under
// its id (WeChat, UnionPay, Stripe's refund objects), or the payment's running total, under the
// refund that caused it when the channel names one (Alipay's refund_fee with out_biz_no,
// Stripe's charge.refunded).
func (w *world) refund(channel, tradeNo, txn, refundID string, fen int64, total bool, want payment.Outcome) {
	w.t.Helper()
	w.apply(payment.Event{Channel: channel, NotifyID: fmt.Sprintf("n-%s-%s-%d", txn, refundID, fen), TradeNo: tradeNo, ChannelTxnID: txn,
		Kind: payment.KindRefund, Status: "refund", Currency: "CNY", RefundID: refundID, RefundFen: fen, RefundIsTotal: total,
		Raw: []byte(refundID)}, want)
}

// runCSV runs a bill of the given lines (the generic CSV format) for channel's day and returns
// its report.
func (w *world) runCSV(channel string, day time.Time, lines ...string) reconcile.BillReport {
	w.t.Helper()
	bill := "trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\n" + strings.Join(lines, "\n") + "\n"
	rep, err := w.job.MatchBill(context.Background(), channel, day, bills.NewCSV(strings.NewReader(bill)), reconcile.BillConfig{Location: time.UTC}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return rep
}

// refunded is an order's refunded_fen.
func (w *world) refunded(tradeNo string) int {
	w.t.Helper()
	return w.count(`SELECT refunded_fen FROM orders WHERE trade_no = ?`, tradeNo)
}

// wantCounts checks a report's classes (those named; others may be anything).
func wantCounts(t *testing.T, what string, rep reconcile.BillReport, want map[string]int) {
	t.Helper()
	for class, n := range want {
		if rep.Counts[class] != n {
			t.Errorf("%s: %s = %d, want %d (counts %v)", what, class, rep.Counts[class], n, rep.Counts)
		}
	}
}

// wantLedger checks a report's classes (wantCounts) and, after its run, the order's refunded_fen.
func (w *world) wantLedger(t *testing.T, what string, rep reconcile.BillReport, counts map[string]int, tradeNo string, refunded int) {
	t.Helper()
	wantCounts(t, what, rep, counts)
	if got := w.refunded(tradeNo); got != refunded {
		t.Fatalf("%s: refunded_fen = %d, want %d", what, got, refunded)
	}
}

// Issue 20, case 1: Alipay's refund_fee and Stripe's amount_refunded are running totals, and a
// bill lists each refund's own amount. A charge refunded twice (3.00 then 2.00) whose first
// notification is still being retried: the bill's lines must not add 3.00 and 2.00 on top of the
// 5.00 the second notification states. Nor may the late first notification, nor a re-run.
func TestIssue20Case01BillNeverCountsARefundTwice(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -5).Truncate(24 * time.Hour)
	at := day.Add(10 * time.Hour).Format(time.RFC3339)

	t.Run("alipay running totals, then the bill's refunds", func(t *testing.T) {
		tn := w.paidOrder("A1", 1000, day.Add(9*time.Hour))
		w.refund("alipay", tn, "A1", "R2", 500, true, payment.OutcomeRefunded) // R1's notice (total 300) still retried
		lines := []string{fmt.Sprintf("%s,A1,PAY,1000,CNY,%s,", tn, at),
			fmt.Sprintf("%s,A1,REFUND,300,CNY,%s,R1", tn, at), fmt.Sprintf("%s,A1,REFUND,200,CNY,%s,R2", tn, at)}
		rep := w.runCSV("alipay", day, lines...)
		w.wantLedger(t, "first run", rep, map[string]int{reconcile.ClassRefundChannelOnly: 1, reconcile.ClassRefundMatched: 1,
			reconcile.ClassRefundAmountMismatch: 0}, tn, 500)
		w.refund("alipay", tn, "A1", "R1", 300, true, payment.OutcomeRefunded) // the late notice of the older total
		rep = w.runCSV("alipay", day, lines...)
		w.wantLedger(t, "re-run", rep, map[string]int{reconcile.ClassRefundMatched: 2, reconcile.ClassRefundChannelOnly: 0,
			reconcile.ClassRefundAmountMismatch: 0}, tn, 500)
	})
	t.Run("stripe amount_refunded, then the bill's refund", func(t *testing.T) {
		tn := w.order("stripe", 1000)
		w.apply(payment.Event{Channel: "stripe", NotifyID: "n-S1", TradeNo: tn, ChannelTxnID: "pi_S1", Kind: payment.KindPaid,
			Status: "payment_intent.succeeded", AmountFen: 1000, Currency: "CNY", PaidAt: day.Add(9 * time.Hour), Raw: []byte("S1")}, payment.OutcomeApplied)
		w.refund("stripe", tn, "pi_S1", "", 500, true, payment.OutcomeRefunded) // charge.refunded listing no refund
		lines := []string{fmt.Sprintf("%s,pi_S1,PAY,1000,CNY,%s,", tn, at), fmt.Sprintf("%s,pi_S1,REFUND,500,CNY,%s,re_1", tn, at)}
		for run := 1; run <= 2; run++ {
			rep := w.runCSV("stripe", day, lines...)
			if got := w.refunded(tn); got != 500 {
				t.Fatalf("run %d: refunded_fen = %d, want 500 (counts %v)", run, got, rep.Counts)
			}
		}
	})
	t.Run("the refund of a duplicate payment matches its bill line", func(t *testing.T) {
		tn := w.paidOrder("D1", 1000, day.Add(9*time.Hour))
		w.apply(payment.Event{Channel: "alipay", NotifyID: "n-D2", TradeNo: tn, ChannelTxnID: "D2", Kind: payment.KindPaid,
			Status: "TRADE_SUCCESS", AmountFen: 1000, Currency: "CNY", PaidAt: day.Add(9 * time.Hour), Raw: []byte("D2")}, payment.OutcomeDuplicatePayment)
		w.refund("alipay", tn, "D2", "RD", 1000, false, payment.OutcomeAnomalyRefunded)
		rep := w.runCSV("alipay", day, fmt.Sprintf("%s,D2,REFUND,1000,CNY,%s,RD", tn, at))
		wantCounts(t, "run", rep, map[string]int{reconcile.ClassRefundMatched: 1, reconcile.ClassRefundAmountMismatch: 0})
	})
}

// Issue 20, case 2: two refunds of 0.30 that the bill lists without refund ids are two refunds
// (the repair was keyed bill:<txn>:<amount> and counted one), and a bill without ids matches
// refunds paygw learnt by their ids one for one.
func TestIssue20Case02EqualRefundsWithoutIDsCountTwice(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -5).Truncate(24 * time.Hour)
	at := day.Add(10 * time.Hour).Format(time.RFC3339)

	t.Run("only the bill knows them", func(t *testing.T) {
		tn := w.paidOrder("E1", 100, day.Add(9*time.Hour))
		lines := []string{fmt.Sprintf("%s,E1,REFUND,30,CNY,%s,", tn, at), fmt.Sprintf("%s,E1,REFUND,30,CNY,%s,", tn, at)}
		rep := w.runCSV("alipay", day, lines...)
		w.wantLedger(t, "first run", rep, map[string]int{reconcile.ClassRefundChannelOnly: 2, reconcile.ClassRefundMatched: 0}, tn, 60)
		rep = w.runCSV("alipay", day, lines...)
		w.wantLedger(t, "re-run", rep, map[string]int{reconcile.ClassRefundChannelOnly: 0, reconcile.ClassRefundMatched: 2}, tn, 60)
	})
	t.Run("notifications named them, the bill does not", func(t *testing.T) {
		tn := w.order("wechatpay", 100)
		w.apply(payment.Event{Channel: "wechatpay", NotifyID: "n-W1", TradeNo: tn, ChannelTxnID: "W1", Kind: payment.KindPaid,
			Status: "SUCCESS", AmountFen: 100, Currency: "CNY", PaidAt: day.Add(9 * time.Hour), Raw: []byte("W1")}, payment.OutcomeApplied)
		w.refund("wechatpay", tn, "W1", "WR1", 30, false, payment.OutcomeRefunded)
		lines := []string{fmt.Sprintf("%s,W1,REFUND,30,CNY,%s,", tn, at), fmt.Sprintf("%s,W1,REFUND,30,CNY,%s,", tn, at)}
		rep := w.runCSV("wechatpay", day, lines...)
		wantCounts(t, "first run", rep, map[string]int{reconcile.ClassRefundMatched: 1, reconcile.ClassRefundChannelOnly: 1})
		w.refund("wechatpay", tn, "W1", "WR2", 30, false, payment.OutcomeRefunded) // the second one's notice, late: the bill's
		if got := w.refunded(tn); got != 60 {
			t.Fatalf("refunded_fen = %d, want 60", got)
		}
		rep = w.runCSV("wechatpay", day, lines...)
		wantCounts(t, "re-run", rep, map[string]int{reconcile.ClassRefundMatched: 2, reconcile.ClassRefundChannelOnly: 0})
		if got, rows := w.refunded(tn), w.count(`SELECT COUNT(*) FROM refund WHERE channel_txn_id = 'W1'`); got != 60 || rows != 2 {
			t.Fatalf("refunded_fen = %d over %d ledger rows, want 60 over 2", got, rows)
		}
	})
}
