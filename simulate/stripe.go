package simulate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StripeAPIVersion is the api_version simulated events carry.
const StripeAPIVersion = "2025-07-30.basil"

// Stripe event types the simulator sends.
const (
	StripePaymentIntentSucceeded = "payment_intent.succeeded"
	StripeCheckoutSessionDone    = "checkout.session.completed"
)

// StripeSigner signs Stripe webhook events with a webhook signing secret (whsec_...).
type StripeSigner struct {
	Secret string
	// Event is how a paid payment is reported: StripePaymentIntentSucceeded ("" too) or
	// StripeCheckoutSessionDone. Other statuses always come as PaymentIntent or Charge events.
	Event string
}

func (s StripeSigner) Channel() string { return "stripe" }

// Sign renders p as a Stripe event: paid as payment_intent.succeeded (or, with Event
// StripeCheckoutSessionDone, checkout.session.completed with payment_status paid and
// client_reference_id = TradeNo), closed as payment_intent.canceled, refund as charge.refunded,
// pending as payment_intent.processing. trade_no travels in metadata (but for the charge of a
// Checkout payment, which carries none of ours), amounts in minor units, currency in lower case,
// as Stripe writes them.
func (s StripeSigner) Sign(p Payment) (Message, error) {
	if s.Secret == "" {
		return Message{}, errors.New("stripe: no webhook secret")
	}
	defaultNotifyID := p.NotifyID == ""
	p = p.normalized("stripe")
	if !strings.HasPrefix(p.TxnID, "pi_") {
		p.TxnID = "pi_" + p.TxnID
	}
	typ, object, err := s.object(p)
	if err != nil {
		return Message{}, err
	}
	id := p.NotifyID
	if defaultNotifyID { // one id per event: a session and its PaymentIntent are two events
		id = digest("stripe", p.NotifyID, typ)[:24]
	}
	if !strings.HasPrefix(id, "evt_") {
		id = "evt_" + id
	}
	body, err := json.MarshalIndent(stripeEvent{
		ID: id, Object: "event", APIVersion: StripeAPIVersion, Created: p.Time.Unix(),
		Data: stripeEventData{Object: object}, Livemode: false, PendingWebhooks: 1, Type: typ,
	}, "", "  ")
	if err != nil {
		return Message{}, err
	}
	return Message{Body: body, Header: http.Header{
		"Content-Type":     {"application/json; charset=utf-8"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
		"Stripe-Signature": {SignStripe(body, s.Secret, p.Time)},
	}}, nil
}

// object is the event type and data.object of p, normalized.
func (s StripeSigner) object(p Payment) (typ string, object map[string]any, err error) {
	switch p.Status {
	case StatusPaid:
		switch s.Event {
		case "", StripePaymentIntentSucceeded:
			return StripePaymentIntentSucceeded, notifiedPaymentIntent(p, "succeeded", p.AmountFen), nil
		case StripeCheckoutSessionDone:
			return StripeCheckoutSessionDone, map[string]any{
				"id": "cs_test_" + digest("stripe", "session", p.TxnID)[:58], "object": "checkout.session",
				"amount_subtotal": p.AmountFen, "amount_total": p.AmountFen, "client_reference_id": p.TradeNo,
				"created": p.Time.Unix(), "currency": strings.ToLower(p.Currency), "livemode": false,
				"metadata": map[string]string{"trade_no": p.TradeNo}, "mode": "payment", "payment_intent": p.TxnID,
				"payment_status": "paid", "status": "complete",
			}, nil
		}
		return "", nil, fmt.Errorf("stripe: unknown event %q", s.Event)
	case StatusClosed:
		object = notifiedPaymentIntent(p, "canceled", 0)
		object["cancellation_reason"] = "abandoned"
		return "payment_intent.canceled", object, nil
	case StatusPending:
		return "payment_intent.processing", notifiedPaymentIntent(p, "processing", 0), nil
	case StatusRefund:
		return "charge.refunded", s.refundedCharge(p), nil
	}
	return "", nil, fmt.Errorf("stripe: unknown status %q", p.Status)
}

// notifiedPaymentIntent is p's PaymentIntent in status, having received received.
func notifiedPaymentIntent(p Payment, status string, received int64) map[string]any {
	return map[string]any{
		"id": p.TxnID, "object": "payment_intent", "amount": p.AmountFen, "amount_capturable": 0,
		"amount_received": received, "capture_method": "automatic_async", "created": p.Time.Unix(),
		"currency": strings.ToLower(p.Currency), "livemode": false, "metadata": map[string]string{"trade_no": p.TradeNo},
		"payment_method_types": []string{"card"}, "status": status,
	}
}

// refundedCharge is the charge of p's payment after p's refund, listing that refund.
func (s StripeSigner) refundedCharge(p Payment) map[string]any {
	currency := strings.ToLower(p.Currency)
	charge := "ch_" + strings.TrimPrefix(p.TxnID, "pi_")
	refund := map[string]any{
		"id": p.RefundID, "object": "refund", "amount": p.RefundFen, "charge": charge, "created": p.Time.Unix(),
		"currency": currency, "metadata": map[string]string{}, "payment_intent": p.TxnID, "status": "succeeded",
	}
	chargeMetadata := map[string]string{"trade_no": p.TradeNo}
	if s.Event == StripeCheckoutSessionDone {
		chargeMetadata = map[string]string{} // a Checkout payment's charge carries no metadata of ours
	}
	return map[string]any{
		"id": charge, "object": "charge", "amount": p.AmountFen,
		"amount_captured": p.AmountFen, "amount_refunded": p.RefundTotalFen, "captured": true, "created": p.Time.Unix(),
		"currency": currency, "livemode": false, "metadata": chargeMetadata, "paid": true,
		"payment_intent": p.TxnID, "refunded": p.RefundTotalFen >= p.AmountFen, "status": "succeeded",
		// API versions before 2022-11-15 list the charge's refunds, newest first; this one
		// shows the refund that caused the event.
		"refunds": map[string]any{
			"object": "list", "data": []any{refund}, "has_more": false, "total_count": 1,
			"url": "/v1/charges/" + charge + "/refunds",
		},
	}
}

// stripeEvent is the envelope in the order Stripe writes it.
type stripeEvent struct {
	ID              string          `json:"id"`
	Object          string          `json:"object"`
	APIVersion      string          `json:"api_version"`
	Created         int64           `json:"created"`
	Data            stripeEventData `json:"data"`
	Livemode        bool            `json:"livemode"`
	PendingWebhooks int             `json:"pending_webhooks"`
	Request         struct {
		ID             *string `json:"id"`
		IdempotencyKey *string `json:"idempotency_key"`
	} `json:"request"`
	Type string `json:"type"`
}

type stripeEventData struct {
	Object map[string]any `json:"object"`
}

// SignStripe returns the Stripe-Signature value for body sent at t:
// t=<unix seconds>,v1=<hex HMAC-SHA256 keyed with the whole secret over "<t>.<body>">.
func SignStripe(body []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
