package payment

import "time"

// The outbox's event types: what paygw tells the merchant's services happened to an order.
const (
	EventOrderPaid      = "order.paid"      // the order moved WAIT_PAY -> PAID
	EventOrderRefunded  = "order.refunded"  // its refunded_fen grew: data adds refund_id, refund_fen
	EventOrderClosed    = "order.closed"    // the order moved WAIT_PAY -> CLOSED
	EventPaymentAnomaly = "payment.anomaly" // a payment or refund recorded but not applied

	// EventReconciliationReopened: a bill run found something new in a channel's day a person
	// had signed off. It names no order (trade_no ""): its data is the day's channel,
	// bill_date, source, run_id, discrepancies (how many new or reopened), signed_off_by and
	// signed_off_at.
	EventReconciliationReopened = "reconciliation.reopened"
)

// EventTypes lists every event type, for validating a filter.
var EventTypes = []string{EventOrderPaid, EventOrderRefunded, EventOrderClosed, EventPaymentAnomaly, EventReconciliationReopened}

// OutboxEvent is one row of the outbox: an event whose change committed. Body is the event's
// JSON exactly as it is served and delivered (Standard Webhooks' payload shape plus its id:
// {"id","type","timestamp","data"}). Seq is its place in commit order, 0 until the sequencer
// numbered it.
type OutboxEvent struct {
	Seq         int64
	ID          string // evt_..., the Standard Webhooks webhook-id
	Type        string
	TradeNo     string
	Body        []byte
	CreatedTime time.Time
}
