package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// refundsOf reads GET /v1/payments/{trade_no}: the order's refunded_fen and its refunds.
func (h *harness) refundsOf(tradeNo string) (refundedFen int64, refunds []refundView) {
	h.t.Helper()
	r := h.do("GET", "/v1/payments/"+tradeNo, testToken, nil, "")
	if r.code != http.StatusOK {
		h.t.Fatalf("GET /v1/payments/%s: %d %s", tradeNo, r.code, r.body)
	}
	var v struct {
		Order struct {
			RefundedFen *int64 `json:"refunded_fen"`
		} `json:"order"`
		Refunds []refundView `json:"refunds"`
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil || v.Order.RefundedFen == nil || v.Refunds == nil {
		h.t.Fatalf("payment view without refunded_fen or refunds (%v): %s", err, r.body)
	}
	return *v.Order.RefundedFen, v.Refunds
}

// refundsAll is the refunds GET /v1/payments/{trade_no} shows.
func (h *harness) refundsAll(tradeNo string) []refundView {
	h.t.Helper()
	_, refunds := h.refundsOf(tradeNo)
	return refunds
}

// ledgerTotal is the running total among the refunds shown (an APPLIED TOTAL row), nil if none.
func ledgerTotal(refunds []refundView) *int64 {
	for _, r := range refunds {
		if r.Kind == payment.RefundTotal && r.Status == payment.RefundApplied {
			return r.AmountFen
		}
	}
	return nil
}

// A refund of a payment paygw recorded but did not apply (a second payment of a paid order) is
// found through that payment's anomaly: answered success, journalled against its order, the
// anomaly marked refunded; the order's own payment is not touched. On every channel.
func TestRefundOfADuplicatePaymentEveryChannel(t *testing.T) {
	h := newHarness(t, options{})
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) {
			tn := h.paidOrder(t, ch, 1999)
			dup := otherTxn(ch, tn)
			wantChannelReply(t, ch, h.send(ch, simulate.Payment{TradeNo: tn, AmountFen: 1999, TxnID: dup}), payment.ReplySuccess)
			refund := simulate.Payment{TradeNo: tn, AmountFen: 1999, TxnID: dup, Status: simulate.StatusRefund, RefundFen: 1999}
			for range 2 { // and its redelivery
				wantChannelReply(t, ch, h.send(ch, refund), payment.ReplySuccess)
			}
			if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'DUPLICATE_PAYMENT' AND status = 'refunded'`, tn); n != 1 {
				t.Fatalf("DUPLICATE_PAYMENT anomalies marked refunded = %d, want 1", n)
			}
			if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'ANOMALY_REFUNDED'`, tn); n != 1 {
				t.Fatalf("refund journalled against its order %d times, want 1", n)
			}
			refunded, refunds := h.refundsOf(tn)
			if refunded != 0 || len(refunds) == 0 {
				t.Fatalf("refunded_fen %d, refunds %+v; want 0 and the refund of %s", refunded, refunds, dup)
			}
			for _, r := range refunds { // the item, and the TOTAL where the channel states one
				if r.Status != payment.RefundAnomaly || r.ChannelTxnID != dup {
					t.Fatalf("refunds %+v; want every row ANOMALY, of %s", refunds, dup)
				}
			}
			if o := h.order(tn); o.Status != payment.OrderPaid || o.ChannelTxnID == dup {
				t.Fatalf("order = %+v", o)
			}
		})
	}
}

// Alipay's TRADE_CLOSED carrying refund_fee is a full refund of a paid trade. Arriving before
// the trade's TRADE_SUCCESS it never closes the order: the payment still applies, and the refund
// counts once the order is PAID. Arriving after, it refunds at once. Either way: PAID, refunded
// in full, no PAID_AFTER_CLOSE telling an operator to refund money already refunded.
func TestAlipayRefundingCloseInEitherOrder(t *testing.T) {
	h := newHarness(t, options{})
	for name, closeFirst := range map[string]bool{"close before payment": true, "close after payment": false} {
		t.Run(name, func(t *testing.T) {
			tn := h.seedOrder(2000)
			paid := simulate.Payment{TradeNo: tn, AmountFen: 2000}
			closed := simulate.Payment{TradeNo: tn, AmountFen: 2000, Status: simulate.StatusRefund, RefundFen: 2000}
			if m, err := sandbox.signers["alipay"].Sign(closed); err != nil || !bytes.Contains(m.Body, []byte("TRADE_CLOSED")) {
				t.Fatalf("the simulator's full Alipay refund is not a TRADE_CLOSED (%v)", err)
			}
			order := []simulate.Payment{paid, closed}
			if closeFirst {
				order = []simulate.Payment{closed, paid}
			}
			for _, p := range append(order, order...) { // each delivered twice
				wantChannelReply(t, "alipay", h.send("alipay", p), payment.ReplySuccess)
			}
			o := h.order(tn)
			if o.Status != payment.OrderPaid || o.RefundedFen != 2000 {
				t.Fatalf("order %s, refunded %d; want PAID, 2000", o.Status, o.RefundedFen)
			}
			if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, tn); n != 0 {
				t.Fatalf("anomalies = %d, want 0", n)
			}
			refunded, refunds := h.refundsOf(tn)
			// TRADE_CLOSED states the running total: the payment's TOTAL row, APPLIED, 2000.
			if total := ledgerTotal(refunds); refunded != 2000 || total == nil || *total != 2000 {
				t.Fatalf("refunded_fen %d, refunds %+v; want 2000 and an APPLIED running total of 2000", refunded, refunds)
			}
		})
	}
}

// A refund larger than what is left of the payment is an anomaly; the order is left untouched,
// and the channel is told success (it will not refund more by retrying). On every channel.
func TestRefundExceedingThePaymentEveryChannel(t *testing.T) {
	h := newHarness(t, options{})
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) {
			tn := h.paidOrder(t, ch, 1999)
			first := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 1500}
			wantChannelReply(t, ch, h.send(ch, first), payment.ReplySuccess)
			// 1000 more would make 2500 of 1999 paid; channels stating totals say 2500.
			over := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 1000, RefundTotalFen: 2500}
			for range 2 {
				wantChannelReply(t, ch, h.send(ch, over), payment.ReplySuccess)
			}
			if o := h.order(tn); o.Status != payment.OrderPaid || o.RefundedFen != 1500 {
				t.Fatalf("order %s refunded %d, want PAID refunded 1500", o.Status, o.RefundedFen)
			}
			if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'REFUND_EXCEEDS_PAYMENT'`, tn); n != 1 {
				t.Fatalf("REFUND_EXCEEDS_PAYMENT anomalies = %d, want 1", n)
			}
			refused := 0
			for _, r := range h.refundsAll(tn) {
				if r.Status == payment.RefundRefused {
					refused++
				}
			}
			if n := h.count(`SELECT COUNT(*) FROM refund WHERE trade_no = ? AND status = 'REFUSED'`, tn); n != 1 || refused != 1 {
				t.Fatalf("refused ledger rows %d (%d shown), want the second refund's one", n, refused)
			}
		})
	}
}

// The refund of a payment that did not match its order (AMOUNT_MISMATCH) is found through the
// anomaly too.
func TestRefundOfAMismatchedPayment(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1999)
	wantChannelReply(t, "alipay", h.send("alipay", simulate.Payment{TradeNo: tn, AmountFen: 1}), payment.ReplySuccess)
	refund := simulate.Payment{TradeNo: tn, AmountFen: 1, Status: simulate.StatusRefund, RefundFen: 1}
	wantChannelReply(t, "alipay", h.send("alipay", refund), payment.ReplySuccess)
	if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'AMOUNT_MISMATCH' AND status = 'refunded'`, tn); n != 1 {
		t.Fatalf("AMOUNT_MISMATCH anomalies marked refunded = %d, want 1", n)
	}
	if o := h.order(tn); o.Status != payment.OrderWaitPay || o.RefundedFen != 0 {
		t.Fatalf("order %+v, want WAIT_PAY with nothing refunded", o)
	}
	if n := h.count(`SELECT COUNT(*) FROM refund WHERE trade_no = ? AND status = 'PENDING'`, tn); n != 0 {
		t.Fatalf("PENDING refunds = %d, want 0: the refund is the anomaly's", n)
	}
}
