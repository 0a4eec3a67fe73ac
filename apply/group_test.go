package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

// queueBehind makes the fixture's only lane busy with a payment stuck on a row lock the test
// holds, then runs each event in its own goroutine and waits until all of them queue behind it.
// release lets the stuck payment finish; the next caller to get the lane then takes the whole
// queue into one group. results are in the order of evs.
func (f *fixture) queueBehind(evs []payment.Event) (release func(), results func() []groupAnswer) {
	f.t.Helper()
	f.a.SetGroupLanes(1)
	stuckNo := f.order(100)
	raw, err := sql.Open("mysql", f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()
	hold, err := raw.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	var locked string
	if err := hold.QueryRowContext(ctx, "SELECT trade_no FROM orders WHERE trade_no = ? FOR UPDATE", stuckNo).Scan(&locked); err != nil {
		f.t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = hold.Rollback() }) }
	f.t.Cleanup(release)

	answers := make([]groupAnswer, len(evs)+1)
	var wg sync.WaitGroup
	run := func(i int, ev payment.Event) {
		defer wg.Done()
		o, err := f.a.Apply(ctx, ev)
		answers[i] = groupAnswer{o, err}
	}
	wg.Add(1)
	go run(len(evs), paid(stuckNo, "STUCK-"+stuckNo, 100))
	testenv.EventuallyEvery(f.t, 3*time.Second, 120*time.Millisecond, func() error {
		if q, w := f.a.Queued(), lockWaits(f); q != 0 || w == 0 {
			return fmt.Errorf("the stuck payment does not hold the lane: %d queued, %d lock waits", q, w)
		}
		return nil
	})
	for i, ev := range evs {
		wg.Add(1)
		go run(i, ev)
	}
	testenv.Eventually(f.t, 3*time.Second, func() error {
		if n := f.a.Queued(); n != len(evs) {
			return fmt.Errorf("%d of %d payments queued", n, len(evs))
		}
		return nil
	})
	return release, func() []groupAnswer {
		wg.Wait()
		if a := answers[len(evs)]; a.err != nil || a.outcome != payment.OutcomeApplied {
			f.t.Fatalf("the stuck payment: %q, %v", a.outcome, a.err)
		}
		return answers[:len(evs)]
	}
}

type groupAnswer struct {
	outcome payment.Outcome
	err     error
}

// lockWaits counts transactions waiting for a row lock on the server (this test's and others').
// InnoDB refreshes INNODB_TRX only when it was last read over 100 ms ago: poll it slower.
func lockWaits(f *fixture) int {
	return f.count("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
}

// A group holding every kind of payment: each one ends exactly as on the single path (the outcome
// table of apply_test.go), the clean ones in one shared transaction, the others alone after it.
// Redis is down, so every payment reaches MySQL (with Redis up the guard would hold a second
// payment for the same order back as a twin).
func TestGroupApplyEveryItemAsAlone(t *testing.T) {
	f := newFixture(t, false)
	clean := []string{f.order(1000), f.order(2000), f.order(3000), f.order(4000)}
	mismatch := f.order(5000)
	pending := f.order(6000)
	f.apply(refunded(pending, "PP", "RP", 6000, false), payment.OutcomeRefundPending)
	twice := f.order(8000)
	closed := f.order(9000)
	f.apply(payment.Event{Channel: "alipay", NotifyID: "n-close", TradeNo: closed, Kind: payment.KindClosed,
		Status: "TRADE_CLOSED", Currency: "CNY", Raw: []byte("close")}, payment.OutcomeClosed)

	evs := []payment.Event{
		paid(clean[0], "P0", 1000), paid(clean[1], "P1", 2000), paid(clean[2], "P2", 3000), paid(clean[3], "P3", 4000),
		paid(mismatch, "PM", 4999),
		paid(pending, "PP", 6000),
		paid("T-NOT-OURS", "PU", 100),
		paid(twice, "PT1", 8000), paid(twice, "PT2", 8000),
		paid(closed, "PC", 9000),
	}
	want := []payment.Outcome{
		payment.OutcomeApplied, payment.OutcomeApplied, payment.OutcomeApplied, payment.OutcomeApplied,
		payment.OutcomeAmountMismatch,
		payment.OutcomeApplied, // alone, its pending refund counted in
		payment.OutcomeUnknownOrder,
		payment.OutcomeApplied, payment.OutcomeDuplicatePayment, // in the order they queued (either)
		payment.OutcomePaidAfterClose,
	}
	release, results := f.queueBehind(evs)
	groups0, applied0 := f.a.GroupStats()
	release()
	got := results()
	first := "PT1" // the payment for `twice` that queued first is the one applied
	if got[8].outcome == payment.OutcomeApplied {
		want[7], want[8], first = payment.OutcomeDuplicatePayment, payment.OutcomeApplied, "PT2"
	}
	for i := range got {
		if got[i].err != nil || got[i].outcome != want[i] {
			t.Errorf("%s %s: %q, %v; want %q", evs[i].TradeNo, evs[i].ChannelTxnID, got[i].outcome, got[i].err, want[i])
		}
	}
	groups, applied := f.a.GroupStats()
	// The clean four and one payment for `twice` share one transaction.
	if groups-groups0 != 1 || applied-applied0 != 5 {
		t.Errorf("%d group(s) committed, applying %d payments; want 1 group of 5", groups-groups0, applied-applied0)
	}
	for _, tn := range append(clean, twice, pending) {
		if o := f.get(tn); o.Status != payment.OrderPaid {
			t.Errorf("%s is %s", tn, o.Status)
		}
	}
	if o := f.get(pending); o.RefundedFen != 6000 {
		t.Errorf("the pending refund was not counted in: refunded %d", o.RefundedFen)
	}
	if o := f.get(twice); o.ChannelTxnID != first {
		t.Errorf("%s paid by %s, want %s, the payment answered APPLIED", twice, o.ChannelTxnID, first)
	}
	// One record per payment that names an order of ours (9), and the stuck payment's.
	if n := f.count("SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'"); n != 10 {
		t.Errorf("%d pay_notify records, want 10", n)
	}
	// APPLIED: the four, pending, twice's first, the stuck one.
	if n := f.count("SELECT COUNT(*) FROM notify_journal WHERE outcome = 'APPLIED'"); n != 7 {
		t.Errorf("%d APPLIED journal rows, want 7", n)
	}
	if n := f.count("SELECT COUNT(*) FROM anomaly"); n != 3 {
		t.Errorf("%d anomalies, want 3 (mismatch, duplicate payment, paid after close)", n)
	}
}

// A group whose record insert hits a duplicate key fails as a whole, and each of its payments is
// applied alone: here a channel that reused one transaction id for two orders. The first order
// is paid, the second answered as a repeat and left WAIT_PAY, as on the single path; the clean
// payment in the same failed group is applied alone.
func TestGroupApplyFailedGroupGoesAlone(t *testing.T) {
	f := newFixture(t, false)
	nos := []string{f.order(1000), f.order(2000), f.order(3000)}
	evs := []payment.Event{paid(nos[0], "P0", 1000), paid(nos[1], "P1", 2000), paid(nos[2], "P1", 3000)}
	evs[2].NotifyID = "n-P1-again"
	release, results := f.queueBehind(evs)
	groups0, _ := f.a.GroupStats()
	release()
	got := results()
	if groups, _ := f.a.GroupStats(); groups != groups0 {
		t.Errorf("%d group(s) committed; the failed group must commit nothing", groups-groups0)
	}
	if got[0].err != nil || got[0].outcome != payment.OutcomeApplied {
		t.Errorf("the clean payment: %q, %v", got[0].outcome, got[0].err)
	}
	// Which of the two orders gets P1 depends on which goes alone first; one is paid, the other not.
	if got[1].err != nil || got[2].err != nil ||
		!(got[1].outcome == payment.OutcomeApplied && got[2].outcome == payment.OutcomeRepeat ||
			got[1].outcome == payment.OutcomeRepeat && got[2].outcome == payment.OutcomeApplied) {
		t.Errorf("the two payments with one transaction id: %+v, %+v; want one APPLIED, one REPEAT", got[1], got[2])
	}
	paidCount := 0
	for _, tn := range nos[1:] {
		if f.get(tn).Status == payment.OrderPaid {
			paidCount++
		}
	}
	if paidCount != 1 || f.get(nos[0]).Status != payment.OrderPaid {
		t.Errorf("%d of the two orders paid by P1, want 1; the clean one %s", paidCount, f.get(nos[0]).Status)
	}
	if n := f.count("SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'"); n != 3 {
		t.Errorf("%d pay_notify records, want 3 (P0, P1, the stuck one)", n)
	}
}
