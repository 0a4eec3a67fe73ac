package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// paid applies a payment of the order through Apply, as its notification would have.
func (w *world) paid(tradeNo, txn string, fen int64, at time.Time) {
	w.t.Helper()
	w.apply(payment.Event{Channel: "alipay", NotifyID: "n-" + txn, TradeNo: tradeNo, ChannelTxnID: txn, Kind: payment.KindPaid,
		Status: "TRADE_SUCCESS", AmountFen: fen, Currency: "CNY", PaidAt: at, Raw: []byte(txn)}, payment.OutcomeApplied)
}

func (w *world) apply(ev payment.Event, want payment.Outcome) {
	w.t.Helper()
	if got, err := w.applier.Apply(context.Background(), ev); err != nil || got != want {
		w.t.Fatalf("apply %s %s: %s, %v; want %s", ev.Kind, ev.ChannelTxnID, got, err, want)
	}
}

// bareOrder inserts a WAIT_PAY order of fen CNY (with an Alipay attempt).
func (w *world) bareOrder(fen int64) string {
	w.t.Helper()
	return w.order("alipay", fen)
}

// paidOrder inserts an order of fen CNY (bareOrder) that txn paid at at (paid).
func (w *world) paidOrder(txn string, fen int64, at time.Time) string {
	w.t.Helper()
	tn := w.bareOrder(fen)
	w.paid(tn, txn, fen, at)
	return tn
}

// A bill of one day with every class seeded: each is found, the CHANNEL_ONLY order ends PAID
// once, the refund the bill proves is applied, and a second run changes nothing.
func TestBillEveryClass(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -5).Truncate(24 * time.Hour)
	at := day.Add(10 * time.Hour)

	matched, mismatch, channelOnly, closed, localOnly, refunded := w.bareOrder(100), w.bareOrder(100), w.bareOrder(100), w.bareOrder(100), w.bareOrder(100), w.bareOrder(100)
	w.paid(matched, "T1", 100, at)
	w.paid(mismatch, "T2", 100, at)
	w.paid(localOnly, "T6", 100, at)
	w.paid(refunded, "T7", 100, at)
	w.apply(payment.Event{Channel: "alipay", NotifyID: "n-R1", TradeNo: matched, ChannelTxnID: "T1", Kind: payment.KindRefund,
		Currency: "CNY", RefundID: "R1", RefundFen: 30, Raw: []byte("R1")}, payment.OutcomeRefunded)
	w.apply(payment.Event{Channel: "alipay", NotifyID: "n-R3", TradeNo: refunded, ChannelTxnID: "T7", Kind: payment.KindRefund,
		Currency: "CNY", RefundID: "R3", RefundFen: 10, Raw: []byte("R3")}, payment.OutcomeRefunded)
	testenv.Exec(w.t, w.dsn, `UPDATE orders SET status = 'CLOSED' WHERE trade_no = ?`, closed)

	ts := at.Format(time.RFC3339)
	bill := strings.Join([]string{
		"trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id",
		fmt.Sprintf("%s,T1,PAY,100,CNY,%s,", matched, ts),          // MATCHED
		fmt.Sprintf("%s,T2,PAY,150,CNY,%s,", mismatch, ts),         // AMOUNT_MISMATCH
		fmt.Sprintf("%s,T3,PAY,100,CNY,%s,", channelOnly, ts),      // CHANNEL_ONLY: repaired
		fmt.Sprintf("%s,T4,PAY,100,CNY,%s,", closed, ts),           // STATUS_MISMATCH: PAID_AFTER_CLOSE
		fmt.Sprintf("NOTOURS1,T5,PAY,100,CNY,%s,", ts),             // UNKNOWN_ORDER
		fmt.Sprintf("%s,T7,PAY,100,CNY,%s,", refunded, ts),         // MATCHED
		fmt.Sprintf("%s,T1,REFUND,30,CNY,%s,R1", matched, ts),      // REFUND_MATCHED
		fmt.Sprintf("%s,T7,REFUND,20,CNY,%s,R2", refunded, ts),     // REFUND_CHANNEL_ONLY: refunded
		fmt.Sprintf("%s,T7,REFUND,15,CNY,%s,R3", refunded, ts),     // REFUND_AMOUNT_MISMATCH
		fmt.Sprintf("%s,T8,PAY,\"1,000.00\",CNY,%s,", matched, ts), // a bad line, counted
	}, "\n") + "\n"
	// T6 is paid here inside the day and absent from the bill: LOCAL_ONLY, the day being past
	// its grace.

	want := map[string]int{
		reconcile.ClassMatched: 2, reconcile.ClassAmountMismatch: 1, reconcile.ClassChannelOnly: 1,
		reconcile.ClassStatusMismatch: 1, reconcile.ClassUnknownOrder: 1, reconcile.ClassLocalOnly: 1,
		reconcile.ClassRefundMatched: 1, reconcile.ClassRefundChannelOnly: 1, reconcile.ClassRefundAmountMismatch: 1,
		reconcile.ClassBadLine: 1,
	}
	for run := 1; run <= 2; run++ {
		if run == 2 { // what the first run repaired now matches; nothing else moves
			want[reconcile.ClassMatched], want[reconcile.ClassChannelOnly] = 3, 0
			want[reconcile.ClassRefundMatched], want[reconcile.ClassRefundChannelOnly] = 2, 0
		}
		rep, err := w.job.MatchBill(context.Background(), "alipay", day, bills.NewCSV(strings.NewReader(bill)), reconcile.BillConfig{Location: time.UTC}, nil)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for class, n := range want {
			if rep.Counts[class] != n {
				t.Errorf("run %d: %s = %d, want %d (counts %v)", run, class, rep.Counts[class], n, rep.Counts)
			}
		}
		if rep.Settled() {
			t.Errorf("run %d: settled with discrepancies left", run)
		}
		repairs := map[string]string{}
		rows := 0
		if err := w.job.Discrepancies(context.Background(), rep.RunID, func(d reconcile.Discrepancy) error {
			repairs[d.Class] = d.Repair
			if d.Found { // the others are an earlier run's, repaired (see TestRerunKeepsWhatWasRepaired)
				rows++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		wantRepair := map[string]string{reconcile.ClassChannelOnly: "APPLIED", reconcile.ClassStatusMismatch: "PAID_AFTER_CLOSE",
			reconcile.ClassRefundChannelOnly: "REFUNDED"}
		if run == 2 { // repairs are idempotent: Apply finds the payment recorded
			wantRepair = map[string]string{reconcile.ClassStatusMismatch: "REPEAT"}
		}
		for class, r := range wantRepair {
			if repairs[class] != r {
				t.Errorf("run %d: %s repair %q, want %q", run, class, repairs[class], r)
			}
		}
		if st := w.status(channelOnly); st != payment.OrderPaid {
			t.Fatalf("run %d: the CHANNEL_ONLY order is %s, want PAID", run, st)
		}
		if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE idem_key = 'T3'`); n != 1 {
			t.Fatalf("run %d: records of the repaired payment = %d, want 1", run, n)
		}
		if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE channel_txn_id = 'T3' AND source = 'bill'`); n != 1 {
			t.Fatalf("run %d: the repair journalled %d times with source bill, want 1", run, n)
		}
		if n := w.count(`SELECT refunded_fen FROM orders WHERE trade_no = ?`, refunded); n != 30 {
			t.Fatalf("run %d: refunded_fen = %d, want 30 (10 + the bill's 20, once)", run, n)
		}
		if n := w.count(`SELECT COUNT(*) FROM anomaly WHERE channel_txn_id = 'T2' AND kind = 'AMOUNT_MISMATCH'`); n != 1 {
			t.Fatalf("run %d: AMOUNT_MISMATCH anomalies of T2 = %d, want 1", run, n)
		}
		if n := w.count(`SELECT COUNT(*) FROM recon_run WHERE channel = 'alipay' AND status = 'complete'`); n != run {
			t.Fatalf("run %d: complete runs = %d, want %d (a re-run is a run of its own)", run, n, run)
		}
		if got, err := w.db.RunOf(context.Background(), "alipay", repository.SourceChannel, day); err != nil || got.ID != rep.RunID {
			t.Fatalf("run %d: the day's result is run %d (%v), want the latest, %d", run, got.ID, err, rep.RunID)
		}
		if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy WHERE run_id = ?`, rep.RunID); n != rows || rows == 0 {
			t.Fatalf("run %d: stored rows = %d, listed %d", run, n, rows)
		}
		if n := w.count(`SELECT COUNT(*) FROM recon_line l JOIN recon_run r ON r.id = l.run_id WHERE r.id <> ?`, rep.RunID); n != 0 {
			t.Fatalf("run %d: %d staged lines of runs the latest replaced", run, n)
		}
	}
}

// A payment missing from its day's bill waits (PENDING) while the next day's bill may still
// hold it; the next day's bill settles it either way.
func TestBillLocalOnlyWaitsForTheNextDay(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().Truncate(24 * time.Hour)
	nearMidnight, missing := w.bareOrder(100), w.bareOrder(100)
	w.paid(nearMidnight, "M1", 100, day.Add(24*time.Hour-time.Minute))
	w.paid(missing, "M2", 100, day.Add(time.Hour))
	header := "trade_no,channel_txn_id,kind,amount_fen,currency,time\n"
	run := func(d time.Time, body string) reconcile.BillReport {
		t.Helper()
		rep, err := w.job.MatchBill(context.Background(), "alipay", d, bills.NewCSV(strings.NewReader(header+body)), reconcile.BillConfig{Location: time.UTC}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := run(day, "")
	if first.Counts[reconcile.ClassPending] != 2 || first.Counts[reconcile.ClassLocalOnly] != 0 {
		t.Fatalf("today's bill: %v, want both PENDING", first.Counts)
	}
	// The next day's bill holds the payment made a minute before midnight, not the other one.
	run(day.AddDate(0, 0, 1), fmt.Sprintf("%s,M1,PAY,100,CNY,%s\n", nearMidnight, day.Add(24*time.Hour+time.Minute).Format(time.RFC3339)))
	var rows []repository.Discrepancy
	prev, err := w.db.RunOf(context.Background(), "alipay", repository.SourceChannel, day)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = w.db.Discrepancies(context.Background(), prev.ID, "", 0, 10); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ChannelTxnID != "M2" || rows[0].Class != reconcile.ClassLocalOnly {
		t.Fatalf("the first day's rows after the next day's bill: %+v; want only M2, LOCAL_ONLY", rows)
	}
}

// A bill line for an order whose notification arrives during the run: one PAID, one record.
func TestBillAndNotificationAtOnce(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -3).Truncate(24 * time.Hour)
	var lines []string
	var trades []string
	for i := range 20 {
		tn := w.bareOrder(100)
		trades = append(trades, tn)
		lines = append(lines, fmt.Sprintf("%s,C%d,PAY,100,CNY,%s", tn, i, day.Add(time.Hour).Format(time.RFC3339)))
	}
	bill := "trade_no,channel_txn_id,kind,amount_fen,currency,time\n" + strings.Join(lines, "\n") + "\n"
	done := make(chan error, 1)
	go func() {
		_, err := w.job.MatchBill(context.Background(), "alipay", day, bills.NewCSV(strings.NewReader(bill)), reconcile.BillConfig{Location: time.UTC}, nil)
		done <- err
	}()
	for i, tn := range trades {
		_, _ = w.applier.Apply(context.Background(), payment.Event{Channel: "alipay", NotifyID: fmt.Sprintf("n-C%d", i), TradeNo: tn,
			ChannelTxnID: fmt.Sprintf("C%d", i), Kind: payment.KindPaid, Status: "TRADE_SUCCESS", AmountFen: 100, Currency: "CNY",
			PaidAt: day.Add(time.Hour), Raw: []byte("n")})
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, tn := range trades {
		if st := w.status(tn); st != payment.OrderPaid {
			t.Fatalf("%s is %s", tn, st)
		}
		if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE idem_key = ?`, fmt.Sprintf("C%d", i)); n != 1 {
			t.Fatalf("C%d: %d records, want 1", i, n)
		}
	}
}

// sandboxIdentity is whom the fake channel's bills name (Alipay's partner id is the fake's own,
// checked through Downloaded).
var sandboxIdentity = map[string]reconcile.Identity{
	"wechatpay": {Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}},
	"unionpay":  {Merchant: simulate.SandboxUnionPayMerID},
}

// Every class in each channel's real bill format, downloaded from the fake channel as the job
// downloads it: each is found, the CHANNEL_ONLY order ends PAID once, the refund the bill proves
// is applied once, and a second run changes nothing.
func TestBillEveryClassInEachRealFormat(t *testing.T) {
	for _, ch := range []string{"alipay", "wechatpay", "unionpay", "stripe"} {
		t.Run(ch, func(t *testing.T) {
			w := newWorld(t)
			loc := bills.ChinaTime
			if ch == "stripe" {
				loc = time.UTC
			}
			now := time.Now().In(loc)
			day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc).AddDate(0, 0, -4)
			at := day.Add(10 * time.Hour)
			// notify stands for the trade's notification, delivered at the time: a channel's real
			// notification signed four days ago would be refused as stale today.
			add := func(tn string, fen int64, status string, notify bool, txn string, refund int64) simulate.FakeTrade {
				tr, err := w.fake.Add(context.Background(), simulate.FakeTrade{Channel: ch, TradeNo: tn, AmountFen: fen, Status: status,
					TxnID: txn, RefundFen: refund, PaidAt: at, DropNotify: true})
				if err != nil {
					t.Fatal(err)
				}
				if notify {
					w.apply(payment.Event{Channel: ch, NotifyID: "n-" + tr.TxnID, TradeNo: tn, ChannelTxnID: tr.TxnID, Kind: payment.KindPaid,
						Status: "paid", AmountFen: fen, Currency: "CNY", PaidAt: at, Raw: []byte(tn)}, payment.OutcomeApplied)
				}
				return tr
			}
			matched, channelOnly, closed, amount, local, refunded := w.order(ch, 100), w.order(ch, 100), w.order(ch, 100), w.order(ch, 100), w.order(ch, 100), w.order(ch, 100)
			add(matched, 100, simulate.FakePaid, true, "", 0)
			add(channelOnly, 100, simulate.FakePaid, false, "", 0)
			testenv.Exec(t, w.dsn, `UPDATE orders SET status = 'CLOSED' WHERE trade_no = ?`, closed)
			add(closed, 100, simulate.FakePaid, false, "", 0)
			add("PUNKNOWN"+strings.ToUpper(ch[:3]), 100, simulate.FakePaid, false, "", 0)
			tr := add(amount, 100, simulate.FakePaid, true, "", 0)
			add(amount, 150, simulate.FakePaid, false, tr.TxnID, 0) // the bill says 150 of what was applied as 100
			w.apply(payment.Event{Channel: ch, NotifyID: "n-local", TradeNo: local, ChannelTxnID: "LOCAL" + ch, Kind: payment.KindPaid,
				Status: "paid", AmountFen: 100, Currency: "CNY", PaidAt: at, Raw: []byte("local")}, payment.OutcomeApplied)
			tr = add(refunded, 100, simulate.FakePaid, true, "", 0)
			add(refunded, 100, simulate.FakeRefunded, false, tr.TxnID, 30) // refunded at the channel; the notice lost
			for _, tn := range []string{matched, amount, refunded} {
				if st := w.status(tn); st != payment.OrderPaid {
					t.Fatalf("%s is %s after its notification", tn, st)
				}
			}

			want := map[string]int{reconcile.ClassMatched: 2, reconcile.ClassChannelOnly: 1, reconcile.ClassStatusMismatch: 1,
				reconcile.ClassUnknownOrder: 1, reconcile.ClassAmountMismatch: 1, reconcile.ClassLocalOnly: 1, reconcile.ClassRefundChannelOnly: 1}
			for run := 1; run <= 2; run++ {
				if run == 2 {
					want[reconcile.ClassMatched], want[reconcile.ClassChannelOnly] = 3, 0
					want[reconcile.ClassRefundMatched], want[reconcile.ClassRefundChannelOnly] = 1, 0
				}
				file, err := w.bills[ch].DownloadBill(context.Background(), day)
				if err != nil {
					t.Fatalf("run %d: download: %v", run, err)
				}
				r, err := file.Open()
				if err != nil {
					t.Fatal(err)
				}
				rep, err := w.job.MatchBill(context.Background(), ch, day, r, reconcile.BillConfig{Location: loc, Downloaded: true,
					Identity: sandboxIdentity[ch]}, nil)
				file.Close()
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				for class, n := range want {
					if rep.Counts[class] != n {
						t.Errorf("run %d: %s = %d, want %d (counts %v, bad lines %v)", run, class, rep.Counts[class], n, rep.Counts, rep.BadLines)
					}
				}
				if !rep.Trusted || rep.Counts[reconcile.ClassBadLine] != 0 {
					t.Errorf("run %d: trusted %v, summary %q, bad lines %v", run, rep.Trusted, rep.SummaryMismatch, rep.BadLines)
				}
				if st := w.status(channelOnly); st != payment.OrderPaid {
					t.Fatalf("run %d: the CHANNEL_ONLY order is %s", run, st)
				}
				if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify' AND JSON_VALUE(result_json, '$.trade_no') = ?`, channelOnly); n != 1 {
					t.Fatalf("run %d: records of the repaired payment = %d, want 1", run, n)
				}
				if n := w.count(`SELECT refunded_fen FROM orders WHERE trade_no = ?`, refunded); n != 30 {
					t.Fatalf("run %d: refunded_fen = %d, want 30, once", run, n)
				}
			}
		})
	}
}

// A bill that turns out not to be one stops the run with an error naming the line, and the day's
// last good rows stay as they were.
func TestUnreadableBillChangesNothing(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -3).Truncate(24 * time.Hour)
	good := "trade_no,channel_txn_id,kind,amount_fen,currency,time\nNOTOURS1,X1,PAY,100,CNY," + day.Add(time.Hour).Format(time.RFC3339) + "\n"
	if _, err := w.job.MatchBill(context.Background(), "alipay", day, bills.NewCSV(strings.NewReader(good)), reconcile.BillConfig{Location: time.UTC}, nil); err != nil {
		t.Fatal(err)
	}
	before := w.count(`SELECT COUNT(*) FROM recon_discrepancy`)
	for name, bill := range map[string]string{
		"a missing column": "trade_no,channel_txn_id,kind,currency,time\nT1,X1,PAY,CNY," + day.Format(time.RFC3339) + "\n",
		"not a bill":       "\x00\x01\x02",
	} {
		_, err := w.job.MatchBill(context.Background(), "alipay", day, bills.NewCSV(strings.NewReader(bill)), reconcile.BillConfig{Location: time.UTC}, nil)
		if !errors.Is(err, bills.ErrFormat) || !strings.Contains(err.Error(), "line") {
			t.Fatalf("%s: %v, want a format error naming the line", name, err)
		}
		if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy`); n != before || before == 0 {
			t.Fatalf("%s: rows %d, want the last good run's %d", name, n, before)
		}
		if n := w.count(`SELECT COUNT(*) FROM recon_run WHERE finished_at IS NOT NULL AND line_count = 1`); n != 1 {
			t.Fatalf("%s: the last good run's totals were lost", name)
		}
	}
}
