package simulate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/paygw/paygw/channels/stripe"
	"github.com/paygw/paygw/payment"
)

// Test secret only: it never signs for a real Stripe endpoint.
const stripeSimSecret = "whsec_paygwSimulatorTest000000000000001"

// SignStripe is written apart from stripe-go: it must produce, byte for byte, the header that
// stripe-go's own test signer produces for the same payload, secret and time.
func TestSignStripeMatchesSDK(t *testing.T) {
	tests := map[string]struct {
		body   string
		secret string
		at     time.Time
	}{
		"event":             {body: `{"id":"evt_1","object":"event"}`, secret: stripeSimSecret, at: time.Unix(1714564807, 0)},
		"empty body":        {body: "", secret: stripeSimSecret, at: time.Unix(1714564807, 0)},
		"sub-second time":   {body: "{}", secret: stripeSimSecret, at: time.Unix(1714564807, 999_999_999)},
		"non-UTC location":  {body: "{}", secret: stripeSimSecret, at: time.Unix(1714564807, 0).In(time.FixedZone("CST", 8*3600))},
		"unicode and bytes": {body: "{\"d\":\"测试\"}\n\x00\xff", secret: stripeSimSecret, at: time.Unix(1, 0)},
		"another secret":    {body: `{"a":1}`, secret: "whsec_" + strings.Repeat("x", 64), at: time.Unix(2000000000, 0)},
		"unix epoch":        {body: `{}`, secret: stripeSimSecret, at: time.Unix(0, 0)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			want := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
				Payload: []byte(tt.body), Secret: tt.secret, Timestamp: tt.at,
			}).Header
			if got := SignStripe([]byte(tt.body), tt.secret, tt.at); got != want {
				t.Errorf("SignStripe = %q\nstripe-go    %q", got, want)
			}
		})
	}
}

func TestStripeSignerAgainstSDK(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	tests := map[string]struct {
		event     string
		status    string
		wantType  string
		wantAmt   string // the amount field the gateway reads
		wantValue float64
	}{
		"paid, default event":    {status: StatusPaid, wantType: "payment_intent.succeeded", wantAmt: "amount_received", wantValue: 8888},
		"paid, payment_intent":   {event: StripePaymentIntentSucceeded, status: StatusPaid, wantType: "payment_intent.succeeded", wantAmt: "amount_received", wantValue: 8888},
		"paid, checkout":         {event: StripeCheckoutSessionDone, status: StatusPaid, wantType: "checkout.session.completed", wantAmt: "amount_total", wantValue: 8888},
		"closed":                 {status: StatusClosed, wantType: "payment_intent.canceled", wantAmt: "amount_received", wantValue: 0},
		"pending":                {status: StatusPending, wantType: "payment_intent.processing", wantAmt: "amount_received", wantValue: 0},
		"refund":                 {status: StatusRefund, wantType: "charge.refunded", wantAmt: "amount_refunded", wantValue: 8888},
		"refund with a checkout": {event: StripeCheckoutSessionDone, status: StatusRefund, wantType: "charge.refunded", wantAmt: "amount_refunded", wantValue: 8888},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := StripeSigner{Secret: stripeSimSecret, Event: tt.event}
			msg, err := s.Sign(Payment{TradeNo: "T20240501-0001", AmountFen: 8888, Status: tt.status, Time: now})
			if err != nil {
				t.Fatal(err)
			}
			sig := msg.Header.Get("Stripe-Signature")
			// stripe-go's check, on the wall clock, as a merchant's own handler would run it.
			if err := webhook.ValidatePayload(msg.Body, sig, stripeSimSecret); err != nil {
				t.Fatalf("stripe-go refuses the simulator's message: %v", err)
			}
			if err := webhook.ValidatePayload(msg.Body, sig, "whsec_notTheSecret"); err == nil {
				t.Fatal("stripe-go accepts the message under another secret")
			}
			// And its event type reads the body (the API version is ours, not necessarily stripe-go's).
			ev, err := webhook.ConstructEventWithOptions(msg.Body, sig, stripeSimSecret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
			if err != nil {
				t.Fatalf("stripe-go cannot read the event: %v", err)
			}
			obj := ev.Data.Object
			meta, _ := obj["metadata"].(map[string]any)
			switch {
			case string(ev.Type) != tt.wantType || ev.APIVersion != StripeAPIVersion || ev.Livemode || ev.Created != now.Unix():
				t.Errorf("event %s %s livemode=%v created=%d", ev.Type, ev.APIVersion, ev.Livemode, ev.Created)
			case !strings.HasPrefix(ev.ID, "evt_"):
				t.Errorf("event id %q", ev.ID)
			case obj["currency"] != "cny" || obj[tt.wantAmt] != tt.wantValue:
				t.Errorf("object %v", obj)
			case tt.event == StripeCheckoutSessionDone && tt.status == StatusRefund && len(meta) != 0:
				t.Errorf("a Checkout payment's charge with metadata %v, want none of ours", meta)
			case !(tt.event == StripeCheckoutSessionDone && tt.status == StatusRefund) && meta["trade_no"] != "T20240501-0001":
				t.Errorf("object %v without metadata.trade_no", obj)
			}
			if msg.Header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", msg.Header.Get("Content-Type"))
			}
		})
	}
}

// The gateway's verifier maps the simulator's events as the protocol says.
func TestStripeSignerAgainstGateway(t *testing.T) {
	verifier, err := stripe.New([]string{"whsec_newer000000000000000000000000", stripeSimSecret}, 300*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1714564807, 0)
	p := Payment{TradeNo: "T20240501-0001", AmountFen: 8888, Currency: "USD", Time: at}
	tests := map[string]struct {
		event   string
		status  string
		want    payment.Kind
		wantFen int64
	}{
		"payment_intent.succeeded":   {status: StatusPaid, want: payment.KindPaid, wantFen: 8888},
		"checkout.session.completed": {event: StripeCheckoutSessionDone, status: StatusPaid, want: payment.KindPaid, wantFen: 8888},
		"charge.refunded":            {status: StatusRefund, want: payment.KindRefund, wantFen: 8888},
		"payment_intent.canceled":    {status: StatusClosed, want: payment.KindOther},
		"payment_intent.processing":  {status: StatusPending, want: payment.KindOther},
	}
	txns := map[string]bool{}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := p
			p.Status = tt.status
			msg, err := StripeSigner{Secret: stripeSimSecret, Event: tt.event}.Sign(p)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := verifier.Verify(msg.Body, msg.Header, at.Add(time.Minute))
			if err != nil {
				t.Fatalf("gateway refuses the simulator's message: %v", err)
			}
			if ev.Kind != tt.want || ev.Status != name || ev.TradeNo != p.TradeNo || ev.AmountFen != tt.wantFen ||
				!strings.HasPrefix(ev.NotifyID, "evt_") || !bytes.Equal(ev.Raw, msg.Body) {
				t.Errorf("event %+v", ev)
			}
			if tt.want != payment.KindOther && ev.Currency != "USD" {
				t.Errorf("currency %q", ev.Currency)
			}
			if tt.want == payment.KindPaid {
				txns[ev.ChannelTxnID] = true
			}
		})
	}
	// The session and the PaymentIntent of one payment are one channel transaction.
	if len(txns) != 1 {
		t.Errorf("paid events name %d channel transactions: %v", len(txns), txns)
	}
	for txn := range txns {
		if !strings.HasPrefix(txn, "pi_") {
			t.Errorf("channel transaction %q", txn)
		}
	}

	// A refund is keyed by its re_ id and states the charge's refunded total.
	for name, tc := range map[string]struct {
		p        Payment
		wantID   string
		wantFen  int64
		refunded bool
	}{
		"first, partial": {Payment{RefundFen: 1000, RefundID: "re_1First"}, "re_1First", 1000, false},
		"second":         {Payment{RefundFen: 500, RefundTotalFen: 1500, RefundID: "re_2Second"}, "re_2Second", 1500, false},
		"derived id":     {Payment{}, "", 8888, true},
	} {
		r := p
		r.Status, r.RefundFen, r.RefundTotalFen, r.RefundID = StatusRefund, tc.p.RefundFen, tc.p.RefundTotalFen, tc.p.RefundID
		msg, err := StripeSigner{Secret: stripeSimSecret}.Sign(r)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := verifier.Verify(msg.Body, msg.Header, at)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ev.Kind != payment.KindRefund || ev.RefundFen != tc.wantFen || ev.AmountFen != tc.wantFen || !ev.RefundIsTotal ||
			!strings.HasPrefix(ev.RefundID, "re_") || tc.wantID != "" && ev.RefundID != tc.wantID || !strings.HasPrefix(ev.ChannelTxnID, "pi_") {
			t.Errorf("%s: refund event %+v, want %s of total %d", name, ev, tc.wantID, tc.wantFen)
		}
		if got := bytes.Contains(msg.Body, []byte(`"refunded": true`)); got != tc.refunded {
			t.Errorf("%s: charge refunded = %v, want %v", name, got, tc.refunded)
		}
	}

	// Past the tolerance, the same message is refused.
	msg, err := StripeSigner{Secret: stripeSimSecret}.Sign(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(msg.Body, msg.Header, at.Add(301*time.Second)); err == nil {
		t.Error("gateway accepts a stale message")
	}
}

func TestStripeSignerIDs(t *testing.T) {
	at := time.Unix(1714564807, 0)
	sign := func(s StripeSigner, p Payment) []byte {
		t.Helper()
		msg, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Body
	}
	ids := func(body []byte) (evt, pi string) {
		t.Helper()
		ev, err := webhook.ConstructEventWithOptions(body, SignStripe(body, stripeSimSecret, time.Now()), stripeSimSecret,
			webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		if err != nil {
			t.Fatal(err)
		}
		pi, _ = ev.Data.Object["payment_intent"].(string)
		if pi == "" {
			pi, _ = ev.Data.Object["id"].(string)
		}
		return ev.ID, pi
	}
	p := Payment{TradeNo: "T1", AmountFen: 100, Time: at}
	pi := StripeSigner{Secret: stripeSimSecret}
	session := StripeSigner{Secret: stripeSimSecret, Event: StripeCheckoutSessionDone}

	// A repeat of one event is the same bytes: the same event id, as Stripe's retries are.
	if !bytes.Equal(sign(pi, p), sign(pi, p)) {
		t.Error("two signings of one payment differ")
	}
	evtPI, txnPI := ids(sign(pi, p))
	evtCS, txnCS := ids(sign(session, p))
	if evtPI == evtCS {
		t.Errorf("payment_intent.succeeded and checkout.session.completed share event id %s", evtPI)
	}
	if txnPI != txnCS || !strings.HasPrefix(txnPI, "pi_") {
		t.Errorf("payment intents %q and %q", txnPI, txnCS)
	}
	if evt, _ := ids(sign(pi, Payment{TradeNo: "T2", AmountFen: 100, Time: at})); evt == evtPI {
		t.Error("two trades share an event id")
	}

	// Given ids are kept, with Stripe's prefixes.
	evt, txn := ids(sign(pi, Payment{TradeNo: "T1", AmountFen: 100, Time: at, NotifyID: "abc", TxnID: "3Xyz"}))
	if evt != "evt_abc" || txn != "pi_3Xyz" {
		t.Errorf("ids %q %q", evt, txn)
	}
}

func TestStripeSignerErrors(t *testing.T) {
	tests := map[string]struct {
		signer StripeSigner
		p      Payment
	}{
		"no secret":      {signer: StripeSigner{}, p: Payment{TradeNo: "T1", AmountFen: 1}},
		"unknown status": {signer: StripeSigner{Secret: stripeSimSecret}, p: Payment{TradeNo: "T1", AmountFen: 1, Status: "lost"}},
		"unknown event":  {signer: StripeSigner{Secret: stripeSimSecret, Event: "invoice.paid"}, p: Payment{TradeNo: "T1", AmountFen: 1}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if msg, err := tt.signer.Sign(tt.p); err == nil {
				t.Errorf("Sign = %s, want an error", msg.Body)
			}
		})
	}
	if got := (StripeSigner{}).Channel(); got != "stripe" {
		t.Errorf("Channel = %q", got)
	}
	var _ Signer = StripeSigner{}
}
