package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

// eventData is the part of an event body these tests read.
type eventData struct {
	Type string `json:"type"`
	Data struct {
		TradeNo      string `json:"trade_no"`
		Status       string `json:"status"`
		ChannelTxnID string `json:"channel_txn_id"`
		RefundedFen  int64  `json:"refunded_fen"`
		RefundID     string `json:"refund_id"`
		RefundFen    int64  `json:"refund_fen"`
		Kind         string `json:"kind"`
	} `json:"data"`
}

func (f *fixture) events(tradeNo string) []eventData {
	f.t.Helper()
	evs, err := f.db.EventsOf(context.Background(), tradeNo)
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]eventData, len(evs))
	for i, e := range evs {
		if err := json.Unmarshal(e.Body, &out[i]); err != nil {
			f.t.Fatalf("%s: %v", e.Body, err)
		}
	}
	return out
}

func (f *fixture) wantEvents(tradeNo string, want ...string) []eventData {
	f.t.Helper()
	evs := f.events(tradeNo)
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("events of %s: %v, want %v", tradeNo, got, want)
	}
	return evs
}

// The invariant of the outbox, counted over many concurrent and duplicate notifications: every
// PAID order has exactly one order.paid event, every CLOSED order one order.closed, every other
// order none; every anomaly one payment.anomaly; and an order's order.refunded events add up to
// its refunded_fen, one per change. Duplicates never add an event.
func TestEveryChangeHasExactlyOneEvent(t *testing.T) {
	for name, redisUp := range map[string]bool{"redis up": true, "redis down": false} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, redisUp)
			f.a.SetGroupLanes(1) // queue payments into groups as often as possible
			const n = 40
			var evs []payment.Event
			var tradeNos []string
			for i := range n {
				tn := f.order(1000)
				tradeNos = append(tradeNos, tn)
				txn := "X" + tn
				switch i % 5 {
				case 0, 1: // paid, three copies, then refunded twice (each twice)
					evs = append(evs, paid(tn, txn, 1000), paid(tn, txn, 1000), paid(tn, txn, 1000),
						refunded(tn, txn, "R1"+tn, 300, false), refunded(tn, txn, "R1"+tn, 300, false),
						refunded(tn, txn, "R2"+tn, 200, false))
				case 2: // the wrong amount: an anomaly, twice
					evs = append(evs, paid(tn, txn, 999), paid(tn, txn, 999))
				case 3: // closed, twice, and paid after the close
					evs = append(evs, event(payment.KindClosed, tn, "c-"+tn), event(payment.KindClosed, tn, "c-"+tn),
						paid(tn, txn, 1000))
				case 4: // paid twice by two transactions: one applies, the other is an anomaly
					evs = append(evs, paid(tn, txn, 1000), paid(tn, txn+"B", 1000), paid(tn, txn, 1000))
				}
			}
			// Everything at once, each event until it is answered (a twin in flight says retry).
			var wg sync.WaitGroup
			for _, ev := range evs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for try := 0; ; try++ {
						if _, err := f.a.Apply(context.Background(), ev); err == nil {
							return
						} else if try == 50 {
							t.Errorf("Apply %s %s: %v", ev.Kind, ev.NotifyID, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			// A refund that came before its payment is PENDING until a sweep: settle them.
			for {
				if k, err := f.a.SettleStranded(context.Background()); err != nil {
					t.Fatal(err)
				} else if k == 0 {
					break
				}
			}
			total := 0
			for _, tn := range tradeNos {
				o := f.get(tn)
				var paidN, closedN, anomalyN int
				var refundedSum int64
				for _, e := range f.events(tn) {
					total++
					switch e.Type {
					case payment.EventOrderPaid:
						paidN++
						if e.Data.ChannelTxnID != o.ChannelTxnID || e.Data.Status != payment.OrderPaid {
							t.Errorf("%s: order.paid names %s %s, the order %s", tn, e.Data.Status, e.Data.ChannelTxnID, o.ChannelTxnID)
						}
					case payment.EventOrderClosed:
						closedN++
					case payment.EventPaymentAnomaly:
						anomalyN++
					case payment.EventOrderRefunded:
						refundedSum += e.Data.RefundFen
						if e.Data.RefundedFen != refundedSum {
							t.Errorf("%s: order.refunded says %d refunded, the events add up to %d", tn, e.Data.RefundedFen, refundedSum)
						}
					}
				}
				wantPaid, wantClosed := 0, 0
				switch o.Status {
				case payment.OrderPaid:
					wantPaid = 1
				case payment.OrderClosed:
					wantClosed = 1
				}
				anomalies := f.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, tn)
				if paidN != wantPaid || closedN != wantClosed || anomalyN != anomalies || refundedSum != o.RefundedFen {
					t.Errorf("%s (%s, refunded %d, %d anomalies): %d order.paid, %d order.closed, %d payment.anomaly, refunds add up to %d",
						tn, o.Status, o.RefundedFen, anomalies, paidN, closedN, anomalyN, refundedSum)
				}
			}
			if all := f.count(`SELECT COUNT(*) FROM event`); all != total {
				t.Fatalf("%d events in all, %d of these orders", all, total)
			}
			groups, applied := f.a.GroupStats()
			t.Logf("%d events; %d groups applied %d payments", total, groups, applied)
		})
	}
}

// A refund's event names it, what it added and the new total; a refund that came before its
// payment is counted, with its event, in the payment's transaction, after the order.paid; one
// that would pass the payment is an anomaly, not a refund.
func TestRefundEvents(t *testing.T) {
	f := newFixture(t, true)
	tn := f.order(1000)
	f.apply(refunded(tn, "X1", "R0", 100, false), payment.OutcomeRefundPending)
	f.wantEvents(tn)
	f.apply(paid(tn, "X1", 1000), payment.OutcomeApplied)
	f.apply(refunded(tn, "X1", "R1", 300, false), payment.OutcomeRefunded)
	f.repeat(refunded(tn, "X1", "R1", 300, false))
	f.apply(refunded(tn, "X1", "", 600, true), payment.OutcomeRefunded) // a running total naming no refund
	f.apply(refunded(tn, "X1", "R9", 800, false), payment.OutcomeRefundExceedsPayment)
	evs := f.wantEvents(tn, "order.paid", "order.refunded", "order.refunded", "order.refunded", "payment.anomaly")
	for i, w := range []struct {
		id        string
		fen, tota int64
	}{{"R0", 100, 100}, {"R1", 300, 400}, {"", 200, 600}} {
		d := evs[i+1].Data
		if d.RefundID != w.id || d.RefundFen != w.fen || d.RefundedFen != w.tota {
			t.Fatalf("refund event %d: %+v, want %s of %d making %d", i, d, w.id, w.fen, w.tota)
		}
	}
	if evs[4].Data.Kind != string(payment.OutcomeRefundExceedsPayment) {
		t.Fatalf("anomaly event: %+v", evs[4].Data)
	}
}

// failJournal makes MariaDB refuse the journal row of notifications whose id starts with
// "fail-": the last statement of apply's transaction, after the change and its event.
func failJournal(f *fixture) (drop func()) {
	f.t.Helper()
	testenv.Exec(f.t, f.dsn, `CREATE TRIGGER fail_journal BEFORE INSERT ON notify_journal FOR EACH ROW
		IF NEW.notify_id LIKE 'fail-%' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected failure'; END IF`)
	return func() { testenv.Exec(f.t, f.dsn, `DROP TRIGGER IF EXISTS fail_journal`) }
}

// An event exists if and only if its change committed: a transaction that fails after the change
// and its event were written leaves neither, alone or in a group; the redelivery applies both.
func TestFailedTransactionLeavesNoEvent(t *testing.T) {
	f := newFixture(t, true)
	drop := failJournal(f)
	defer drop()
	pay := func(tn string) payment.Event {
		ev := paid(tn, "X"+tn, 1000)
		ev.NotifyID = "fail-" + tn
		return ev
	}
	alone := f.order(1000)
	if _, err := f.a.Apply(context.Background(), pay(alone)); err == nil {
		t.Fatal("Apply succeeded through the injected failure")
	}
	var grouped []string
	var evs []payment.Event
	for range 4 {
		tn := f.order(1000)
		grouped = append(grouped, tn)
		evs = append(evs, pay(tn))
	}
	release, results := f.queueBehind(evs)
	release()
	for i, r := range results() {
		if r.err == nil {
			t.Fatalf("group item %d: %q through the injected failure", i, r.outcome)
		}
	}
	f.want("events after the failures", 0, `SELECT COUNT(*) FROM event e JOIN orders o ON o.trade_no = e.trade_no
		WHERE o.channel_txn_id IS NULL OR o.channel_txn_id NOT LIKE 'STUCK-%'`)
	f.want("orders paid after the failures", 0, `SELECT COUNT(*) FROM orders WHERE status = 'PAID' AND channel_txn_id NOT LIKE 'STUCK-%'`)
	drop()
	for _, tn := range append(grouped, alone) {
		f.apply(pay(tn), payment.OutcomeApplied)
		f.wantEvents(tn, payment.EventOrderPaid)
	}
}
