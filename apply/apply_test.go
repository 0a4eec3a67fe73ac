package apply_test

import (
	"context"
	"testing"
	"time"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// fixture is one fresh database and an Applier on it: Apply called directly, no HTTP, no channel.
type fixture struct {
	t   *testing.T
	dsn string
	db  *repository.DB
	a   *apply.Applier
}

func newFixture(t *testing.T, redisUp bool) *fixture {
	t.Helper()
	f := &fixture{t: t, dsn: testenv.NewDatabase(t)}
	f.db = testenv.Open(t, f.dsn)
	g := testenv.DeadGuard(t)
	if redisUp {
		g = testenv.Guard(t)
	}
	f.a = apply.New(f.db, g, 5*time.Second, testenv.Logger(t))
	return f
}

// order inserts a WAIT_PAY order of fen CNY and returns its trade_no.
func (f *fixture) order(fen int64) string {
	f.t.Helper()
	tradeNo := "T" + testenv.Random(8)
	err := f.db.InTx(context.Background(), func(tx *repository.Tx) error {
		return tx.InsertOrder(context.Background(), payment.Order{
			TradeNo: tradeNo, UserID: 1, SKU: "S", Num: 1, AmountFen: fen, Currency: "CNY",
			CreateTime: time.Now().UTC().Truncate(time.Millisecond),
		}, "", "", "")
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return tradeNo
}

// apply applies ev and insists on the outcome.
func (f *fixture) apply(ev payment.Event, want payment.Outcome) {
	f.t.Helper()
	got, err := f.a.Apply(context.Background(), ev)
	if err != nil || got != want {
		f.t.Fatalf("Apply(%s %s %s) = %q, %v; want %q", ev.Kind, ev.TradeNo, ev.NotifyID, got, err, want)
	}
}

func (f *fixture) get(tradeNo string) payment.Order {
	f.t.Helper()
	o, err := f.db.GetOrder(context.Background(), tradeNo)
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	return testenv.Count(f.t, f.dsn, query, args...)
}

// paid is a payment of fen CNY for tradeNo under channel transaction txn.
func paid(tradeNo, txn string, fen int64) payment.Event {
	return payment.Event{
		Channel: "alipay", NotifyID: "n-" + txn, TradeNo: tradeNo, ChannelTxnID: txn, Kind: payment.KindPaid,
		Status: "TRADE_SUCCESS", AmountFen: fen, Currency: "cny", Raw: []byte("paid " + txn),
	}
}

// refunded is a refund of fen (a running total when total) of the payment txn.
func refunded(tradeNo, txn, refundID string, fen int64, total bool) payment.Event {
	return payment.Event{
		Channel: "alipay", NotifyID: "n-" + refundID, TradeNo: tradeNo, ChannelTxnID: txn, Kind: payment.KindRefund,
		Status: "TRADE_SUCCESS", Currency: "CNY", RefundID: refundID, RefundFen: fen, RefundIsTotal: total,
		Raw: []byte("refund " + refundID),
	}
}

func event(kind payment.Kind, tradeNo, notifyID string) payment.Event {
	return payment.Event{Channel: "alipay", NotifyID: notifyID, TradeNo: tradeNo, ChannelTxnID: "x" + notifyID,
		Kind: kind, Status: string(kind), Currency: "CNY", Raw: []byte(notifyID)}
}

// TestOutcomeTable walks every row of the outcome table through Apply on a real database, with
// Redis up and with Redis down: the outcome, what changed, and that the repeat changes nothing.
func TestOutcomeTable(t *testing.T) {
	for _, redis := range []struct {
		name string
		up   bool
	}{{"redis up", true}, {"redis down", false}} {
		t.Run(redis.name, func(t *testing.T) {
			t.Run("payment applied, then repeated", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeRepeat)
				again := paid(tn, "P1", 1000)
				again.NotifyID, again.Status = "n-finished", "TRADE_FINISHED" // same payment, new notice
				f.apply(again, payment.OutcomeRepeat)
				if o := f.get(tn); o.Status != payment.OrderPaid || o.ChannelTxnID != "P1" || o.PaidTime == nil {
					t.Fatalf("order = %+v", o)
				}
				if n := f.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 1 {
					t.Fatalf("pay_notify records = %d, want 1", n)
				}
				if n := f.count(`SELECT COUNT(*) FROM notify_journal`); n != 2 {
					t.Fatalf("journal rows = %d, want 2 (two notify ids)", n)
				}
			})
			t.Run("amount mismatch and other currency: anomaly, order untouched", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 999), payment.OutcomeAmountMismatch)
				usd := paid(tn, "P2", 1000)
				usd.Currency = "USD"
				f.apply(usd, payment.OutcomeAmountMismatch)
				if o := f.get(tn); o.Status != payment.OrderWaitPay {
					t.Fatalf("order = %s, want WAIT_PAY", o.Status)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'AMOUNT_MISMATCH' AND status = 'open'`); n != 2 {
					t.Fatalf("open AMOUNT_MISMATCH anomalies = %d, want 2", n)
				}
			})
			t.Run("paid after close", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeClosed)
				f.apply(paid(tn, "P1", 1000), payment.OutcomePaidAfterClose)
				if o := f.get(tn); o.Status != payment.OrderClosed {
					t.Fatalf("order = %s, want CLOSED", o.Status)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'PAID_AFTER_CLOSE'`); n != 1 {
					t.Fatalf("PAID_AFTER_CLOSE anomalies = %d", n)
				}
			})
			t.Run("duplicate payment", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
				f.apply(paid(tn, "P2", 1000), payment.OutcomeRepeat)
				if o := f.get(tn); o.ChannelTxnID != "P1" {
					t.Fatalf("order paid by %s, want P1", o.ChannelTxnID)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT'`); n != 1 {
					t.Fatalf("DUPLICATE_PAYMENT anomalies = %d, want 1", n)
				}
			})
			t.Run("close of a paid order, pending and other: journalled", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(event(payment.KindPending, tn, "pending-1"), payment.OutcomeJournalled)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeJournalled)
				f.apply(event(payment.KindOther, "", "other-1"), payment.OutcomeJournalled)
				if o := f.get(tn); o.Status != payment.OrderPaid {
					t.Fatalf("order = %s, want PAID", o.Status)
				}
			})
			t.Run("unknown order: nothing written, retried", func(t *testing.T) {
				f := newFixture(t, redis.up)
				f.apply(paid("NOSUCH", "P1", 1000), payment.OutcomeUnknownOrder)
				f.apply(event(payment.KindClosed, "NOSUCH", "close-1"), payment.OutcomeUnknownOrder)
				f.apply(refunded("NOSUCH", "P1", "R1", 100, false), payment.OutcomeUnknownOrder)
				for _, table := range []string{"idempotent_record", "notify_journal", "refund", "anomaly"} {
					if n := f.count(`SELECT COUNT(*) FROM ` + table); n != 0 {
						t.Fatalf("%s rows = %d after unknown orders, want 0", table, n)
					}
				}
			})
			t.Run("refund applied once, then repeated", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(refunded(tn, "P1", "R1", 300, false), payment.OutcomeRefunded)
				f.apply(refunded(tn, "P1", "R1", 300, false), payment.OutcomeRepeat)
				f.apply(refunded(tn, "P1", "R2", 200, false), payment.OutcomeRefunded)
				if o := f.get(tn); o.RefundedFen != 500 || o.Status != payment.OrderPaid {
					t.Fatalf("order refunded_fen = %d status %s, want 500 PAID", o.RefundedFen, o.Status)
				}
				if n := f.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'refund_notify'`); n != 2 {
					t.Fatalf("refund_notify records = %d, want 2", n)
				}
			})
			t.Run("running totals: out of order, counted once", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(refunded(tn, "P1", "R2", 800, true), payment.OutcomeRefunded) // the later total first
				f.apply(refunded(tn, "P1", "R1", 300, true), payment.OutcomeRefunded) // the older total adds nothing
				if o := f.get(tn); o.RefundedFen != 800 {
					t.Fatalf("refunded_fen = %d, want 800", o.RefundedFen)
				}
				if n := f.count(`SELECT SUM(amount_fen) FROM refund`); n != 800 {
					t.Fatalf("refund amounts add to %d, want 800", n)
				}
			})
			t.Run("refund exceeding the payment: anomaly, order untouched", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(refunded(tn, "P1", "R1", 600, false), payment.OutcomeRefunded)
				f.apply(refunded(tn, "P1", "R2", 600, false), payment.OutcomeRefundExceedsPayment)
				f.apply(refunded(tn, "P1", "R2", 600, false), payment.OutcomeRepeat)
				if o := f.get(tn); o.RefundedFen != 600 {
					t.Fatalf("refunded_fen = %d, want 600", o.RefundedFen)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'REFUND_EXCEEDS_PAYMENT' AND channel_txn_id = 'R2'`); n != 1 {
					t.Fatalf("REFUND_EXCEEDS_PAYMENT anomalies = %d, want 1", n)
				}
				if n := f.count(`SELECT COUNT(*) FROM refund WHERE refund_id = 'R2' AND status = 'REFUSED' AND amount_fen = 0`); n != 1 {
					t.Fatalf("refused refund rows = %d, want 1", n)
				}
			})
			t.Run("refund of a duplicate payment: anomaly marked refunded", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
				f.apply(refunded("", "P2", "R1", 1000, false), payment.OutcomeAnomalyRefunded)
				f.apply(refunded("", "P2", "R1", 1000, false), payment.OutcomeRepeat)
				if o := f.get(tn); o.RefundedFen != 0 {
					t.Fatalf("refunded_fen = %d, want 0: the order's own payment was not refunded", o.RefundedFen)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`); n != 1 {
					t.Fatalf("refunded anomalies = %d, want 1", n)
				}
				if n := f.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'ANOMALY_REFUNDED'`, tn); n != 1 {
					t.Fatalf("refund journalled against its order %d times, want 1", n)
				}
			})
			t.Run("refund before its payment: pending, counted when the payment applies", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(refunded(tn, "P1", "R1", 1000, true), payment.OutcomeRefundPending)
				if o := f.get(tn); o.Status != payment.OrderWaitPay || o.RefundsPending != 1 {
					t.Fatalf("order = %s with %d pending, want WAIT_PAY with 1", o.Status, o.RefundsPending)
				}
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				o := f.get(tn)
				if o.Status != payment.OrderPaid || o.RefundedFen != 1000 || o.RefundsPending != 0 {
					t.Fatalf("order = %+v, want PAID, refunded 1000, none pending", o)
				}
				if n := f.count(`SELECT COUNT(*) FROM refund WHERE status = 'APPLIED' AND amount_fen = 1000`); n != 1 {
					t.Fatalf("applied refunds = %d, want 1", n)
				}
				f.apply(refunded(tn, "P1", "R1", 1000, true), payment.OutcomeRepeat)
			})
			t.Run("refund before a duplicate payment: anomaly marked refunded", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
				f.apply(refunded(tn, "P2", "R2", 1000, false), payment.OutcomeRefundPending)
				f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
				o := f.get(tn)
				if o.RefundedFen != 0 || o.RefundsPending != 0 {
					t.Fatalf("order = %+v, want nothing refunded, none pending", o)
				}
				if n := f.count(`SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`); n != 1 {
					t.Fatalf("refunded anomalies = %d, want 1", n)
				}
				if n := f.count(`SELECT COUNT(*) FROM refund WHERE status = 'ANOMALY'`); n != 1 {
					t.Fatalf("refunds settled against the anomaly = %d, want 1", n)
				}
			})
			t.Run("refund naming nothing of ours: journalled as other", func(t *testing.T) {
				f := newFixture(t, redis.up)
				f.apply(refunded("", "pi_unknown", "ch_1:500", 500, true), payment.OutcomeJournalled)
				if n := f.count(`SELECT COUNT(*) FROM notify_journal WHERE event = 'OTHER'`); n != 1 {
					t.Fatalf("journalled as other %d times, want 1", n)
				}
				if n := f.count(`SELECT COUNT(*) FROM refund`); n != 0 {
					t.Fatalf("refund rows = %d, want 0", n)
				}
			})
			t.Run("unsure trade_no counts only when it names an order", func(t *testing.T) {
				f := newFixture(t, redis.up)
				tn := f.order(1000)
				ev := paid(tn, "P1", 1000)
				ev.TradeNoUnsure = true
				f.apply(ev, payment.OutcomeApplied)
				stranger := paid("someone_elses_id", "P9", 1000)
				stranger.TradeNoUnsure = true
				f.apply(stranger, payment.OutcomeJournalled)
				if n := f.count(`SELECT COUNT(*) FROM notify_journal WHERE event = 'OTHER' AND trade_no = ''`); n != 1 {
					t.Fatalf("stranger journalled as other %d times, want 1", n)
				}
			})
		})
	}
}

// A refund event without the channel's refund id is a channel bug: retried, never dropped.
func TestRefundWithoutIDIsRetried(t *testing.T) {
	f := newFixture(t, true)
	tn := f.order(1000)
	f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
	if _, err := f.a.Apply(context.Background(), refunded(tn, "P1", "", 100, false)); err == nil {
		t.Fatal("a refund without an id was accepted")
	}
}
