package history

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paygw/paygw/channels/stripe"
	"github.com/paygw/paygw/simulate"
)

// Signers are the real signers of simulate, loaded from a sandbox (simulate.LoadSigners),
// Stripe's webhook secret, and the units Stripe states amounts in.
type Signers struct {
	Alipay       simulate.AlipaySigner
	WeChat       simulate.WeChatPaySigner
	UnionPay     simulate.UnionPaySigner
	StripeSecret string
	StripeUnits  Units
}

// Units turns an amount in ISO 4217 minor units of currency into the units a channel states it
// in; ok is false when the channel cannot state it.
type Units func(amount int64, currency string) (stated int64, ok bool)

// NewSigners picks the signers out of simulate.LoadSigners' map. Stripe states its amounts as
// stripe.ToStripe says, the inverse of the conversion paygw applies to them.
func NewSigners(m map[string]simulate.Signer) Signers {
	return Signers{
		Alipay:       m[Alipay].(simulate.AlipaySigner),
		WeChat:       m[WeChat].(simulate.WeChatPaySigner),
		UnionPay:     m[UnionPay].(simulate.UnionPaySigner),
		StripeSecret: m[Stripe].(simulate.StripeSigner).Secret,
		StripeUnits:  stripe.ToStripe,
	}
}

// state is amount (ISO 4217 minor units of currency) in the units u says. The generator draws
// only amounts the channel can state (see StripeUnit).
func (u Units) state(amount int64, currency string) int64 {
	stated, ok := u(amount, currency)
	if !ok {
		panic(fmt.Sprintf("%d minor units of %s cannot be stated", amount, currency)) // see StripeUnit
	}
	return stated
}

// Resign signs a message rendered by Sign again at now, as WeChat and Stripe sign every
// delivery afresh (the others sign the body alone, which a retry repeats as it was).
func (s Signers) Resign(channel string, m simulate.Message, now time.Time) (simulate.Message, error) {
	var err error
	switch channel {
	case WeChat:
		m.Header, err = s.WeChat.SignBody(m.Body, now)
	case Stripe:
		m.Header = m.Header.Clone()
		m.Header.Set("Stripe-Signature", simulate.SignStripe(m.Body, s.StripeSecret, now))
	}
	return m, err
}

// Sign renders message n of h as its channel sends it, signed at now (channels sign every
// delivery afresh; the event's own times are the truth's). The notification id is the same at
// every delivery of a message.
func (s Signers) Sign(h History, ids IDs, base time.Time, n int, now time.Time) (channel string, m simulate.Message, err error) {
	msg := h.Messages()[n]
	a := h.Attempts[msg.Attempt]
	at := base.Add(msg.At)
	p := simulate.Payment{TradeNo: ids.TradeNo, AmountFen: h.AmountFen, Currency: h.Code(), TxnID: ids.Txn[msg.Attempt],
		NotifyID: fmt.Sprintf("%s%02d", ids.NotifyBase, n), Time: at, Status: simulate.StatusPaid}
	switch msg.Kind {
	case MsgClose:
		p.Status = simulate.StatusClosed
	case MsgRefund, MsgRefundObject:
		p.Status, p.RefundFen, p.RefundTotalFen, p.RefundID = simulate.StatusRefund, h.Refunds[msg.Refund].Fen, h.RunningTotal(msg.Refund), ids.Refund[msg.Refund]
	}
	switch a.Channel {
	case Alipay:
		signer := s.Alipay
		if a.GBK {
			signer.Charset = "gbk"
		}
		m, err = signer.Sign(p)
	case WeChat:
		if m, err = s.WeChat.Sign(p); err == nil {
			m.Header, err = s.WeChat.SignBody(m.Body, now)
		}
	case UnionPay:
		m, err = s.UnionPay.Sign(p)
	case Stripe:
		m, err = s.stripe(h, ids, msg, p, now)
	}
	return a.Channel, m, err
}

// stripe renders a Stripe event: payment_intent.succeeded, checkout.session.completed,
// payment_intent.canceled, charge.refunded (amount_refunded the running total; the charge
// carries trade metadata only outside Checkout, and lists its refunds only under API versions
// before 2022-11-15) or refund.created (the re_ id and its own amount). Every amount is in
// Stripe's units of the order's currency (StripeUnits), the currency in lower case.
func (s Signers) stripe(h History, ids IDs, msg Message, p simulate.Payment, now time.Time) (simulate.Message, error) {
	a := h.Attempts[msg.Attempt]
	cur := strings.ToLower(p.Currency)
	for _, f := range []*int64{&p.AmountFen, &p.RefundFen, &p.RefundTotalFen} {
		*f = s.StripeUnits.state(*f, p.Currency)
	}
	pi := p.TxnID
	charge := "ch_" + strings.TrimPrefix(pi, "pi_")
	meta := map[string]string{"trade_no": p.TradeNo}
	created := p.Time.Unix()
	intent := func(status string, received int64) map[string]any {
		return map[string]any{"id": pi, "object": "payment_intent", "amount": p.AmountFen, "amount_received": received,
			"created": created, "currency": cur, "livemode": false, "metadata": meta, "status": status,
			"latest_charge": charge}
	}
	var typ string
	var obj map[string]any
	switch msg.Kind {
	case MsgPay:
		typ, obj = "payment_intent.succeeded", intent("succeeded", p.AmountFen)
	case MsgCheckout:
		typ = "checkout.session.completed"
		obj = map[string]any{"id": "cs_test_" + strings.TrimPrefix(pi, "pi_"), "object": "checkout.session",
			"amount_subtotal": p.AmountFen, "amount_total": p.AmountFen, "client_reference_id": p.TradeNo, "created": created,
			"currency": cur, "livemode": false, "metadata": meta, "mode": "payment", "payment_intent": pi,
			"payment_status": "paid", "status": "complete"}
	case MsgClose:
		typ, obj = "payment_intent.canceled", intent("canceled", 0)
		obj["cancellation_reason"] = "abandoned"
	case MsgRefund:
		typ = "charge.refunded"
		chargeMeta := meta
		if a.Checkout {
			chargeMeta = map[string]string{}
		}
		obj = map[string]any{"id": charge, "object": "charge", "amount": p.AmountFen, "amount_captured": p.AmountFen,
			"amount_refunded": p.RefundTotalFen, "captured": true, "created": created, "currency": cur, "livemode": false,
			"metadata": chargeMeta, "paid": true, "payment_intent": pi, "refunded": p.RefundTotalFen >= p.AmountFen,
			"status": "succeeded"}
		if a.RefundList {
			var data []any // newest first, as Stripe lists them
			for k := msg.Refund; k >= 0; k-- {
				if r := h.Refunds[k]; r.Attempt == msg.Attempt {
					data = append(data, map[string]any{"id": ids.Refund[k], "object": "refund", "amount": s.StripeUnits.state(r.Fen, p.Currency), "charge": charge,
						"created": p.Time.Add(r.At - h.Refunds[msg.Refund].At).Unix(), "currency": cur, "payment_intent": pi,
						"status": "succeeded"})
				}
			}
			obj["refunds"] = map[string]any{"object": "list", "data": data, "has_more": false, "total_count": len(data),
				"url": "/v1/charges/" + charge + "/refunds"}
		}
	case MsgRefundObject:
		typ = "refund.created"
		obj = map[string]any{"id": p.RefundID, "object": "refund", "amount": p.RefundFen, "charge": charge, "created": created,
			"currency": cur, "metadata": map[string]string{}, "payment_intent": pi, "status": "succeeded"}
	}
	body, err := json.Marshal(map[string]any{"id": "evt_" + p.NotifyID, "object": "event", "api_version": simulate.StripeAPIVersion,
		"created": created, "data": map[string]any{"object": obj}, "livemode": false, "pending_webhooks": 1, "type": typ})
	if err != nil {
		return simulate.Message{}, err
	}
	return simulate.Message{Body: body, Header: http.Header{
		"Content-Type":     {"application/json; charset=utf-8"},
		"Stripe-Signature": {simulate.SignStripe(body, s.StripeSecret, now)},
	}}, nil
}

// FakeTrade is what the fake channel knows of attempt i once everything before offset at has
// happened; ok is false while the channel has no such trade. The fake answers with the amounts
// as they are given: Stripe's trades get theirs in Stripe's units (stripeUnits).
func FakeTrade(h History, ids IDs, base time.Time, i int, at time.Duration, stripeUnits Units) (t simulate.FakeTrade, ok bool) {
	a := h.Attempts[i]
	if a.Refused {
		return t, false
	}
	stated := func(fen int64) int64 { return fen }
	if a.Channel == Stripe {
		stated = func(fen int64) int64 { return stripeUnits.state(fen, h.Code()) }
	}
	t = simulate.FakeTrade{Channel: a.Channel, TradeNo: ids.TradeNo, AmountFen: stated(h.AmountFen), Currency: h.Code(),
		TxnID: ids.Txn[i], PaidAt: base.Add(a.At).UTC(), Status: simulate.FakePending, DropNotify: true}
	happened := a.At < at
	switch {
	case a.Outcome == Paid && happened:
		t.Status = simulate.FakePaid
		if fen := h.RefundedBefore(i, at); fen > 0 {
			t.Status, t.RefundFen = simulate.FakeRefunded, stated(fen)
		}
	case a.Outcome == Closed && happened:
		t.Status = simulate.FakeClosed
	case a.Absent:
		return t, false
	}
	if t.Status == simulate.FakePending || t.Status == simulate.FakeClosed {
		t.PaidAt = base.Add(time.Hour).UTC() // the trade's creation, for the answers that show a time
	}
	return t, true
}
