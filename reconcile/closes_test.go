package reconcile_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// Issue 20, case 3: an order is CLOSED only when no attempt of it can still be paid. A close from
// one channel closes that channel's attempt only; the others keep being asked.

// attemptOpen reports whether the order's attempt on channel (any ref) is open, failing when it
// has none.
func (w *world) attemptOpen(tradeNo, channel string) bool {
	w.t.Helper()
	all := w.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND channel = ?`, tradeNo, channel)
	if all == 0 {
		w.t.Fatalf("%s has no attempt on %s", tradeNo, channel)
	}
	return w.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND channel = ? AND closed_time IS NULL`, tradeNo, channel) > 0
}

// sentToBoth inserts an order of 19.99 CNY sent to WeChat Pay, whose trade the fake holds in
// status (its notification dropped), and then to Alipay as well.
func (w *world) sentToBoth(status string) string {
	w.t.Helper()
	tn := w.order("wechatpay", 1999)
	w.attempt(tn, "alipay", "")
	w.trade("wechatpay", tn, 1999, status, false)
	return tn
}

// wantPaidBy insists the order is PAID by channel, with no anomaly.
func (w *world) wantPaidBy(tradeNo, channel string) {
	w.t.Helper()
	o, err := w.db.GetOrder(context.Background(), tradeNo)
	if err != nil {
		w.t.Fatal(err)
	}
	if o.Status != payment.OrderPaid || o.Channel != channel {
		w.t.Fatalf("order %s by %q, want PAID by %s", o.Status, o.Channel, channel)
	}
	if n := w.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, tradeNo); n != 0 {
		w.t.Fatalf("%d anomalies, want none", n)
	}
}

// closedElsewherePaidHere is the reproduction: the buyer abandoned the trade at closer (closed
// there) and paid it on WeChat, whose notification was lost. closer's answer comes first.
func closedElsewherePaidHere(t *testing.T, closer string) {
	w := newWorld(t)
	tn := w.order("wechatpay", 1999)
	w.trade("wechatpay", tn, 1999, simulate.FakePaid, false)
	tr := w.trade(closer, tn, 1999, simulate.FakeClosed, false)
	ref := ""
	if closer == "stripe" {
		ref = tr.TxnID // the PaymentIntent the buyer was sent to
	}
	w.attempt(tn, closer, ref)

	sum, out := w.run(reconcile.Options{TradeNo: tn, Channel: closer})
	if sum.Closed != 1 {
		t.Fatalf("%s's answer: %+v, want closed\n%s", closer, sum, out)
	}
	if st := w.status(tn); st != payment.OrderWaitPay {
		t.Fatalf("order %s after %s closed while the WeChat attempt is open, want WAIT_PAY\n%s", st, closer, out)
	}
	if w.attemptOpen(tn, closer) || !w.attemptOpen(tn, "wechatpay") {
		t.Fatalf("want the %s attempt closed and the WeChat attempt open", closer)
	}

	_, out = w.run(reconcile.Options{TradeNo: tn})
	w.wantPaidBy(tn, "wechatpay")
	if n := w.fake.Asked("wechatpay", tn); n != 1 {
		t.Fatalf("WeChat asked %d times, want once\n%s", n, out)
	}
	if n := w.fake.Asked(closer, tn); n == 0 || closer != "stripe" && n != 1 {
		t.Fatalf("%s asked %d times: a closed attempt is not asked again\n%s", closer, n, out)
	}
	if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND channel = ? AND event = 'CLOSED' AND outcome = 'JOURNALLED'`, tn, closer); n != 1 {
		t.Fatalf("%s's close journalled %d times as JOURNALLED, want once", closer, n)
	}
}

// Alipay's TRADE_CLOSED answer closed the whole order; the paid WeChat attempt was never asked.
func TestIssue20Case03AlipayClosedAnswerKeepsWeChatAsked(t *testing.T) {
	closedElsewherePaidHere(t, "alipay")
}

// Stripe's "the PaymentIntent is canceled" answer did the same.
func TestIssue20Case03StripeCanceledAnswerKeepsWeChatAsked(t *testing.T) {
	closedElsewherePaidHere(t, "stripe")
}

// Stripe's search lags up to a minute: "every PaymentIntent found is canceled" does not prove
// there is none the buyer paid. A search alone never closes; the attempt stays open and asked.
func TestIssue20Case03StripeSearchAloneNeverCloses(t *testing.T) {
	w := newWorld(t)
	tn := w.order("stripe", 500) // no PaymentIntent id recorded: asked by search
	w.trade("stripe", tn, 500, simulate.FakeClosed, false)
	sum, out := w.run(reconcile.Options{TradeNo: tn})
	if sum.NotPaid != 1 || sum.Closed != 0 {
		t.Fatalf("%+v, want one not-paid answer\n%s", sum, out)
	}
	if st := w.status(tn); st != payment.OrderWaitPay {
		t.Fatalf("order %s after a search found only canceled PaymentIntents, want WAIT_PAY", st)
	}
	if !w.attemptOpen(tn, "stripe") {
		t.Fatal("the attempt was closed by a search")
	}
	if n := w.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND last_answer = 'NOT_PAID' AND last_status LIKE '%search%'`, tn); n != 1 {
		t.Fatalf("the attempt's last answer does not say the search alone was asked\n%s", out)
	}
}

// Alipay's TRADE_CLOSED notification closes the same way as its answer: the Alipay attempt only.
func TestIssue20Case03AlipayCloseNotificationKeepsWeChatAsked(t *testing.T) {
	w := newWorld(t)
	tn := w.sentToBoth(simulate.FakePaid)
	w.trade("alipay", tn, 1999, simulate.FakeClosed, true) // notifies TRADE_CLOSED now
	if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND channel = 'alipay' AND source = 'notify' AND event = 'CLOSED'`, tn); n != 1 {
		t.Fatalf("the close notification journalled %d times, want once", n)
	}
	if st := w.status(tn); st != payment.OrderWaitPay {
		t.Fatalf("order %s after Alipay's close notification while the WeChat attempt is open, want WAIT_PAY", st)
	}
	if w.attemptOpen(tn, "alipay") || !w.attemptOpen(tn, "wechatpay") {
		t.Fatal("want the Alipay attempt closed and the WeChat attempt open")
	}
	w.run(reconcile.Options{TradeNo: tn})
	w.wantPaidBy(tn, "wechatpay")
	if n := w.fake.Asked("alipay", tn); n != 0 {
		t.Fatalf("Alipay asked %d times after it closed the trade", n)
	}
}

// When every channel the order was sent to has closed, the last close closes the order; a
// payment that arrives after it is PAID_AFTER_CLOSE, as before.
func TestIssue20Case03LastCloseClosesTheOrder(t *testing.T) {
	w := newWorld(t)
	tn := w.sentToBoth(simulate.FakeClosed)
	w.trade("alipay", tn, 1999, simulate.FakeClosed, false)
	w.run(reconcile.Options{TradeNo: tn, Channel: "alipay"})
	if st := w.status(tn); st != payment.OrderWaitPay {
		t.Fatalf("order %s after the first close, want WAIT_PAY", st)
	}
	w.run(reconcile.Options{TradeNo: tn})
	if st := w.status(tn); st != payment.OrderClosed {
		t.Fatalf("order %s after both channels closed, want CLOSED", st)
	}
	if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND channel = 'wechatpay' AND outcome = 'CLOSED'`, tn); n != 1 {
		t.Fatalf("the last close journalled CLOSED %d times, want once", n)
	}
	if sum, _ := w.run(reconcile.Options{TradeNo: tn}); sum.Asked != 0 {
		t.Fatalf("closed attempts asked again: %+v", sum)
	}

	late := simulate.FakeTrade{Channel: "wechatpay", TradeNo: tn, AmountFen: 1999, PaidAt: time.Now().UTC().Truncate(time.Second)}
	if r := w.notify(late); r.Err != nil || r.Status/100 != 2 {
		t.Fatalf("late payment: %+v", r)
	}
	if n := w.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'PAID_AFTER_CLOSE'`, tn); n != 1 {
		t.Fatalf("PAID_AFTER_CLOSE anomalies = %d, want 1", n)
	}
	if st := w.status(tn); st != payment.OrderClosed {
		t.Fatalf("order %s after a payment after close, want CLOSED (an anomaly for a person)", st)
	}
}

// An attempt still open when reconcile.query_max_age passes is asked no more: once another
// channel has closed the order, the job gives it up through apply, and the order closes. An
// order no channel closed stays WAIT_PAY.
func TestIssue20Case03MaxAgeClosesAfterAnotherChannelClosed(t *testing.T) {
	w := newWorld(t)
	tn := w.sentToBoth(simulate.FakePending) // NOTPAY, for ever
	w.trade("alipay", tn, 1999, simulate.FakeClosed, false)
	untouched := w.order("wechatpay", 1999)
	w.trade("wechatpay", untouched, 1999, simulate.FakePending, false)

	w.run(reconcile.Options{TradeNo: tn})
	if st := w.status(tn); st != payment.OrderWaitPay {
		t.Fatalf("order %s while the WeChat attempt is asked, want WAIT_PAY", st)
	}
	// Both orders' attempts were made five minutes ago: past a max age of two minutes.
	sum, out := w.run(reconcile.Options{MaxAge: 2 * time.Minute})
	if sum.Asked != 0 {
		t.Fatalf("%+v, want nothing asked past query_max_age\n%s", sum, out)
	}
	if st := w.status(tn); st != payment.OrderClosed {
		t.Fatalf("order %s once the WeChat attempt passed query_max_age, want CLOSED\n%s", st, out)
	}
	if st := w.status(untouched); st != payment.OrderWaitPay {
		t.Fatalf("an order no channel closed is %s, want WAIT_PAY", st)
	}
	if !strings.Contains(out, tn+" wechatpay past query_max_age") {
		t.Fatalf("the run does not say what it gave up:\n%s", out)
	}
	if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND notify_id = ? AND source = 'query' AND outcome = 'CLOSED'`,
		tn, "query:max-age:"+tn); n != 1 {
		t.Fatalf("the give-up journalled %d times, want once", n)
	}
	if _, out := w.run(reconcile.Options{MaxAge: 2 * time.Minute}); strings.Contains(out, "past query_max_age") {
		t.Fatalf("a second run gave up again:\n%s", out)
	}
}

// An order an earlier paygw closed on one channel's answer, while another attempt was open, has
// that attempt asked again: the payment found there is PAID_AFTER_CLOSE, for a person, instead of
// money nobody sees.
func TestIssue20Case03ClosedOrderOpenAttemptStillAsked(t *testing.T) {
	w := newWorld(t)
	tn := w.order("wechatpay", 1999)
	w.trade("wechatpay", tn, 1999, simulate.FakePaid, false)
	if err := w.db.InTx(context.Background(), func(tx *repository.Tx) error {
		_, err := tx.MarkClosed(context.Background(), tn, time.Now()) // as the old close left it
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sum, out := w.run(reconcile.Options{OlderThan: time.Second})
	if sum.Asked != 1 || sum.Paid != 1 {
		t.Fatalf("%+v, want the open attempt of the CLOSED order asked\n%s", sum, out)
	}
	if n := w.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'PAID_AFTER_CLOSE' AND channel = 'wechatpay'`, tn); n != 1 {
		t.Fatalf("PAID_AFTER_CLOSE anomalies = %d, want 1\n%s", n, out)
	}
}

// Issue 20, case 12 end to end: with channels.stripe.api_base_url behind an egress proxy's
// /stripe, the job repairs a lost Stripe payment and the Stripe bill downloads, both through
// the prefix.
func TestIssue20Case12StripeBehindPathPrefix(t *testing.T) {
	w := newWorldBehind(t, "/stripe")
	tn := w.order("stripe", 2500)
	tr := w.trade("stripe", tn, 2500, simulate.FakePaid, false)
	sum, out := w.run(reconcile.Options{TradeNo: tn})
	if sum.Paid != 1 || sum.Failed+sum.Unverified != 0 {
		t.Fatalf("%+v, want the payment found\n%s", sum, out)
	}
	w.wantPaidBy(tn, "stripe")

	day := tr.PaidAt.UTC().Truncate(24 * time.Hour)
	b, err := w.bills["stripe"].DownloadBill(context.Background(), day)
	if err != nil {
		t.Fatalf("bill through the prefix: %v", err)
	}
	defer b.Close()
	r, err := b.Open()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		found = found || l.TradeNo == tn && l.AmountFen == 2500
	}
	if !found {
		t.Fatalf("the Stripe bill of %s lacks %s", day.Format(time.DateOnly), tn)
	}

	// Without the prefix the proxy routes nothing to Stripe: the prefix is what was used.
	if n := w.fake.Asked("stripe", tn); n == 0 {
		t.Fatal("the fake Stripe was never asked")
	}
	resp, err := http.Get(w.fakeURL + "/v1/payment_intents/search")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("Stripe's path outside the prefix answered %d, want 404", resp.StatusCode)
	}
}
