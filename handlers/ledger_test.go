package handlers

import (
	"testing"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// Issue 20, case 4: a Stripe Checkout payment's charge.refunded carries no metadata of ours, and
// Stripe does not order events, so it may come before the payment's checkout.session.completed.
// It was journalled as OTHER, answered 200 and marked done, with no refund kept: the order ended
// PAID with nothing refunded after Stripe refunded it. It is kept PENDING under the
// PaymentIntent and counted when the payment applies, whichever arrives first and however often.
func TestIssue20Case04EarlyStripeRefundIsKept(t *testing.T) {
	h := newHarness(t, options{})
	base := sandbox.signers["stripe"].(simulate.StripeSigner)
	checkout := simulate.StripeSigner{Secret: base.Secret, Event: simulate.StripeCheckoutSessionDone}
	for name, refundFirst := range map[string]bool{"refund first": true, "payment first": false} {
		t.Run(name, func(t *testing.T) {
			tn := h.seedOrder(1999)
			pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}
			refund := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 700, RefundID: "re_" + tn}
			order := []simulate.Payment{pay, refund}
			if refundFirst {
				order = []simulate.Payment{refund, pay}
			}
			for _, p := range append(order, order...) { // each delivered twice
				m, err := checkout.Sign(p)
				if err != nil {
					t.Fatal(err)
				}
				wantChannelReply(t, "stripe", h.deliver("stripe", m), payment.ReplySuccess)
			}
			if o := h.order(tn); o.Status != payment.OrderPaid || o.RefundedFen != 700 {
				t.Fatalf("order %s refunded %d; want PAID refunded 700", o.Status, o.RefundedFen)
			}
			if n := h.count(`SELECT COUNT(*) FROM refund WHERE trade_no = ? AND status = 'APPLIED'`, tn); n == 0 {
				t.Fatalf("no APPLIED refund rows for %s", tn)
			}
			if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE event = 'OTHER' AND channel_txn_id IN (SELECT channel_txn_id FROM refund WHERE trade_no = ?)`, tn); n != 0 {
				t.Fatalf("charge.refunded journalled as OTHER %d times", n)
			}
		})
	}
}
