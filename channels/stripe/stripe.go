// Package stripe is everything paygw does with Stripe: it verifies webhook events
// (Stripe-Signature), asks about PaymentIntents, and writes a day's balance transactions as the
// bill, through stripe-go.
package stripe

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/payment"
)

// Channel verifies Stripe webhook events (Stripe-Signature, HMAC-SHA256 with a webhook signing
// secret) and renders the replies Stripe expects.
type Channel struct {
	secrets   []string // newest first
	tolerance time.Duration
}

// New returns a verifier that accepts events signed with any of secrets (newest first, so
// the usual case costs one HMAC during a rotation) whose timestamp is within tolerance of the
// clock passed to Verify. The errors name the configuration keys, never a secret.
func New(secrets []string, tolerance time.Duration) (*Channel, error) {
	if len(secrets) == 0 {
		return nil, errors.New("channels: stripe: channels.stripe.webhook_secrets: at least one secret is needed")
	}
	for i, s := range secrets {
		if !strings.HasPrefix(s, "whsec_") || len(s) == len("whsec_") {
			return nil, fmt.Errorf("channels: stripe: channels.stripe.webhook_secrets[%d]: must start with whsec_ and go on", i)
		}
	}
	if tolerance <= 0 {
		return nil, fmt.Errorf("channels: stripe: channels.stripe.tolerance: must be positive, got %s", tolerance)
	}
	return &Channel{secrets: append([]string(nil), secrets...), tolerance: tolerance}, nil
}

// Name is the channel name stored with every event.
func (s *Channel) Name() string { return "stripe" }

// Verify checks the Stripe-Signature header over the raw body and only then maps the event JSON
// to an event (see stripeEvent for the mapping).
//
// The timestamp is checked twice: here against now, in both directions (|now - t| > tolerance is
// refused), and by stripe-go against the wall clock, old side only. stripe-go's window is widened
// by however far now lags the wall clock (zero in production, where now is time.Now()), so that
// the window is decided by now alone and tests with an injected clock are deterministic.
//
// Errors: channels.ErrBadSignature when the header is missing, repeated or invalid, or when no v1 value
// matches any secret; channels.ErrStale when the timestamp is outside the tolerance (checked before the
// signature, as stripe-go does); channels.ErrMalformed when the signed body is not an event we can read.
// No error carries the header or a signature.
func (s *Channel) Verify(body []byte, header http.Header, now time.Time) (payment.Event, error) {
	sig, err := stripeSignatureHeader(header)
	if err != nil {
		return payment.Event{}, err
	}
	t, err := stripeTimestamp(sig)
	if err != nil {
		return payment.Event{}, err
	}
	if d := now.Sub(time.Unix(t, 0)); d > s.tolerance || d < -s.tolerance {
		return payment.Event{}, errStripeStale
	}
	if err := s.checkSignature(body, sig, now); err != nil {
		return payment.Event{}, err
	}
	ev, err := stripeEvent(body)
	if err != nil {
		return payment.Event{}, err
	}
	return channels.CheckEvent(ev)
}

// ApplyTimeout is 8 s: Stripe wants a quick 2xx and gives up on a delivery after some seconds.
func (s *Channel) ApplyTimeout() time.Duration { return 8 * time.Second }

// errStripeStale is a timestamp outside the window: a replay, a delivery held back, or a sender
// whose clock is off.
var errStripeStale = fmt.Errorf("%w: stripe: timestamp outside tolerance", channels.ErrStale)

// stripeSignatureHeader returns the one Stripe-Signature value. Two values would leave it open
// which one the timestamp check and the signature check each read.
func stripeSignatureHeader(header http.Header) (string, error) {
	values := header.Values("Stripe-Signature")
	switch {
	case len(values) == 0 || len(values) == 1 && values[0] == "":
		return "", fmt.Errorf("%w: stripe: Stripe-Signature header missing", channels.ErrBadSignature)
	case len(values) > 1:
		return "", fmt.Errorf("%w: stripe: Stripe-Signature header repeated", channels.ErrBadSignature)
	}
	return values[0], nil
}

// stripeTimestamp reads t from `t=<unix>,v1=<hex>[,...]`. It refuses what stripe-go would refuse
// as an invalid header (a part without exactly one '=') and, more strictly, a missing or repeated
// t: stripe-go signs with the last t, so a second t could otherwise pass our window check while
// an old one is signed.
func stripeTimestamp(sig string) (int64, error) {
	invalid := fmt.Errorf("%w: stripe: Stripe-Signature header invalid", channels.ErrBadSignature)
	var t string
	seen := false
	for _, part := range strings.Split(sig, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.Contains(v, "=") {
			return 0, invalid
		}
		if k == "t" {
			if seen {
				return 0, invalid
			}
			t, seen = v, true
		}
	}
	// Twelve digits reach the year 33658: enough, and far from overflowing time.Unix.
	if !channels.AllDigits(t) || len(t) > 12 {
		return 0, invalid
	}
	n, _ := strconv.ParseInt(t, 10, 64) // cannot fail: at most twelve digits
	return n, nil
}

// checkSignature asks stripe-go whether any v1 value matches any secret; it compares with
// hmac.Equal. Only "no match" moves on to the next secret: the other errors are about the header
// and the same for every secret.
func (s *Channel) checkSignature(body []byte, sig string, now time.Time) error {
	tolerance := s.tolerance + time.Second // slack for the time between our reading and its
	if lag := time.Since(now); lag > 0 {
		tolerance += lag
	}
	if tolerance < s.tolerance { // overflow: now is absurdly far in the past
		tolerance = math.MaxInt64
	}

	var err error
	for _, secret := range s.secrets {
		if err = webhook.ValidatePayloadWithTolerance(body, sig, secret, tolerance); !errors.Is(err, webhook.ErrNoValidSignature) {
			break
		}
	}
	// stripe-go's messages carry no signature material, but ours say the same in our words.
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhook.ErrNoValidSignature):
		return fmt.Errorf("%w: stripe: no v1 signature matches", channels.ErrBadSignature)
	case errors.Is(err, webhook.ErrTooOld):
		return errStripeStale
	case errors.Is(err, webhook.ErrNotSigned):
		return fmt.Errorf("%w: stripe: Stripe-Signature header missing", channels.ErrBadSignature)
	case errors.Is(err, webhook.ErrInvalidHeader):
		return fmt.Errorf("%w: stripe: Stripe-Signature header invalid", channels.ErrBadSignature)
	default:
		return fmt.Errorf("%w: stripe: signature check failed", channels.ErrBadSignature)
	}
}

// stripeEventJSON is the part of an event envelope we read. api_version is not read at all: an
// endpoint's version is the merchant's choice and never a reason to refuse.
type stripeEventJSON struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Created json.RawMessage `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// stripeObjectJSON holds the fields of the four objects we map: a PaymentIntent, a Checkout
// Session, a Charge and a Refund. Amounts stay raw so that only plain non-negative integers pass.
type stripeObjectJSON struct {
	ID                string            `json:"id"`
	Currency          string            `json:"currency"`
	Metadata          map[string]string `json:"metadata"`
	AmountReceived    json.RawMessage   `json:"amount_received"` // PaymentIntent
	AmountTotal       json.RawMessage   `json:"amount_total"`    // Checkout Session
	AmountRefunded    json.RawMessage   `json:"amount_refunded"` // Charge
	PaymentStatus     string            `json:"payment_status"`  // Checkout Session
	Mode              string            `json:"mode"`            // Checkout Session: payment, setup, subscription
	ClientReferenceID string            `json:"client_reference_id"`
	PaymentIntent     json.RawMessage   `json:"payment_intent"` // an id, or null
	Refunds           json.RawMessage   `json:"refunds"`        // Charge: a list of refunds, in older API versions
	Amount            json.RawMessage   `json:"amount"`         // Refund: its own amount
	Status            string            `json:"status"`         // Refund: succeeded, pending, failed, ...
}

// stripeEvent maps a verified event body to an event. Stripe sends every event of the account,
// other integrations' included, so an event that is not about one of our orders is acknowledged
// and journalled (KindOther), never refused:
//
//   - payment_intent.succeeded: KindPaid; trade_no from metadata.trade_no, amount_received,
//     channel txn id the PaymentIntent's id.
//   - checkout.session.completed and .async_payment_succeeded (delayed payment methods):
//     KindPaid when payment_status is "paid", else KindPending; amount_total; channel txn id the
//     session's payment_intent when set, so that this event and the payment_intent.succeeded of
//     the same payment are one payment, else the session's id. trade_no from metadata.trade_no,
//     else from client_reference_id when it has a trade_no's shape; as other integrations fill
//     client_reference_id too (an email, a cart id), such an event is marked TradeNoUnsure and
//     counts only if the order exists. A setup-mode session moves no money: KindOther.
//   - charge.refunded: KindRefund of the running total amount_refunded (RefundIsTotal), naming
//     the newest refund in the charge's refunds list when it carries one; trade_no from metadata.trade_no, or "" for a refund of a
//     payment_intent (a Checkout payment's charge carries no metadata of ours: apply finds the
//     order by the payment_intent). Channel txn id the payment_intent when set, else the charge.
//   - refund.created, refund.updated and charge.refund.updated of a refund that succeeded: KindRefund
//     of this refund's own amount under its re_ id, channel txn id its payment_intent (a refund
//     without one, of a charge made without a PaymentIntent, is KindOther). Any other refund status
//     moved no money: KindOther.
//   - any of these without a trade_no of ours (none, or not in our shape): KindOther.
//   - any other type: KindOther. TradeNo and ChannelTxnID are the object's metadata.trade_no and
//     id when they are present and well formed, and otherwise "" (so is Currency, and AmountFen
//     is 0): the caller must accept a KindOther event without a trade_no.
//
// NotifyID is the event id, Status the event type, PaidAt the event's created time, Currency upper
// case. Errors wrap channels.ErrMalformed: the envelope is not an event, or an event about our order has a
// field we cannot read.
func stripeEvent(body []byte) (payment.Event, error) {
	env, created, err := readStripeEnvelope(body)
	if err != nil {
		return payment.Event{}, err
	}
	ev := payment.Event{
		Channel:  "stripe",
		NotifyID: env.ID,
		Status:   env.Type,
		PaidAt:   time.Unix(created, 0).UTC(),
		Raw:      bytes.Clone(body),
	}
	kind := stripeKindOf(env.Type)
	if kind == stripeOtherType {
		ev.Kind = payment.KindOther
		ev.ChannelTxnID, ev.TradeNo = stripeOtherFields(env.Data.Object)
		return ev, nil
	}

	var o stripeObjectJSON
	if err := json.Unmarshal(env.Data.Object, &o); err != nil {
		return payment.Event{}, fmt.Errorf("%w: stripe: %s: data.object has a field of the wrong type", channels.ErrMalformed, env.Type)
	}
	tradeNo, unsure := stripeTradeNo(o, kind)
	if !stripeOurs(o, kind, tradeNo) {
		// Not one of our orders: acknowledged and journalled, as a refusal would only make
		// Stripe resend it for three days. (A PaymentIntent made by a Checkout Session carries no
		// metadata of ours; the session's event applies that payment.)
		ev.Kind = payment.KindOther
		pi, _ := stripePaymentIntent(o.PaymentIntent)
		ev.ChannelTxnID = journalID(cmp.Or(pi, o.ID))
		return ev, nil
	}
	ev.TradeNo, ev.TradeNoUnsure = tradeNo, unsure
	if err := stripeMoney(&ev, o, kind); err != nil {
		return payment.Event{}, err
	}
	return ev, nil
}

// readStripeEnvelope reads what every event has: an evt_ id, a type, created, and an object.
func readStripeEnvelope(body []byte) (env stripeEventJSON, created int64, err error) {
	if err := channels.StrictJSON("stripe", "body", body); err != nil {
		return env, 0, err
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return env, 0, fmt.Errorf("%w: stripe: body is not a JSON event", channels.ErrMalformed)
	}
	if !strings.HasPrefix(env.ID, "evt_") || !validStripeID(env.ID) {
		return env, 0, fmt.Errorf("%w: stripe: id missing or not an evt_ id", channels.ErrMalformed)
	}
	if !validStripeType(env.Type) {
		return env, 0, fmt.Errorf("%w: stripe: type missing or invalid", channels.ErrMalformed)
	}
	if created, err = stripeInteger("created", env.Created); err != nil {
		return env, 0, err
	}
	if obj := env.Data.Object; len(obj) == 0 || obj[0] != '{' {
		return env, 0, fmt.Errorf("%w: stripe: data.object missing or not an object", channels.ErrMalformed)
	}
	return env, created, nil
}

// stripeType is what paygw makes of an event type.
type stripeType int

const (
	stripeOtherType    stripeType = iota // any type that moves no money of ours
	stripeIntent                         // payment_intent.succeeded
	stripeSession                        // checkout.session.completed, .async_payment_succeeded
	stripeChargeRefund                   // charge.refunded: the running total refunded
	stripeRefundObject                   // refund.created, refund.updated, charge.refund.updated
)

func stripeKindOf(eventType string) stripeType {
	switch eventType {
	case "payment_intent.succeeded":
		return stripeIntent
	case "checkout.session.completed", "checkout.session.async_payment_succeeded":
		return stripeSession
	case "charge.refunded":
		return stripeChargeRefund
	case "refund.created", "refund.updated", "charge.refund.updated":
		return stripeRefundObject
	}
	return stripeOtherType
}

// stripeTradeNo is the trade_no an object names: metadata.trade_no (ours: it wins), else a
// session's client_reference_id, unsure; "" when neither has a trade_no's shape.
func stripeTradeNo(o stripeObjectJSON, kind stripeType) (tradeNo string, unsure bool) {
	tradeNo = o.Metadata["trade_no"]
	if tradeNo == "" && kind == stripeSession && o.ClientReferenceID != "" {
		tradeNo, unsure = o.ClientReferenceID, true
	}
	if !payment.ValidTradeNo(tradeNo) {
		return "", false
	}
	return tradeNo, unsure
}

// stripeOurs reports whether the object moved money of one of our orders: a setup session moves
// none; a refund needs our trade_no or a payment_intent to find the order by; a refund object
// counts once it succeeded, and only with a payment_intent.
func stripeOurs(o stripeObjectJSON, kind stripeType, tradeNo string) bool {
	hasPaymentIntent := len(o.PaymentIntent) > 0 && string(o.PaymentIntent) != "null" && string(o.PaymentIntent) != `""`
	refund := kind == stripeChargeRefund || kind == stripeRefundObject
	switch {
	case kind == stripeSession && o.Mode == "setup",
		tradeNo == "" && !(refund && hasPaymentIntent),
		kind == stripeRefundObject && (o.Status != "succeeded" || !hasPaymentIntent):
		return false
	}
	return true
}

// stripeMoney fills ev's kind, transaction id, currency and amounts from an object of ours.
func stripeMoney(ev *payment.Event, o stripeObjectJSON, kind stripeType) error {
	if !validStripeID(o.ID) {
		return fmt.Errorf("%w: stripe: data.object.id missing or invalid", channels.ErrMalformed)
	}
	var err error
	if ev.Currency, err = stripeCurrency(o.Currency); err != nil {
		return err
	}
	paymentIntent, err := stripePaymentIntent(o.PaymentIntent)
	if err != nil {
		return err
	}
	var amount json.RawMessage
	var amountField string
	switch kind {
	case stripeSession:
		switch o.PaymentStatus {
		case "":
			return fmt.Errorf("%w: stripe: data.object.payment_status missing", channels.ErrMalformed)
		case "paid":
			ev.Kind = payment.KindPaid
		default: // unpaid (a delayed payment method), no_payment_required
			ev.Kind = payment.KindPending
		}
		ev.ChannelTxnID = cmp.Or(paymentIntent, o.ID)
		amount, amountField = o.AmountTotal, "amount_total"
	case stripeChargeRefund:
		ev.Kind, ev.ChannelTxnID = payment.KindRefund, cmp.Or(paymentIntent, o.ID)
		amount, amountField = o.AmountRefunded, "amount_refunded"
	case stripeRefundObject:
		ev.Kind, ev.ChannelTxnID = payment.KindRefund, paymentIntent
		amount, amountField = o.Amount, "amount"
	default:
		ev.Kind, ev.ChannelTxnID = payment.KindPaid, o.ID
		amount, amountField = o.AmountReceived, "amount_received"
	}
	if ev.AmountFen, err = stripeInteger("data.object."+amountField, amount); err != nil {
		return err
	}
	if ev.AmountFen, err = fromStripe(ev.AmountFen, ev.Currency); err != nil {
		return err
	}
	if ev.AmountFen > channels.MaxFen {
		return fmt.Errorf("%w: stripe: data.object.%s too large", channels.ErrMalformed, amountField)
	}
	switch kind {
	case stripeChargeRefund:
		ev.RefundFen, ev.RefundIsTotal = ev.AmountFen, true
		ev.RefundID = newestStripeRefund(o.Refunds) // "" when the charge lists none: a running total alone
	case stripeRefundObject:
		ev.RefundFen, ev.RefundID = ev.AmountFen, o.ID
	}
	return nil
}

// newestStripeRefund is the id of the newest refund in a charge's refunds list ("" when the
// charge carries none, as it does not since API version 2022-11-15, or none is usable). Any of the
// charge's refunds would key this notice safely, as its amount is the running total; the newest
// one is the refund that caused it.
func newestStripeRefund(raw json.RawMessage) string {
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return ""
	}
	id, newest := "", int64(-1)
	for _, r := range list.Data { // newest first, as Stripe lists; the first of equal times wins
		if r.Created > newest && journalID(r.ID) != "" {
			id, newest = r.ID, r.Created
		}
	}
	return id
}

// stripeOtherFields reads what it can of an object we do not map, for the journal; nothing in
// it is a reason to refuse an event that is acknowledged anyway.
func stripeOtherFields(obj json.RawMessage) (id, tradeNo string) {
	var o struct {
		ID       any            `json:"id"`
		Metadata map[string]any `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &o) // keeps whatever decoded
	s, _ := o.ID.(string)
	id = journalID(s)
	if s, _ := o.Metadata["trade_no"].(string); payment.ValidTradeNo(s) {
		tradeNo = s
	}
	return id, tradeNo
}

// journalID keeps an id of an event that is only journalled when it fits its column, and drops it
// otherwise: such an event is never refused.
func journalID(s string) string {
	if !validStripeID(s) || len(s) > channels.MaxChannelTxnID {
		return ""
	}
	return s
}

// stripeInteger reads a JSON number that must be a plain non-negative integer of at most twelve
// digits: Stripe writes amounts in minor units and times in unix seconds, never as 1.0 or 1e2.
func stripeInteger(field string, raw json.RawMessage) (int64, error) {
	s := string(raw)
	switch {
	case len(s) == 0 || s == "null":
		return 0, fmt.Errorf("%w: stripe: %s missing", channels.ErrMalformed, field)
	case !channels.AllDigits(s) || len(s) > 1 && s[0] == '0':
		return 0, fmt.Errorf("%w: stripe: %s is not a non-negative integer", channels.ErrMalformed, field)
	case len(s) > 12:
		return 0, fmt.Errorf("%w: stripe: %s too large", channels.ErrMalformed, field)
	}
	n, _ := strconv.ParseInt(s, 10, 64) // cannot fail: at most twelve digits
	return n, nil
}

// stripeCurrency upper-cases Stripe's lower-case ISO 4217 code.
func stripeCurrency(s string) (string, error) {
	if len(s) != 3 {
		return "", fmt.Errorf("%w: stripe: data.object.currency missing or not 3 letters", channels.ErrMalformed)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return "", fmt.Errorf("%w: stripe: data.object.currency missing or not 3 letters", channels.ErrMalformed)
		}
	}
	return strings.ToUpper(s), nil
}

// stripePaymentIntent reads an object's payment_intent: an id, or null or absent ("").
func stripePaymentIntent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil || id != "" && !validStripeID(id) {
		return "", fmt.Errorf("%w: stripe: data.object.payment_intent is not an id", channels.ErrMalformed)
	}
	return id, nil
}

// validStripeID reports whether s looks like a Stripe object id (pi_3Mtw..., cs_test_a1...). Its
// length is channels.CheckEvent's to judge, against the column it goes into.
func validStripeID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validStripeType reports whether s looks like an event type (payment_intent.succeeded).
func validStripeType(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Reply renders Stripe's answers. Stripe only looks at the status: any 2xx stops its retries,
// anything else is retried for up to three days, so a refusal (400) and a retry (500) differ for
// our own logs and for a person reading the endpoint's delivery log in the dashboard.
func (s *Channel) Reply(r payment.Reply) channels.Response {
	const contentType = "application/json"
	switch r {
	case payment.ReplySuccess:
		return channels.Response{Status: http.StatusOK, ContentType: contentType, Body: []byte(`{"received":true}`)}
	case payment.ReplyRefuse:
		return channels.Response{Status: http.StatusBadRequest, ContentType: contentType, Body: []byte(`{"error":"notification refused"}`)}
	default: // ReplyRetry, and anything unknown: a redelivery is never lost money
		return channels.Response{Status: http.StatusInternalServerError, ContentType: contentType, Body: []byte(`{"error":"temporarily unavailable, retry"}`)}
	}
}
