package reconcile_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// listing is a run's discrepancies, by line: its channel_txn_id.
func (w *world) listing(runID int64) map[string]reconcile.Discrepancy {
	w.t.Helper()
	out := map[string]reconcile.Discrepancy{}
	if err := w.job.Discrepancies(context.Background(), runID, func(d reconcile.Discrepancy) error {
		out[d.ChannelTxnID] = d
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// A day run twice: the first run repairs a CHANNEL_ONLY payment, the second finds it matched.
// Both runs list it, under one id, repaired by the first run: the second's report still shows
// what was repaired. A line the second bill no longer holds is gone.
func TestRerunKeepsWhatWasRepaired(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().AddDate(0, 0, -6).Truncate(24 * time.Hour)
	ts := day.Add(9 * time.Hour).Format(time.RFC3339)
	channelOnly := w.bareOrder(100)
	first := w.runCSV("alipay", day,
		fmt.Sprintf("%s,L1,PAY,100,CNY,%s,", channelOnly, ts),
		fmt.Sprintf("NOTOURS,L2,PAY,250,CNY,%s,", ts))
	second := w.runCSV("alipay", day, fmt.Sprintf("%s,L1,PAY,100,CNY,%s,", channelOnly, ts))
	if first.New != 2 || second.New != 0 || second.Counts[reconcile.ClassMatched] != 1 {
		t.Fatalf("new %d then %d, second counts %v; want 2, 0 and the repaired payment MATCHED", first.New, second.New, second.Counts)
	}
	a, b := w.listing(first.RunID), w.listing(second.RunID)
	for _, l := range []map[string]reconcile.Discrepancy{a, b} {
		if len(l) != 2 {
			t.Fatalf("listings %+v and %+v: want both lines in both runs", a, b)
		}
	}
	if a["L1"].ID != b["L1"].ID || a["L2"].ID != b["L2"].ID || a["L1"].ID == a["L2"].ID {
		t.Fatalf("ids: first run %d, %d; second %d, %d; want one stable id per line", a["L1"].ID, a["L2"].ID, b["L1"].ID, b["L2"].ID)
	}
	repaired := b["L1"]
	if repaired.Status != repository.StatusRepaired || repaired.Found || repaired.Class != reconcile.ClassChannelOnly ||
		repaired.Repair != string(payment.OutcomeApplied) || !a["L1"].Found {
		t.Fatalf("the repaired payment in the second run: %+v; want repaired, CHANNEL_ONLY, APPLIED, found by the first run only", repaired)
	}
	it, err := w.db.GetDiscrepancy(context.Background(), repaired.ID)
	if err != nil || it.RepairedRunID == nil || *it.RepairedRunID != first.RunID || it.RepairedOutcome != string(payment.OutcomeApplied) {
		t.Fatalf("item %+v (%v): want repaired by run %d with APPLIED", it, err, first.RunID)
	}
	gone, err := w.db.GetDiscrepancy(context.Background(), a["L2"].ID)
	if err != nil || gone.Status != repository.StatusGone || gone.GoneRunID == nil || *gone.GoneRunID != second.RunID || b["L2"].Found {
		t.Fatalf("the line the second bill lacks: %+v (%v); want gone since run %d", gone, err, second.RunID)
	}
	if st := w.status(channelOnly); st != payment.OrderPaid {
		t.Fatalf("the CHANNEL_ONLY order is %s", st)
	}
	// The totals: per class and currency, the count and the amount.
	want := map[string]repository.ClassTotal{
		reconcile.ClassChannelOnly:  {Class: reconcile.ClassChannelOnly, Currency: "CNY", Count: 1, AmountFen: 100},
		reconcile.ClassUnknownOrder: {Class: reconcile.ClassUnknownOrder, Currency: "CNY", Count: 1, AmountFen: 250},
	}
	run, err := w.db.GetRun(context.Background(), first.RunID)
	if err != nil || len(run.Totals()) != len(want) {
		t.Fatalf("first run's totals %+v (%v), want %v", run.Totals(), err, want)
	}
	for _, got := range run.Totals() {
		if got != want[got.Class] {
			t.Fatalf("total %+v, want %+v", got, want[got.Class])
		}
	}
	// A gone line that comes back is open again: a new finding.
	third := w.runCSV("alipay", day, fmt.Sprintf("%s,L1,PAY,100,CNY,%s,", channelOnly, ts), fmt.Sprintf("NOTOURS,L2,PAY,250,CNY,%s,", ts))
	if back := w.listing(third.RunID)["L2"]; back.ID != a["L2"].ID || back.Status != repository.StatusOpen || !back.Found {
		t.Fatalf("the line back in the third run: %+v, want item %d open again", back, a["L2"].ID)
	}
}

// A PENDING payment is open until the next day's bill settles it: gone when that bill holds it.
func TestPendingGoesWhenTheNextBillHoldsIt(t *testing.T) {
	w := newWorld(t)
	day := time.Now().UTC().Truncate(24 * time.Hour)
	tn := w.paidOrder("P1", 100, day.Add(24*time.Hour-time.Minute))
	first := w.runCSV("alipay", day)
	pending := w.listing(first.RunID)["P1"]
	if pending.Class != reconcile.ClassPending || pending.Status != repository.StatusOpen {
		t.Fatalf("today's bill: %+v, want PENDING open", pending)
	}
	next := w.runCSV("alipay", day.AddDate(0, 0, 1), fmt.Sprintf("%s,P1,PAY,100,CNY,%s,", tn, day.Add(24*time.Hour+time.Minute).Format(time.RFC3339)))
	it, err := w.db.GetDiscrepancy(context.Background(), pending.ID)
	if err != nil || it.Status != repository.StatusGone || it.GoneRunID == nil || *it.GoneRunID != next.RunID {
		t.Fatalf("after the next day's bill: %+v (%v); want gone since run %d", it, err, next.RunID)
	}
	run, err := w.db.GetRun(context.Background(), first.RunID)
	if err != nil || len(run.Totals()) != 0 {
		t.Fatalf("the first day's totals after the settle: %+v (%v); want none left", run.Totals(), err)
	}
}

// Sign-off: refused while anything is open; after resolving, accepted; a later run that finds
// something new reopens the day, once, with its event and its count.
func TestSignOffAndReopen(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	day := time.Now().UTC().AddDate(0, 0, -8).Truncate(24 * time.Hour)
	ts := day.Add(9 * time.Hour).Format(time.RFC3339)
	first := w.runCSV("alipay", day, fmt.Sprintf("NOTOURS,U1,PAY,100,CNY,%s,", ts))
	e := access.Entry{At: time.Now(), Actor: "fin", Role: access.Finance, Action: "reconciliation.signoff", Target: "reconciliation:alipay/" + day.Format(time.DateOnly)}
	_, err := w.db.SignOffDay(ctx, "alipay", day, "fin", "checked", time.Now(), e)
	var open *repository.OpenError
	id := w.listing(first.RunID)["U1"].ID
	if !errors.As(err, &open) || open.Count != 1 || len(open.Open) != 1 || open.Open[0].ID != id || open.Open[0].Class != reconcile.ClassUnknownOrder {
		t.Fatalf("sign-off with U1 open: %v %+v; want refused, listing item %d UNKNOWN_ORDER", err, open, id)
	}
	if _, err := reconcile.ResolveDiscrepancy(ctx, w.db, w.applier, id, reconcile.ActionWriteOff, "not ours", access.Entry{At: time.Now(), Actor: "fin"}); err != nil {
		t.Fatal(err)
	}
	s, err := w.db.SignOffDay(ctx, "alipay", day, "fin", "checked", time.Now(), e)
	if err != nil || s.Status != repository.DaySignedOff || s.SignedOffBy != "fin" {
		t.Fatalf("sign-off after resolving: %+v %v", s, err)
	}
	if _, err := w.db.SignOffDay(ctx, "alipay", day, "fin", "again", time.Now(), e); !errors.Is(err, payment.ErrConflict) {
		t.Fatalf("signing off twice: %v, want a conflict", err)
	}
	// The same bill again finds nothing new: the day stays signed off.
	if again := w.runCSV("alipay", day, fmt.Sprintf("NOTOURS,U1,PAY,100,CNY,%s,", ts)); again.Reopened || again.New != 0 {
		t.Fatalf("a re-run finding nothing new: %+v", again)
	}
	reopening := w.runCSV("alipay", day, fmt.Sprintf("NOTOURS,U1,PAY,100,CNY,%s,", ts), fmt.Sprintf("NOTOURS,U2,PAY,300,CNY,%s,", ts))
	if !reopening.Reopened || reopening.New != 1 {
		t.Fatalf("a run finding U2: reopened %v, new %d; want reopened by 1", reopening.Reopened, reopening.New)
	}
	if s, err := w.db.DaySignOff(ctx, "alipay", day); err != nil || s.Status != repository.DayReopened || s.ReopenCount != 1 ||
		s.ReopenedRunID == nil || *s.ReopenedRunID != reopening.RunID {
		t.Fatalf("the day after: %+v %v", s, err)
	}
	if _, err := w.db.SequenceEvents(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	page, err := w.db.Events(ctx, 0, []string{payment.EventReconciliationReopened}, 10)
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("reopened events in the feed: %+v %v", page, err)
	}
	body := page.Events[0].Body
	var ev struct {
		Type string
		Data struct {
			Channel       string
			BillDate      string `json:"bill_date"`
			RunID         int64  `json:"run_id"`
			Discrepancies int
			SignedOffBy   string `json:"signed_off_by"`
		}
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Type != payment.EventReconciliationReopened || ev.Data.RunID != reopening.RunID ||
		ev.Data.Discrepancies != 1 || ev.Data.SignedOffBy != "fin" || ev.Data.BillDate != day.Format(time.DateOnly) {
		t.Fatalf("event %s (%v)", body, err)
	}
	st, err := w.db.StoredState(ctx)
	if err != nil || st.Reopened["alipay"] != 1 || st.DaysReopened["alipay"] != 1 {
		t.Fatalf("stored state: reopened %v, days %v (%v)", st.Reopened, st.DaysReopened, err)
	}
	// Another run finding more while reopened: no second reopening until signed off again.
	if more := w.runCSV("alipay", day, fmt.Sprintf("NOTOURS,U3,PAY,1,CNY,%s,", ts)); more.Reopened {
		t.Fatal("a reopened day reopened again")
	}
	if n := w.count(`SELECT COUNT(*) FROM event WHERE type = ?`, payment.EventReconciliationReopened); n != 1 {
		t.Fatalf("%d reopened events, want 1", n)
	}
}

// accept_channel on an untrusted run's REFUND_CHANNEL_ONLY puts the refund in the ledger through
// the refund path, once: a trusted bill of the same line later matches it and refunds nothing more.
func TestAcceptChannelRefund(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	day := time.Now().UTC().AddDate(0, 0, -9).Truncate(24 * time.Hour)
	at := day.Add(9 * time.Hour)
	tn := w.paidOrder("RP1", 100, at)
	l := reconcile.BillLineRef{BillLine: repository.BillLine{No: 2, Kind: "REFUND", TradeNo: tn, ChannelTxnID: "RP1", RefundID: "RF1",
		AmountFen: 30, Currency: "CNY", Time: at}, BillKey: "bill:id:RF1"}
	raw, _ := json.Marshal(l)
	run, err := w.db.StartRun(ctx, "alipay", repository.SourceChannel, day, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.db.PutDiscrepancy(ctx, repository.Discrepancy{RunID: run, Channel: "alipay", BillDate: day, LineKey: "refund:RP1:RF1",
		Class: reconcile.ClassRefundChannelOnly, TradeNo: tn, ChannelTxnID: "RP1", Repair: reconcile.RepairUntrusted,
		Line: sql.NullString{String: string(raw), Valid: true}}); err != nil {
		t.Fatal(err)
	}
	if err := w.db.CompleteRun(ctx, run, repository.RunTotals{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	id := w.listing(run)["RP1"].ID
	it, err := reconcile.ResolveDiscrepancy(ctx, w.db, w.applier, id, reconcile.ActionAcceptChannel, "the channel refunded it",
		access.Entry{At: time.Now(), Actor: "fin", Role: access.Finance})
	if err != nil || it.Resolution == nil || it.Resolution.Outcome != string(payment.OutcomeRefunded) || !reconcile.MovesMoney(it.Resolution) {
		t.Fatalf("accept_channel: %+v %v", it, err)
	}
	if got := w.refunded(tn); got != 30 {
		t.Fatalf("refunded_fen %d, want 30", got)
	}
	rep := w.runCSV("alipay", day, fmt.Sprintf("%s,RP1,PAY,100,CNY,%s,", tn, at.Format(time.RFC3339)),
		fmt.Sprintf("%s,RP1,REFUND,30,CNY,%s,RF1", tn, at.Format(time.RFC3339)))
	if rep.Counts[reconcile.ClassRefundMatched] != 1 || w.refunded(tn) != 30 {
		t.Fatalf("the trusted bill afterwards: %v, refunded_fen %d; want REFUND_MATCHED and 30", rep.Counts, w.refunded(tn))
	}
	if got, err := w.db.GetDiscrepancy(ctx, id); err != nil || got.Status != repository.StatusResolved {
		t.Fatalf("the resolved refund after the trusted run: %+v %v; want it to stay resolved", got, err)
	}
}
