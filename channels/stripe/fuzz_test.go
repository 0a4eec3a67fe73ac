package stripe

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

// stripeFuzzSeeds are signed events (body, Stripe-Signature) at stripeTestNow, plus the openssl
// vectors at their own t, re-signed at stripeTestNow so one clock fits all.
func stripeFuzzSeeds(tb testing.TB) [][2]string {
	tb.Helper()
	bodies := []string{
		stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject()),
		stripeEnvelope("checkout.session.completed", stripeSessionObject()),
		stripeEnvelope("checkout.session.completed", stripeSessionObject(kv{"payment_status", `"unpaid"`}, kv{"payment_intent", "null"})),
		stripeEnvelope("charge.refunded", stripeChargeObject()),
		stripeEnvelope("customer.created", `{"id":"cus_1","metadata":{}}`),
		stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(kv{"amount_received", "1.5"})),
		stripeEnvelope("checkout.session.completed", stripeSessionObject(kv{"client_reference_id", `"buyer@example.com"`})),
		stripeEnvelope("checkout.session.completed", stripeSessionObject(kv{"mode", `"setup"`}, kv{"currency", "null"}, kv{"amount_total", "null"})),
		stripeEnvelope("charge.refunded", stripeChargeObject(kv{"refunds", `{"object":"list","data":[{"id":"re_1","created":1}]}`})),
		stripeEnvelope("charge.refunded", stripeChargeObject(kv{"metadata", `{}`})),
		stripeEnvelope("refund.created", `{"id":"re_1","object":"refund","amount":300,"currency":"cny","charge":"ch_1",`+
			`"metadata":{},"payment_intent":"pi_1","status":"succeeded"}`),
		stripeEnvelope("refund.updated", `{"id":"re_1","object":"refund","amount":300,"currency":"cny","payment_intent":null,"status":"failed"}`),
	}
	for _, v := range readStripeVectors(tb) {
		body, err := os.ReadFile(filepath.Join("testdata", v.file))
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, string(body))
	}
	var seeds [][2]string
	for _, b := range bodies {
		seeds = append(seeds, [2]string{b, stripeSign(b, stripeTestSecret, stripeTestNow)})
	}
	return seeds
}

func checkStripeEvent(t *testing.T, fn string, ev payment.Event, err error) {
	t.Helper()
	if err != nil {
		if !channeltest.IsSentinel(err) && !errors.Is(err, channels.ErrStale) {
			t.Fatalf("%s error %v wraps no sentinel", fn, err)
		}
		return
	}
	switch {
	case ev.Channel != "stripe" || !strings.HasPrefix(ev.NotifyID, "evt_") || ev.Status == "" || ev.PaidAt.IsZero() || ev.Raw == nil:
		t.Fatalf("%s accepted an event without its envelope: %+v", fn, ev)
	case ev.AmountFen < 0 || ev.AmountFen > channels.MaxFen:
		t.Fatalf("%s accepted amount %d", fn, ev.AmountFen)
	case ev.Kind == payment.KindOther:
		if ev.AmountFen != 0 || ev.Currency != "" || ev.TradeNo != "" && !payment.ValidTradeNo(ev.TradeNo) {
			t.Fatalf("%s made an odd KindOther event %+v", fn, ev)
		}
	case ev.Kind != payment.KindPaid && ev.Kind != payment.KindPending && ev.Kind != payment.KindRefund:
		t.Fatalf("%s made kind %q", fn, ev.Kind)
	case ev.Kind == payment.KindRefund && ev.RefundFen != ev.AmountFen:
		t.Fatalf("%s made a refund whose amount is not the event's: %+v", fn, ev)
	case ev.Kind == payment.KindRefund && (ev.Status == "charge.refunded") != ev.RefundIsTotal:
		t.Fatalf("%s: charge.refunded states the running total and a Refund object its own amount: %+v", fn, ev)
	case ev.Kind == payment.KindRefund && !ev.RefundIsTotal && ev.RefundID == "":
		t.Fatalf("%s made a refund of its own amount without its id: %+v", fn, ev)
	case !payment.ValidTradeNo(ev.TradeNo) && !(ev.Kind == payment.KindRefund && ev.TradeNo == ""):
		t.Fatalf("%s accepted trade_no %q", fn, ev.TradeNo)
	case ev.ChannelTxnID == "" || len(ev.Currency) != 3 || strings.ToUpper(ev.Currency) != ev.Currency:
		t.Fatalf("%s accepted an incomplete event %+v", fn, ev)
	}
	if _, err := channels.CheckEvent(ev); err != nil {
		t.Fatalf("%s accepted an event that does not fit its columns: %v", fn, err)
	}
}

// FuzzStripeVerify fuzzes body and header together; stripeTestNow is the t of every seed, so a
// mutated body keeps a live timestamp and reaches the HMAC.
// FuzzStripeVerify feeds whole messages: body and Stripe-Signature. What verifies must be a
// seed's event: the HMAC covers the body's every byte.
func FuzzStripeVerify(f *testing.F) {
	signed := stripeFuzzSeeds(f)
	for _, seed := range signed {
		f.Add([]byte(seed[0]), seed[1])
	}
	f.Add([]byte("{}"), "")
	f.Add([]byte("{}"), "t=1,t=2,v1=00")
	f.Add([]byte("{}"), "t=1714564807,v1=zz,v0=00,x")
	s, err := New([]string{stripeNewSecret, stripeTestSecret}, stripeTolerance)
	if err != nil {
		f.Fatal(err)
	}
	seeds := channeltest.VerifiedSeeds(f, func(i int) (payment.Event, error) {
		return s.Verify([]byte(signed[i][0]), http.Header{"Stripe-Signature": {signed[i][1]}}, stripeTestNow)
	}, len(signed))

	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		ev, err := s.Verify(body, http.Header{"Stripe-Signature": {sig}}, stripeTestNow)
		checkStripeEvent(t, "Verify", ev, err)
		if err == nil {
			channeltest.SameAsASeed(t, ev, seeds)
		}
		if err != nil && len(sig) >= 8 && strings.Contains(sig, "=") && strings.Contains(err.Error(), sig) {
			t.Fatalf("error %q quotes the header", err)
		}
		if errors.Is(err, channels.ErrMalformed) && !strings.Contains(sig, "v1=") {
			t.Fatalf("reached the body without a v1 signature: %v", err)
		}
	})
}

// FuzzStripeEvent fuzzes the mapping behind the signature, which the HMAC shields from
// FuzzStripeVerify's mutations.
func FuzzStripeEvent(f *testing.F) {
	for _, seed := range stripeFuzzSeeds(f) {
		f.Add([]byte(seed[0]))
	}
	for _, s := range []string{
		"", "null", "[]", "{}", `{"id":"evt_1"}`,
		`{"id":"evt_1","type":"x","created":1,"data":{"object":{}}}`,
		`{"id":"evt_1","type":"charge.refunded","created":1,"data":{"object":{"id":"ch_1","currency":"usd","amount_refunded":-1,"metadata":{"trade_no":"T1"}}}}`,
		`{"id":"evt_1","type":"payment_intent.succeeded","created":1,"data":{"object":{"id":"pi_1","currency":"usd","amount_received":1e2,"metadata":{"trade_no":"T1"}}}}`,
		`{"id":"evt_1","type":"checkout.session.completed","created":1,"data":{"object":{"id":"cs_1","currency":"usd","amount_total":1,"payment_status":"paid","payment_intent":{"id":"pi_1"}}}}`,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := stripeEvent(body)
		if err == nil {
			ev, err = channels.CheckEvent(ev) // as Verify does
		}
		checkStripeEvent(t, "stripeEvent", ev, err)
		if err != nil && !errors.Is(err, channels.ErrMalformed) {
			t.Fatalf("stripeEvent error %v is not ErrMalformed", err)
		}
	})
}
