package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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
	return testenv.InsertOrder(f.t, f.db, "T"+testenv.Random(8), fen)
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
	return testenv.GetOrder(f.t, f.db, tradeNo)
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

// state is everything an event can change: each table's rows, each order's status, payment and
// refunded_fen, and each refund and anomaly row. A repeat must leave it as it was.
func (f *fixture) state() string {
	f.t.Helper()
	db, err := sql.Open("mysql", f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, table := range []string{"idempotent_record", "notify_journal", "orders", "refund", "anomaly", "event"} {
		rows, err := db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		if err != nil {
			f.t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				f.t.Fatal(err)
			}
			b.WriteString(table)
			for _, v := range vals {
				fmt.Fprintf(&b, " %q", v)
			}
			b.WriteByte('\n')
		}
		if err := rows.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	return b.String()
}

// repeat applies ev, insists on REPEAT, and that nothing at all changed.
func (f *fixture) repeat(ev payment.Event) {
	f.t.Helper()
	before := f.state()
	f.apply(ev, payment.OutcomeRepeat)
	if after := f.state(); after != before {
		f.t.Fatalf("the repeat of %s %s changed the database:\nbefore:\n%s\nafter:\n%s", ev.Kind, ev.NotifyID, before, after)
	}
}

// want checks one count.
func (f *fixture) want(what string, want int, query string, args ...any) {
	f.t.Helper()
	if n := f.count(query, args...); n != want {
		f.t.Fatalf("%s = %d, want %d", what, n, want)
	}
}

// wantOrder checks an order's status, payment and refunded_fen.
func (f *fixture) wantOrder(tradeNo, status, txn string, refunded int64) {
	f.t.Helper()
	o := f.get(tradeNo)
	if o.Status != status || o.ChannelTxnID != txn || o.RefundedFen != refunded {
		f.t.Fatalf("order %s %s by %q refunded %d; want %s by %q refunded %d", tradeNo, o.Status, o.ChannelTxnID, o.RefundedFen,
			status, txn, refunded)
	}
}

// TestOutcomeTable walks every row of the README's outcome table through Apply on a real
// database, with Redis up and with Redis down: the outcome, what changed, and that each repeat
// changes nothing at all (every row of every table an event can touch is compared).
func TestOutcomeTable(t *testing.T) {
	cases := []struct {
		name string
		run  func(f *fixture)
	}{
		{"payment applied, then repeated", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.repeat(paid(tn, "P1", 1000))
			again := paid(tn, "P1", 1000)
			again.NotifyID, again.Status = "n-finished", "TRADE_FINISHED" // same payment, new notice: journalled
			f.apply(again, payment.OutcomeRepeat)
			f.repeat(again)
			f.wantOrder(tn, payment.OrderPaid, "P1", 0)
			f.want("pay_notify records", 1, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`)
			f.want("journal rows", 2, `SELECT COUNT(*) FROM notify_journal`)
		}},
		{"amount mismatch and other currency: anomaly, order untouched", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 999), payment.OutcomeAmountMismatch)
			usd := paid(tn, "P2", 1000)
			usd.Currency = "USD"
			f.apply(usd, payment.OutcomeAmountMismatch)
			f.repeat(paid(tn, "P1", 999))
			f.repeat(usd)
			f.wantOrder(tn, payment.OrderWaitPay, "", 0)
			f.want("open AMOUNT_MISMATCH anomalies", 2, `SELECT COUNT(*) FROM anomaly WHERE kind = 'AMOUNT_MISMATCH' AND status = 'open'`)
		}},
		{"paid after close", func(f *fixture) {
			tn := f.order(1000)
			f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeClosed)
			f.apply(paid(tn, "P1", 1000), payment.OutcomePaidAfterClose)
			f.repeat(paid(tn, "P1", 1000))
			f.wantOrder(tn, payment.OrderClosed, "", 0)
			f.want("PAID_AFTER_CLOSE anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'PAID_AFTER_CLOSE'`)
		}},
		{"duplicate payment", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
			f.repeat(paid(tn, "P2", 1000))
			f.wantOrder(tn, payment.OrderPaid, "P1", 0)
			f.want("DUPLICATE_PAYMENT anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT'`)
		}},
		{"close of a WAIT_PAY order", func(f *fixture) {
			tn := f.order(1000)
			f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeClosed)
			f.wantOrder(tn, payment.OrderClosed, "", 0)
		}},
		{"close of a paid order, pending and other: journalled", func(f *fixture) {
			tn := f.order(1000)
			f.apply(event(payment.KindPending, tn, "pending-1"), payment.OutcomeJournalled)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeJournalled)
			f.apply(event(payment.KindOther, "", "other-1"), payment.OutcomeJournalled)
			f.wantOrder(tn, payment.OrderPaid, "P1", 0)
			f.want("journal rows", 4, `SELECT COUNT(*) FROM notify_journal`)
		}},
		{"unknown order: nothing written, retried", func(f *fixture) {
			f.apply(paid("NOSUCH", "P1", 1000), payment.OutcomeUnknownOrder)
			f.apply(event(payment.KindClosed, "NOSUCH", "close-1"), payment.OutcomeUnknownOrder)
			f.apply(refunded("NOSUCH", "P1", "R1", 100, false), payment.OutcomeUnknownOrder)
			for _, table := range []string{"idempotent_record", "notify_journal", "refund", "anomaly"} {
				f.want(table+" rows after unknown orders", 0, `SELECT COUNT(*) FROM `+table)
			}
		}},
		{"refund applied once, then repeated", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(refunded(tn, "P1", "R1", 300, false), payment.OutcomeRefunded)
			f.repeat(refunded(tn, "P1", "R1", 300, false))
			f.apply(refunded(tn, "P1", "R2", 200, false), payment.OutcomeRefunded)
			f.wantOrder(tn, payment.OrderPaid, "P1", 500)
			f.want("refund_notify records", 2, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'refund_notify'`)
			f.want("applied items", 2, `SELECT COUNT(*) FROM refund WHERE kind = 'ITEM' AND status = 'APPLIED'`)
		}},
		{"running totals: out of order, counted once", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(refunded(tn, "P1", "R2", 800, true), payment.OutcomeRefunded) // the later total first
			f.apply(refunded(tn, "P1", "R1", 300, true), payment.OutcomeRefunded) // the older total adds nothing
			f.repeat(refunded(tn, "P1", "R1", 300, true))
			f.wantOrder(tn, payment.OrderPaid, "P1", 800)
			f.want("the payment's TOTAL", 800, `SELECT amount_fen FROM refund WHERE kind = 'TOTAL'`)
			f.want("items without an amount", 2, `SELECT COUNT(*) FROM refund WHERE kind = 'ITEM' AND amount_fen IS NULL`)
		}},
		{"refund exceeding the payment: anomaly, order untouched", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(refunded(tn, "P1", "R1", 600, false), payment.OutcomeRefunded)
			f.apply(refunded(tn, "P1", "R2", 600, false), payment.OutcomeRefundExceedsPayment)
			f.repeat(refunded(tn, "P1", "R2", 600, false))
			f.apply(refunded(tn, "P1", "", 1200, true), payment.OutcomeRefundExceedsPayment) // a total past the payment
			f.wantOrder(tn, payment.OrderPaid, "P1", 600)
			f.want("REFUND_EXCEEDS_PAYMENT anomalies", 2, `SELECT COUNT(*) FROM anomaly WHERE kind = 'REFUND_EXCEEDS_PAYMENT'`)
			f.want("refused rows", 1, `SELECT COUNT(*) FROM refund WHERE refund_id = 'R2' AND status = 'REFUSED' AND amount_fen = 600`)
			f.want("TOTAL rows", 0, `SELECT COUNT(*) FROM refund WHERE kind = 'TOTAL'`)
		}},
		{"refund of a duplicate payment: anomaly marked refunded", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
			f.apply(refunded("", "P2", "R1", 1000, false), payment.OutcomeAnomalyRefunded)
			f.repeat(refunded("", "P2", "R1", 1000, false))
			f.wantOrder(tn, payment.OrderPaid, "P1", 0) // the order's own payment was not refunded
			f.want("refunded DUPLICATE_PAYMENT anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`)
			f.want("refund journalled against its order", 1, `SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'ANOMALY_REFUNDED'`, tn)
			f.want("ANOMALY rows with their amount", 1, `SELECT COUNT(*) FROM refund WHERE status = 'ANOMALY' AND amount_fen = 1000`)
		}},
		{"refund of an AMOUNT_MISMATCH payment: anomaly marked refunded", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 999), payment.OutcomeAmountMismatch)
			f.apply(refunded("", "P1", "R1", 999, false), payment.OutcomeAnomalyRefunded)
			f.repeat(refunded("", "P1", "R1", 999, false))
			f.wantOrder(tn, payment.OrderWaitPay, "", 0)
			f.want("refunded AMOUNT_MISMATCH anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'AMOUNT_MISMATCH' AND status = 'refunded'`)
		}},
		{"refund of a PAID_AFTER_CLOSE payment: anomaly marked refunded", func(f *fixture) {
			tn := f.order(1000)
			f.apply(event(payment.KindClosed, tn, "close-1"), payment.OutcomeClosed)
			f.apply(paid(tn, "P1", 1000), payment.OutcomePaidAfterClose)
			f.apply(refunded("", "P1", "", 1000, true), payment.OutcomeAnomalyRefunded) // a running total, no id
			f.repeat(refunded("", "P1", "", 1000, true))
			f.wantOrder(tn, payment.OrderClosed, "", 0)
			f.want("refunded PAID_AFTER_CLOSE anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'PAID_AFTER_CLOSE' AND status = 'refunded'`)
		}},
		{"refund before its payment: pending, counted when the payment applies", func(f *fixture) {
			tn := f.order(1000)
			f.apply(refunded(tn, "P1", "R1", 1000, true), payment.OutcomeRefundPending)
			f.repeat(refunded(tn, "P1", "R1", 1000, true))
			f.wantOrder(tn, payment.OrderWaitPay, "", 0)
			f.want("PENDING rows", 2, `SELECT COUNT(*) FROM refund WHERE status = 'PENDING'`) // the item and the TOTAL
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.repeat(paid(tn, "P1", 1000))
			f.wantOrder(tn, payment.OrderPaid, "P1", 1000)
			f.want("PENDING rows", 0, `SELECT COUNT(*) FROM refund WHERE status = 'PENDING'`)
		}},
		{"refund before a duplicate payment: anomaly marked refunded", func(f *fixture) {
			tn := f.order(1000)
			f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
			f.apply(refunded(tn, "P2", "R2", 1000, false), payment.OutcomeRefundPending)
			f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
			f.wantOrder(tn, payment.OrderPaid, "P1", 0)
			f.want("refunded anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`)
			f.want("rows settled against the anomaly", 1, `SELECT COUNT(*) FROM refund WHERE status = 'ANOMALY'`)
		}},
		{"refund naming no order and no payment seen: pending under the payment", func(f *fixture) {
			f.apply(refunded("", "pi_unknown", "", 500, true), payment.OutcomeRefundPending)
			f.repeat(refunded("", "pi_unknown", "", 500, true))
			f.want("PENDING rows without an order", 1, `SELECT COUNT(*) FROM refund WHERE status = 'PENDING' AND trade_no = ''`)
		}},
		{"unsure trade_no counts only when it names an order", func(f *fixture) {
			tn := f.order(1000)
			ev := paid(tn, "P1", 1000)
			ev.TradeNoUnsure = true
			f.apply(ev, payment.OutcomeApplied)
			stranger := paid("someone_elses_id", "P9", 1000)
			stranger.TradeNoUnsure = true
			f.apply(stranger, payment.OutcomeJournalled)
			f.want("stranger journalled as other", 1, `SELECT COUNT(*) FROM notify_journal WHERE event = 'OTHER' AND trade_no = ''`)
		}},
	}
	for _, redis := range []struct {
		name string
		up   bool
	}{{"redis up", true}, {"redis down", false}} {
		t.Run(redis.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(newFixture(t, redis.up)) })
			}
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

// A refund that commits while its payment is being applied can be left PENDING beside the
// applied payment (neither transaction saw the other's row). SettleStranded, which the
// reconciliation job runs, counts it in once; against an anomaly's payment it marks the anomaly.
func TestSettleStrandedRefunds(t *testing.T) {
	f := newFixture(t, true)
	tn := f.order(1000)
	f.apply(paid(tn, "P1", 1000), payment.OutcomeApplied)
	f.apply(paid(tn, "P2", 1000), payment.OutcomeDuplicatePayment)
	// What the race leaves: rows PENDING although their payments are recorded.
	testenv.Exec(t, f.dsn, `INSERT INTO refund (channel, refund_id, kind, trade_no, channel_txn_id, amount_fen, currency, status, created_time)
		VALUES ('alipay', 'R1', 'ITEM', '', 'P1', 300, 'CNY', 'PENDING', NOW(3)), ('alipay', 'R2', 'ITEM', '', 'P2', 1000, 'CNY', 'PENDING', NOW(3))`)
	for run, want := range []int{2, 0} {
		n, err := f.a.SettleStranded(context.Background())
		if err != nil || n != want {
			t.Fatalf("run %d: SettleStranded = %d, %v; want %d", run, n, err, want)
		}
	}
	f.wantOrder(tn, payment.OrderPaid, "P1", 300)
	f.want("APPLIED rows", 1, `SELECT COUNT(*) FROM refund WHERE refund_id = 'R1' AND status = 'APPLIED' AND trade_no = ?`, tn)
	f.want("ANOMALY rows", 1, `SELECT COUNT(*) FROM refund WHERE refund_id = 'R2' AND status = 'ANOMALY'`)
	f.want("refunded anomalies", 1, `SELECT COUNT(*) FROM anomaly WHERE kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`)
}

// The trail spin found (apply/model/README.md, variant MARK_NS_AT_WRITE): a replica commits under
// epoch 1 and is slow before it writes its done markers; meanwhile the database goes back in
// time (a restore loses the commit) and the watcher moves the replica on to epoch 2. The late
// markers must go under epoch 1, where nobody reads them any more: under epoch 2 they would tell
// the channel's next delivery "repeat" for a payment the database no longer holds, and the
// channel would stop sending it.
func TestMarkersGoUnderTheNamespaceReadBeforeCommit(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	g := testenv.Guard(t)
	const instance = "db-under-test"
	g.SetNamespace(instance, 1)
	a := apply.New(db, g, 5*time.Second, testenv.Logger(t))
	f := &fixture{t: t, dsn: dsn, db: db, a: a}
	tn := f.order(1000)
	backup := testenv.Dump(t, dsn) // the order WAIT_PAY, no record
	moved := false
	a.SetAfterCommit(func() {
		if moved {
			return
		}
		moved = true
		testenv.Restore(t, dsn, backup)
		g.SetNamespace(instance, 2)
	})

	ev := paid(tn, "P1", 1000)
	f.apply(ev, payment.OutcomeApplied)
	if !moved {
		t.Fatal("the hook between commit and markers never ran")
	}
	f.wantOrder(tn, payment.OrderWaitPay, "", 0) // the restore took the payment back
	// The channel delivers again: the payment is applied afresh, not answered from a marker.
	f.apply(ev, payment.OutcomeApplied)
	f.wantOrder(tn, payment.OrderPaid, "P1", 0)
	f.want("records", 1, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`)
}
