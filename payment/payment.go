// Package payment is paygw's domain root: the channel-neutral shapes of a verified notification
// and of what paygw decided about it, the orders, stock, refunds and anomalies they act on, and
// the sentinel errors every layer shares. channels/ produces events, repository/ stores these
// types, apply/ and orders/ decide, handlers/ renders; each of them imports this package and
// none needs to know the others.
package payment

import "time"

// Kind is what a verified notification says happened, in channel-neutral words.
type Kind string

const (
	KindPaid    Kind = "PAID"    // the buyer paid: a candidate for WAIT_PAY -> PAID
	KindClosed  Kind = "CLOSED"  // the channel closed the trade unpaid (or after a full refund)
	KindPending Kind = "PENDING" // the trade exists but is not paid yet (WAIT_BUYER_PAY)
	KindRefund  Kind = "REFUND"  // money went back to the buyer: counted once in refunded_fen
	KindOther   Kind = "OTHER"   // any other verified event type: acknowledged and journalled
)

// Event is a notification after the channel verified its raw bytes. Money is in minor units.
type Event struct {
	Channel      string
	NotifyID     string // the channel's id of this notification; the same across its retries
	TradeNo      string // our orders.trade_no (out_trade_no, orderId, metadata.trade_no)
	ChannelTxnID string // the channel's transaction id
	Kind         Kind
	Status       string // the channel's own status word, for the journal (TRADE_SUCCESS, ...)
	AmountFen    int64
	Currency     string // ISO 4217, upper case
	PaidAt       time.Time
	Subject      string // what was bought, as the channel names it (UTF-8), for the journal
	Raw          []byte // the body exactly as received
	Source       Source // how paygw learnt it: SourceNotify unless set

	// TradeNoUnsure: TradeNo came from a field that other integrations fill too (Stripe's
	// client_reference_id). It counts only if it names an existing order; otherwise the event
	// is acknowledged and journalled as KindOther.
	TradeNoUnsure bool

	// A refund (KindRefund) states one of two things about the payment it undoes (ChannelTxnID),
	// and apply puts it in the refund ledger:
	//   - one refund: RefundID is the channel's id of it (Alipay out_biz_no, WeChat refund_id,
	//     Stripe re_..., UnionPay queryId), RefundFen its own amount;
	//   - the payment's running total (RefundIsTotal: Alipay's refund_fee, Stripe's
	//     amount_refunded, a query's answer): RefundFen is that total, and RefundID names the
	//     refund that caused it when the source says ("" when it does not).
	// RefundBillKey names a bill line that states one refund without its id (RefundID "").
	RefundID      string
	RefundFen     int64
	RefundIsTotal bool
	RefundBillKey string
}

// Source is how paygw learnt of an event.
type Source string

const (
	SourceNotify Source = "notify" // the channel's notification
	SourceQuery  Source = "query"  // paygw asked the channel (the reconciliation job)
	SourceBill   Source = "bill"   // the channel's daily bill (the reconciliation job)
)

// Outcome is what paygw did with a verified event. It is stored with the record and the journal.
type Outcome string

const (
	OutcomeApplied          Outcome = "APPLIED"           // order WAIT_PAY -> PAID
	OutcomeRepeat           Outcome = "REPEAT"            // already applied: nothing more
	OutcomeAmountMismatch   Outcome = "AMOUNT_MISMATCH"   // anomaly; order untouched
	OutcomePaidAfterClose   Outcome = "PAID_AFTER_CLOSE"  // anomaly; order untouched
	OutcomeDuplicatePayment Outcome = "DUPLICATE_PAYMENT" // anomaly; order untouched
	OutcomeClosed           Outcome = "CLOSED"            // order WAIT_PAY -> CLOSED
	OutcomeJournalled       Outcome = "JOURNALLED"        // recorded only (pending, close of a settled order, other)
	OutcomeUnknownOrder     Outcome = "UNKNOWN_ORDER"     // no such trade_no: the channel must retry

	OutcomeRefunded             Outcome = "REFUNDED"               // refunded_fen grew by the refund
	OutcomeRefundPending        Outcome = "REFUND_PENDING"         // recorded; counted once its payment applies
	OutcomeRefundExceedsPayment Outcome = "REFUND_EXCEEDS_PAYMENT" // anomaly; order untouched
	OutcomeAnomalyRefunded      Outcome = "ANOMALY_REFUNDED"       // refunds an unapplied payment; its anomaly is marked refunded
)

// Outcomes lists every Outcome, in the order above: the values of the outcome label paygw's
// metrics can carry besides their own (metrics.Outcomes).
func Outcomes() []Outcome {
	return []Outcome{OutcomeApplied, OutcomeRepeat, OutcomeAmountMismatch, OutcomePaidAfterClose, OutcomeDuplicatePayment,
		OutcomeClosed, OutcomeJournalled, OutcomeUnknownOrder, OutcomeRefunded, OutcomeRefundPending,
		OutcomeRefundExceedsPayment, OutcomeAnomalyRefunded}
}

// IsAnomaly reports whether the outcome is also written to the anomaly table.
func (o Outcome) IsAnomaly() bool {
	switch o {
	case OutcomeAmountMismatch, OutcomePaidAfterClose, OutcomeDuplicatePayment, OutcomeRefundExceedsPayment:
		return true
	}
	return false
}

// Reply is the kind of answer a channel gets; each channel renders it in its own words.
type Reply int

const (
	ReplySuccess Reply = iota // stop retrying: we hold it durably (or it is a repeat)
	ReplyRefuse               // failed verification or malformed: never retry this message
	ReplyRetry                // we could not finish: deliver again later
)

// Reply maps a durable outcome to the channel reply. Unknown orders are retried so a notification
// that outruns the order's commit (or reaches the wrong replica set) is never dropped.
func (o Outcome) Reply() Reply {
	if o == OutcomeUnknownOrder {
		return ReplyRetry
	}
	return ReplySuccess
}

// MaxTradeNo is the width of orders.trade_no. Every channel's merchant order number fits in it
// (Alipay and WeChat allow 32 at most, UnionPay 40 of which paygw uses 31).
const MaxTradeNo = 32

// ValidTradeNo reports whether s can be one of our trade_nos: 1-32 characters of [A-Za-z0-9_-].
// Anything longer cannot name a row of orders, so it is refused at parse time rather than
// answered "unknown order, retry" until the channel gives up.
func ValidTradeNo(s string) bool {
	if len(s) < 1 || len(s) > MaxTradeNo {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
