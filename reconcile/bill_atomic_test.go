package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/reconcile"
)

// Case 7 of issue 20: a bill run that fails part-way (a line that is not UTF-8 at line 1502,
// after 1,000 lines were staged) must not corrupt its neighbour. The failed run keeps nothing
// but its row, marked failed with its error; the day before, whose near-midnight payment waits
// (PENDING) for this day's bill, does not take the failed run for "the next bill is in"; once the
// good bill is read the payment is settled as found; and a later failed run of the day leaves the
// day's complete run, its rows and its lines, as they were.
func TestIssue20Case07FailedRunLeavesNeighboursAlone(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1) // yesterday: the grace has not passed
	next := day.AddDate(0, 0, 1)
	cfg := reconcile.BillConfig{Location: time.UTC}
	late := w.paidOrder("M1", 100, day.Add(24*time.Hour-time.Minute)) // 23:59: its line is in the next day's bill

	const header = "trade_no,channel_txn_id,kind,amount_fen,currency,time\n"
	run := func(d time.Time, bill string) (reconcile.BillReport, error) {
		return w.job.MatchBill(ctx, "alipay", d, bills.NewCSV(strings.NewReader(bill)), cfg, nil)
	}
	dayBill := header + "NOTOURS0,X0,PAY,100,CNY," + day.Add(10*time.Hour).Format(time.RFC3339) + "\n"
	// The next day's bill: 1,500 lines, the late payment's at line 1200; bad names a line that
	// ends the bill (not UTF-8) at line 1502, or none.
	nextBill := func(bad bool) string {
		var b strings.Builder
		b.WriteString(header)
		at := next.Add(10 * time.Hour).Format(time.RFC3339)
		for no := 2; no <= 1510; no++ {
			switch {
			case no == 1200:
				fmt.Fprintf(&b, "%s,M1,PAY,100,CNY,%s\n", late, next.Add(time.Minute).Format(time.RFC3339))
			case no == 1502 && bad:
				fmt.Fprintf(&b, "NOTOURS\xff,XB,PAY,100,CNY,%s\n", at)
			default:
				fmt.Fprintf(&b, "NOTOURS%d,X%d,PAY,100,CNY,%s\n", no, no, at)
			}
		}
		return b.String()
	}
	// lateRows counts the late payment's rows in the day's result: its latest complete run.
	lateRows := func(class string) int {
		t.Helper()
		return w.count(`SELECT COUNT(*) FROM recon_discrepancy d WHERE d.channel_txn_id = 'M1' AND (? = '' OR d.class = ?)
			AND d.run_id = (SELECT MAX(id) FROM recon_run WHERE channel = 'alipay' AND bill_date = ? AND counts_json IS NOT NULL)`,
			class, class, day.Format(time.DateOnly))
	}

	if _, err := run(day, dayBill); err != nil {
		t.Fatal(err)
	}
	if n := lateRows("PENDING"); n != 1 {
		t.Fatalf("the near-midnight payment after its day's bill: %d PENDING rows, want 1", n)
	}

	// The next day's bill fails at line 1502.
	if _, err := run(next, nextBill(true)); !errors.Is(err, bills.ErrFormat) || !strings.Contains(err.Error(), "line 1502") {
		t.Fatalf("the bad bill: %v, want a format error at line 1502", err)
	}
	// The day is run again: the failed run is not its next day's bill.
	if _, err := run(day, dayBill); err != nil {
		t.Fatal(err)
	}
	if n := lateRows("PENDING"); n != 1 || lateRows("LOCAL_ONLY") != 0 {
		t.Fatalf("after the failed next day: PENDING %d, LOCAL_ONLY %d; want it still PENDING", n, lateRows("LOCAL_ONLY"))
	}

	// The failed run kept its row, failed with its error, and nothing else.
	if n := w.count(`SELECT COUNT(*) FROM recon_run WHERE bill_date = ? AND status = 'failed' AND error LIKE '%line 1502%'`, next.Format(time.DateOnly)); n != 1 {
		t.Fatal("no failed run of the next day with its error")
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_run WHERE bill_date = ? AND status <> 'failed'`, next.Format(time.DateOnly)); n != 0 {
		t.Fatalf("%d runs of the next day besides the failed one", n)
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_line l JOIN recon_run r ON r.id = l.run_id WHERE r.status = 'failed'`); n != 0 {
		t.Fatalf("the failed run left %d staged lines", n)
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy d JOIN recon_run r ON r.id = d.run_id WHERE r.status = 'failed'`); n != 0 {
		t.Fatalf("the failed run left %d rows", n)
	}

	// The good next-day bill shows the payment: the day's PENDING row goes.
	if _, err := run(next, nextBill(false)); err != nil {
		t.Fatal(err)
	}
	if n := lateRows(""); n != 0 {
		t.Fatalf("the late payment still has %d rows after the next day's bill showed it", n)
	}

	// Another failed run of the next day changes nothing of its result.
	rows := w.count(`SELECT COUNT(*) FROM recon_discrepancy d JOIN recon_run r ON r.id = d.run_id WHERE r.bill_date = ?`, next.Format(time.DateOnly))
	lines := w.count(`SELECT COUNT(*) FROM recon_line l JOIN recon_run r ON r.id = l.run_id WHERE r.bill_date = ?`, next.Format(time.DateOnly))
	if _, err := run(next, nextBill(true)); !errors.Is(err, bills.ErrFormat) {
		t.Fatalf("the bad bill again: %v", err)
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy d JOIN recon_run r ON r.id = d.run_id WHERE r.bill_date = ?`, next.Format(time.DateOnly)); n != rows || rows == 0 {
		t.Fatalf("the next day's rows: %d, want the complete run's %d", n, rows)
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_line l JOIN recon_run r ON r.id = l.run_id WHERE r.bill_date = ?`, next.Format(time.DateOnly)); n != lines || lines != 1509 {
		t.Fatalf("the next day's staged lines: %d, want the complete run's %d (1509)", n, lines)
	}
	if _, err := run(day, dayBill); err != nil {
		t.Fatal(err)
	}
	if n := lateRows(""); n != 0 {
		t.Fatalf("the day run again beside a failed next day: %d rows of the late payment, want none (the complete next day shows it)", n)
	}
}
