// Package payment holds the channel-neutral shapes of a verified notification and of what paygw
// decided about it. channels/ produces them, repository/ stores them, notify/ decides between them;
// none of those packages needs to know the others.
package payment

import "time"

// Kind is what a verified notification says happened, in channel-neutral words.
type Kind string

const (
	KindPaid    Kind = "PAID"    // the buyer paid: a candidate for WAIT_PAY -> PAID
	KindClosed  Kind = "CLOSED"  // the channel closed the trade unpaid (or after a full refund)
	KindPending Kind = "PENDING" // the trade exists but is not paid yet (WAIT_BUYER_PAY)
	KindRefund  Kind = "REFUND"  // a refund notice: journalled, never a payment
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
	Raw          []byte // the body exactly as received
}

// Outcome is what paygw did with a verified event. It is stored with the record and the journal.
type Outcome string

const (
	OutcomeApplied          Outcome = "APPLIED"           // order WAIT_PAY -> PAID
	OutcomeRepeat           Outcome = "REPEAT"            // already applied: nothing more
	OutcomeAmountMismatch   Outcome = "AMOUNT_MISMATCH"   // anomaly; order untouched
	OutcomePaidAfterClose   Outcome = "PAID_AFTER_CLOSE"  // anomaly; order untouched
	OutcomeDuplicatePayment Outcome = "DUPLICATE_PAYMENT" // anomaly; order untouched
	OutcomeClosed           Outcome = "CLOSED"            // order WAIT_PAY -> CLOSED
	OutcomeJournalled       Outcome = "JOURNALLED"        // recorded only (pending, refund, close of a settled order)
	OutcomeUnknownOrder     Outcome = "UNKNOWN_ORDER"     // no such trade_no: the channel must retry
)

// IsAnomaly reports whether the outcome is also written to the anomaly table.
func (o Outcome) IsAnomaly() bool {
	switch o {
	case OutcomeAmountMismatch, OutcomePaidAfterClose, OutcomeDuplicatePayment:
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

// ValidTradeNo reports whether s can be one of our trade_nos: 1-64 characters of [A-Za-z0-9_-],
// what every channel accepts as a merchant order number.
func ValidTradeNo(s string) bool {
	if len(s) < 1 || len(s) > 64 {
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
