package stripe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

// Test secrets only: nothing here is, or ever signs for, a real Stripe endpoint.
const (
	stripeTestSecret  = "whsec_paygwTestSecret0000000000000001" // the one in stripe_vectors.txt
	stripeNewSecret   = "whsec_paygwTestSecret0000000000000002"
	stripeOtherSecret = "whsec_someoneElsesEndpoint000000000000"
	stripeTolerance   = 300 * time.Second
)

// stripeTestNow is the injected clock of most tests: long past, so that a verifier which let
// stripe-go's wall-clock window decide would refuse every case.
var stripeTestNow = time.Unix(1714564807, 0)

func newTestStripe(tb testing.TB, secrets ...string) *Channel {
	tb.Helper()
	if len(secrets) == 0 {
		secrets = []string{stripeTestSecret}
	}
	s, err := New(secrets, stripeTolerance)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// stripeSign plays Stripe with stripe-go's own test signer; stripe_vectors.txt holds signatures
// made by openssl, and simulate/ cross-checks its own signer against both.
func stripeSign(body, secret string, t time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: []byte(body), Secret: secret, Timestamp: t,
	}).Header
}

// stripeV1 is the bare hex signature, for headers a test assembles itself.
func stripeV1(body, secret string, t time.Time) string {
	return hex.EncodeToString(webhook.ComputeSignature(t, []byte(body), secret))
}

func stripeHeader(sig string) http.Header {
	return http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Stripe-Signature": {sig}}
}

// kv is one field of a JSON object with its raw JSON value; a slice keeps the order.
type kv struct{ k, raw string }

// jsonObject renders fields with edits applied: a raw value of "-" drops the key, any other value
// replaces it or, for a new key, is appended.
func jsonObject(fields []kv, edits ...kv) string {
	fields = append([]kv(nil), fields...)
	for _, e := range edits {
		found := false
		for i := range fields {
			if fields[i].k == e.k {
				fields[i].raw, found = e.raw, true
			}
		}
		if !found {
			fields = append(fields, e)
		}
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		if f.raw != "-" {
			parts = append(parts, strconv.Quote(f.k)+":"+f.raw)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func stripePaymentIntentObject(edits ...kv) string {
	return jsonObject([]kv{
		{"id", `"pi_3TestLkdIwHu7ix0Wb5Jx2L"`}, {"object", `"payment_intent"`}, {"amount", "8888"},
		{"amount_received", "8888"}, {"currency", `"cny"`}, {"metadata", `{"trade_no":"T20240501-0001"}`},
		{"status", `"succeeded"`},
	}, edits...)
}

func stripeSessionObject(edits ...kv) string {
	return jsonObject([]kv{
		{"id", `"cs_test_a1TestSession0000000000000000000000000000000000000000000000"`},
		{"object", `"checkout.session"`}, {"amount_total", "8888"}, {"currency", `"cny"`},
		{"client_reference_id", `"T20240501-0001"`}, {"metadata", `{}`}, {"mode", `"payment"`},
		{"payment_intent", `"pi_3TestLkdIwHu7ix0Wb5Jx2L"`}, {"payment_status", `"paid"`}, {"status", `"complete"`},
	}, edits...)
}

func stripeChargeObject(edits ...kv) string {
	return jsonObject([]kv{
		{"id", `"ch_3TestLkdIwHu7ix0Ut6oZ1c"`}, {"object", `"charge"`}, {"amount", "8888"},
		{"amount_refunded", "8888"}, {"currency", `"cny"`}, {"metadata", `{"trade_no":"T20240501-0001"}`},
		{"payment_intent", `"pi_3TestLkdIwHu7ix0Wb5Jx2L"`}, {"refunded", "true"},
	}, edits...)
}

// stripeEnvelope is an event around object, created at stripeTestNow - 2 s.
func stripeEnvelope(typ, object string, edits ...kv) string {
	return jsonObject([]kv{
		{"id", `"evt_3TestLkdIwHu7ix0v8Hs1Qa"`}, {"object", `"event"`}, {"api_version", `"2025-07-30.basil"`},
		{"created", "1714564805"}, {"data", `{"object":` + object + `}`}, {"livemode", "false"},
		{"pending_webhooks", "1"}, {"request", `{"id":null,"idempotency_key":null}`}, {"type", strconv.Quote(typ)},
	}, edits...)
}

type stripeVector struct{ file, secret, header string }

func readStripeVectors(tb testing.TB) []stripeVector {
	tb.Helper()
	var vectors []stripeVector
	for _, f := range channeltest.ReadVectors(tb, "stripe_vectors.txt", 3) {
		vectors = append(vectors, stripeVector{file: f[0], secret: f[1], header: f[2]})
	}
	return vectors
}

// vectorTime is the t= of a vector's header.
func vectorTime(tb testing.TB, header string) time.Time {
	tb.Helper()
	t, _, _ := strings.Cut(strings.TrimPrefix(header, "t="), ",")
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		tb.Fatalf("vector header %q: %v", header, err)
	}
	return time.Unix(n, 0)
}

func TestStripeVectors(t *testing.T) {
	want := map[string]payment.Event{
		"stripe_payment_intent_succeeded.json": {
			NotifyID: "evt_3PBm2aLkdIwHu7ix0v8Hs1Qa", TradeNo: "T20240501-0001", ChannelTxnID: "pi_3PBm2aLkdIwHu7ix0Wb5Jx2L",
			Kind: payment.KindPaid, Status: "payment_intent.succeeded", AmountFen: 8888, Currency: "CNY",
			PaidAt: time.Unix(1714564805, 0).UTC(),
		},
		// The same payment as the PaymentIntent above: the same channel transaction.
		// trade_no from client_reference_id, which counts only if the order exists.
		"stripe_checkout_session_completed.json": {
			NotifyID: "evt_1PBm2cLkdIwHu7ixq3Hh0aZt", TradeNo: "T20240501-0001", ChannelTxnID: "pi_3PBm2aLkdIwHu7ix0Wb5Jx2L",
			Kind: payment.KindPaid, Status: "checkout.session.completed", AmountFen: 8888, Currency: "CNY",
			PaidAt: time.Unix(1714564806, 0).UTC(), TradeNoUnsure: true,
		},
		// A charge of today's API versions lists no refunds: keyed by the charge and its total.
		"stripe_charge_refunded.json": {
			NotifyID: "evt_3PBm2aLkdIwHu7ix0r5Tf2Ke", TradeNo: "T20240501-0001", ChannelTxnID: "pi_3PBm2aLkdIwHu7ix0Wb5Jx2L",
			Kind: payment.KindRefund, Status: "charge.refunded", AmountFen: 1000, Currency: "CNY",
			PaidAt: time.Unix(1714651200, 0).UTC(), RefundFen: 1000, RefundIsTotal: true,
		},
		// An older API version lists them: keyed by the newest, the second refund.
		"stripe_charge_refunded_list.json": {
			NotifyID: "evt_3PBm2aLkdIwHu7ix0r7Wq9Lm", TradeNo: "T20240501-0001", ChannelTxnID: "pi_3PBm2aLkdIwHu7ix0Wb5Jx2L",
			Kind: payment.KindRefund, Status: "charge.refunded", AmountFen: 3000, Currency: "CNY",
			PaidAt: time.Unix(1714737600, 0).UTC(), RefundID: "re_3PBm2aLkdIwHu7ix0Rf2Second", RefundFen: 3000, RefundIsTotal: true,
		},
	}
	vectors := readStripeVectors(t)
	if len(vectors) != len(want) {
		t.Fatalf("%d vectors, want %d", len(vectors), len(want))
	}
	for _, v := range vectors {
		t.Run(v.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", v.file))
			if err != nil {
				t.Fatal(err)
			}
			s := newTestStripe(t, v.secret)
			ev, err := s.Verify(body, stripeHeader(v.header), vectorTime(t, v.header))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			w := want[v.file]
			w.Channel, w.Raw = "stripe", body
			if !reflect.DeepEqual(ev, w) {
				t.Errorf("event\n got %+v\nwant %+v", ev, w)
			}
			body[0] = ' ' // Raw is a copy
			if bytes.Equal(ev.Raw, body) {
				t.Error("Raw shares the body's memory")
			}

			// And stripe-go agrees with openssl (a wall-clock check would refuse the old t).
			if err := webhook.ValidatePayloadIgnoringTolerance(ev.Raw, v.header, v.secret); err != nil {
				t.Errorf("stripe-go refuses the openssl vector: %v", err)
			}
		})
	}
}

func TestStripeVerify(t *testing.T) {
	now := stripeTestNow
	body := stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject())
	valid := stripeSign(body, stripeTestSecret, now)
	v1 := stripeV1(body, stripeTestSecret, now)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := now.Add(-time.Hour)
	wrongV1 := strings.Repeat("ab", 32)

	tests := map[string]struct {
		body    string
		header  http.Header // nil = none at all
		secrets []string    // nil = stripeTestSecret alone
		now     time.Time   // zero = stripeTestNow
		wantErr error       // nil = verifies
		reason  string      // in the error, when channeltest.WantErr is set and reason is not empty
	}{
		"valid":                       {body: body, header: stripeHeader(valid)},
		"valid at the wall clock":     {body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, time.Now())), now: time.Now()},
		"rotation: signed with new":   {body: body, header: stripeHeader(stripeSign(body, stripeNewSecret, now)), secrets: []string{stripeNewSecret, stripeTestSecret}},
		"rotation: signed with old":   {body: body, header: stripeHeader(valid), secrets: []string{stripeNewSecret, stripeTestSecret}},
		"rotation: neither secret":    {body: body, header: stripeHeader(stripeSign(body, stripeOtherSecret, now)), secrets: []string{stripeNewSecret, stripeTestSecret}, wantErr: channels.ErrBadSignature, reason: "no v1 signature matches"},
		"several v1, second matches":  {body: body, header: stripeHeader("t=" + ts + ",v1=" + wrongV1 + ",v1=" + v1)},
		"several v1, none matches":    {body: body, header: stripeHeader("t=" + ts + ",v1=" + wrongV1 + ",v1=" + wrongV1), wantErr: channels.ErrBadSignature},
		"v0 and unknown parts beside": {body: body, header: stripeHeader("t=" + ts + ",v0=" + wrongV1 + ",v1=" + v1 + ",x=y")},
		"v1 not hex beside a match":   {body: body, header: stripeHeader("t=" + ts + ",v1=zz,v1=" + v1)},
		"only a v0 signature":         {body: body, header: stripeHeader("t=" + ts + ",v0=" + v1), wantErr: channels.ErrBadSignature},
		"upper-case hex":              {body: body, header: stripeHeader("t=" + ts + ",v1=" + strings.ToUpper(v1))},
		"API version mismatch never rejects": {
			body:   stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"api_version", `"2019-01-01"`}),
			header: stripeHeader(stripeSign(stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"api_version", `"2019-01-01"`}), stripeTestSecret, now)),
		},

		"tampered body":           {body: strings.Replace(body, "8888", "8889", 1), header: stripeHeader(valid), wantErr: channels.ErrBadSignature, reason: "no v1 signature matches"},
		"body with trailing LF":   {body: body + "\n", header: stripeHeader(valid), wantErr: channels.ErrBadSignature},
		"wrong secret":            {body: body, header: stripeHeader(stripeSign(body, stripeOtherSecret, now)), wantErr: channels.ErrBadSignature},
		"secret without prefix":   {body: body, header: stripeHeader(stripeSign(body, strings.TrimPrefix(stripeTestSecret, "whsec_"), now)), wantErr: channels.ErrBadSignature},
		"t changed after signing": {body: body, header: stripeHeader("t=" + strconv.FormatInt(now.Unix()+1, 10) + ",v1=" + v1), wantErr: channels.ErrBadSignature},
		"signature truncated":     {body: body, header: stripeHeader("t=" + ts + ",v1=" + v1[:62]), wantErr: channels.ErrBadSignature},

		"no header":            {body: body, header: nil, wantErr: channels.ErrBadSignature, reason: "missing"},
		"empty header":         {body: body, header: stripeHeader(""), wantErr: channels.ErrBadSignature, reason: "missing"},
		"header repeated":      {body: body, header: http.Header{"Stripe-Signature": {valid, valid}}, wantErr: channels.ErrBadSignature, reason: "repeated"},
		"header not t=,v1=":    {body: body, header: stripeHeader("garbage"), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"no t":                 {body: body, header: stripeHeader("v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"t not a number":       {body: body, header: stripeHeader("t=abc,v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"t negative":           {body: body, header: stripeHeader("t=-1,v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"t with plus":          {body: body, header: stripeHeader("t=+" + ts + ",v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"t huge":               {body: body, header: stripeHeader("t=99999999999999999999,v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"t repeated":           {body: body, header: stripeHeader("t=" + ts + "," + valid), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"part with two =":      {body: body, header: stripeHeader(valid + ",v1=a=b"), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"empty part":           {body: body, header: stripeHeader("t=" + ts + ",,v1=" + v1), wantErr: channels.ErrBadSignature, reason: "invalid"},
		"spaces around parts":  {body: body, header: stripeHeader("t=" + ts + ", v1=" + v1), wantErr: channels.ErrBadSignature},
		"t but no v1 at all":   {body: body, header: stripeHeader("t=" + ts), wantErr: channels.ErrBadSignature},
		"v1 empty":             {body: body, header: stripeHeader("t=" + ts + ",v1="), wantErr: channels.ErrBadSignature},
		"header of the secret": {body: body, header: stripeHeader(stripeTestSecret), wantErr: channels.ErrBadSignature},

		"stale: tolerance + 1 s": {
			body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, now.Add(-stripeTolerance-time.Second))),
			wantErr: channels.ErrStale, reason: "timestamp outside tolerance",
		},
		"stale at exactly the tolerance is accepted": {body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, now.Add(-stripeTolerance)))},
		"future: tolerance + 1 s": {
			body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, now.Add(stripeTolerance+time.Second))),
			wantErr: channels.ErrStale, reason: "timestamp outside tolerance",
		},
		"future within tolerance": {body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, now.Add(stripeTolerance)))},
		"replayed old signature": {
			body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, old)),
			wantErr: channels.ErrStale, reason: "timestamp outside tolerance",
		},
		"replayed old signature, fresh t in front": {
			body: body, header: stripeHeader("t=" + ts + "," + stripeSign(body, stripeTestSecret, old)),
			wantErr: channels.ErrBadSignature, reason: "invalid",
		},
		"replayed old signature, fresh t behind": {
			body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, old) + ",t=" + ts),
			wantErr: channels.ErrBadSignature, reason: "invalid",
		},
		"valid now, stale by the wall clock": { // only the injected clock decides
			body: body, header: stripeHeader(valid), now: now,
		},
		"fresh by the wall clock, stale by ours": {
			body: body, header: stripeHeader(stripeSign(body, stripeTestSecret, time.Now())), now: now,
			wantErr: channels.ErrStale, reason: "timestamp outside tolerance",
		},
		"zero clock": {body: body, header: stripeHeader(valid), now: time.Time{}.Add(time.Nanosecond), wantErr: channels.ErrStale},

		"signed but not JSON": {
			body: "not json", header: stripeHeader(stripeSign("not json", stripeTestSecret, now)), wantErr: channels.ErrMalformed,
		},
		"signed but empty": {body: "", header: stripeHeader(stripeSign("", stripeTestSecret, now)), wantErr: channels.ErrMalformed},
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := newTestStripe(t, tt.secrets...)
			at := tt.now
			if at.IsZero() {
				at = now
			}
			ev, err := s.Verify([]byte(tt.body), tt.header, at)
			if !channeltest.WantVerify(t, tt.body, ev, err, tt.wantErr) {
				return
			}
			if tt.reason != "" && !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Verify error = %q, want it to say %q", err, tt.reason)
			}
			// The reason never carries the header, a signature or a secret.
			msg := err.Error()
			for _, secret := range []string{v1, v1[:16], wrongV1[:16], stripeTestSecret, "whsec_", ts} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q quotes signature material %q", msg, secret)
				}
			}
		})
	}
}

func TestStripeEvent(t *testing.T) {
	const pi, cs, ch = "pi_3TestLkdIwHu7ix0Wb5Jx2L", "cs_test_a1TestSession0000000000000000000000000000000000000000000000", "ch_3TestLkdIwHu7ix0Ut6oZ1c"
	piEvent := func(edits ...kv) string {
		return stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(edits...))
	}
	session := func(edits ...kv) string {
		return stripeEnvelope("checkout.session.completed", stripeSessionObject(edits...))
	}
	charge := func(edits ...kv) string { return stripeEnvelope("charge.refunded", stripeChargeObject(edits...)) }

	// want holds the fields checked; Channel, NotifyID, Status, PaidAt and Raw are checked always.
	type want struct {
		kind     payment.Kind
		tradeNo  string
		txn      string
		amount   int64
		currency string
	}
	paid := want{payment.KindPaid, "T20240501-0001", pi, 8888, "CNY"}
	tests := map[string]struct {
		body    string
		want    want
		wantErr error
	}{
		"payment_intent.succeeded":    {body: piEvent(), want: paid},
		"currency usd":                {body: piEvent(kv{"currency", `"usd"`}), want: want{payment.KindPaid, "T20240501-0001", pi, 8888, "USD"}},
		"zero-decimal jpy":            {body: piEvent(kv{"currency", `"jpy"`}, kv{"amount_received", "5000"}), want: want{payment.KindPaid, "T20240501-0001", pi, 5000, "JPY"}},
		"three-decimal kwd":           {body: piEvent(kv{"currency", `"kwd"`}, kv{"amount_received", "1234"}), want: want{payment.KindPaid, "T20240501-0001", pi, 1234, "KWD"}},
		"isk in hundredths":           {body: piEvent(kv{"currency", `"isk"`}, kv{"amount_received", "100000"}), want: want{payment.KindPaid, "T20240501-0001", pi, 1000, "ISK"}},
		"mga in whole ariary":         {body: piEvent(kv{"currency", `"mga"`}, kv{"amount_received", "500"}), want: want{payment.KindPaid, "T20240501-0001", pi, 50000, "MGA"}},
		"isk with a fraction":         {body: piEvent(kv{"currency", `"isk"`}, kv{"amount_received", "100050"}), wantErr: channels.ErrMalformed},
		"mga past the limit":          {body: piEvent(kv{"currency", `"mga"`}, kv{"amount_received", "1000000001"}), wantErr: channels.ErrMalformed},
		"amount_received, not amount": {body: piEvent(kv{"amount", "9999"}, kv{"amount_received", "8888"}), want: paid},
		"amount_received 0":           {body: piEvent(kv{"amount_received", "0"}), want: want{payment.KindPaid, "T20240501-0001", pi, 0, "CNY"}},
		"amount at the limit":         {body: piEvent(kv{"amount_received", "100000000000"}), want: want{payment.KindPaid, "T20240501-0001", pi, 100_000_000_000, "CNY"}},
		"extra metadata":              {body: piEvent(kv{"metadata", `{"order":"x","trade_no":"T20240501-0001"}`}), want: paid},
		"whitespace around object":    {body: strings.Replace(piEvent(), `"object":{"id"`, "\"object\" : \n {\"id\"", 1), want: paid},

		"amount_received float":                             {body: piEvent(kv{"amount_received", "88.88"}), wantErr: channels.ErrMalformed},
		"amount_received 8888.0":                            {body: piEvent(kv{"amount_received", "8888.0"}), wantErr: channels.ErrMalformed},
		"amount_received exponent":                          {body: piEvent(kv{"amount_received", "8.888e3"}), wantErr: channels.ErrMalformed},
		"amount_received negative":                          {body: piEvent(kv{"amount_received", "-8888"}), wantErr: channels.ErrMalformed},
		"amount_received string":                            {body: piEvent(kv{"amount_received", `"8888"`}), wantErr: channels.ErrMalformed},
		"amount_received null":                              {body: piEvent(kv{"amount_received", "null"}), wantErr: channels.ErrMalformed},
		"amount_received missing":                           {body: piEvent(kv{"amount_received", "-"}), wantErr: channels.ErrMalformed},
		"amount_received too large":                         {body: piEvent(kv{"amount_received", "100000000001"}), wantErr: channels.ErrMalformed},
		"amount_received 20 digits":                         {body: piEvent(kv{"amount_received", "99999999999999999999"}), wantErr: channels.ErrMalformed},
		"currency missing":                                  {body: piEvent(kv{"currency", "-"}), wantErr: channels.ErrMalformed},
		"currency two letters":                              {body: piEvent(kv{"currency", `"cn"`}), wantErr: channels.ErrMalformed},
		"currency with a digit":                             {body: piEvent(kv{"currency", `"c1y"`}), wantErr: channels.ErrMalformed},
		"missing metadata.trade_no: not ours, acknowledged": {body: piEvent(kv{"metadata", `{}`}), want: want{payment.KindOther, "", pi, 0, ""}},
		"missing metadata: not ours, acknowledged":          {body: piEvent(kv{"metadata", "-"}), want: want{payment.KindOther, "", pi, 0, ""}},
		"trade_no with slash: not ours":                     {body: piEvent(kv{"metadata", `{"trade_no":"T/1"}`}), want: want{payment.KindOther, "", pi, 0, ""}},
		"trade_no 32 chars":                                 {body: piEvent(kv{"metadata", `{"trade_no":"` + strings.Repeat("a", 32) + `"}`}), want: want{payment.KindPaid, strings.Repeat("a", 32), pi, 8888, "CNY"}},
		"trade_no 33 chars: not ours":                       {body: piEvent(kv{"metadata", `{"trade_no":"` + strings.Repeat("a", 33) + `"}`}), want: want{payment.KindOther, "", pi, 0, ""}},
		"not ours, currency and amount unread":              {body: piEvent(kv{"metadata", `{}`}, kv{"currency", "null"}, kv{"amount_received", `"x"`}), want: want{payment.KindOther, "", pi, 0, ""}},
		"object id 128 bytes":                               {body: piEvent(kv{"id", `"pi_` + strings.Repeat("a", 125) + `"`}), want: want{payment.KindPaid, "T20240501-0001", "pi_" + strings.Repeat("a", 125), 8888, "CNY"}},
		"object id 129 bytes":                               {body: piEvent(kv{"id", `"pi_` + strings.Repeat("a", 126) + `"`}), wantErr: channels.ErrMalformed},
		"object id 129 bytes, not ours: left out":           {body: piEvent(kv{"id", `"pi_` + strings.Repeat("a", 126) + `"`}, kv{"metadata", `{}`}), want: want{payment.KindOther, "", "", 0, ""}},
		"metadata value not a string":                       {body: piEvent(kv{"metadata", `{"trade_no":1}`}), wantErr: channels.ErrMalformed},
		"object id missing":                                 {body: piEvent(kv{"id", "-"}), wantErr: channels.ErrMalformed},
		"object id with a space":                            {body: piEvent(kv{"id", `"pi_1 2"`}), wantErr: channels.ErrMalformed},
		"payment_intent.succeeded again":                    {body: piEvent(), want: paid}, // decoding keeps no state

		"session paid": {body: session(), want: paid},
		"session paid, no payment_intent": {
			body: session(kv{"payment_intent", "null"}), want: want{payment.KindPaid, "T20240501-0001", cs, 8888, "CNY"},
		},
		"session paid, payment_intent absent": {
			body: session(kv{"payment_intent", "-"}), want: want{payment.KindPaid, "T20240501-0001", cs, 8888, "CNY"},
		},
		"session paid, payment_intent empty": {
			body: session(kv{"payment_intent", `""`}), want: want{payment.KindPaid, "T20240501-0001", cs, 8888, "CNY"},
		},
		"session payment_intent expanded": {body: session(kv{"payment_intent", `{"id":"pi_1"}`}), wantErr: channels.ErrMalformed},
		"session unpaid": {
			body: session(kv{"payment_status", `"unpaid"`}), want: want{payment.KindPending, "T20240501-0001", pi, 8888, "CNY"},
		},
		"session no_payment_required": {
			body: session(kv{"payment_status", `"no_payment_required"`}, kv{"amount_total", "0"}), want: want{payment.KindPending, "T20240501-0001", pi, 0, "CNY"},
		},
		"session payment_status missing": {body: session(kv{"payment_status", "-"}), wantErr: channels.ErrMalformed},
		"session trade_no from metadata": {
			body: session(kv{"client_reference_id", "null"}, kv{"metadata", `{"trade_no":"T-META"}`}), want: want{payment.KindPaid, "T-META", pi, 8888, "CNY"},
		},
		"session metadata.trade_no wins over client_reference_id": {
			body: session(kv{"metadata", `{"trade_no":"T-META"}`}), want: want{payment.KindPaid, "T-META", pi, 8888, "CNY"},
		},
		"session client_reference_id not ours, metadata.trade_no is": {
			body: session(kv{"client_reference_id", `"T 1"`}, kv{"metadata", `{"trade_no":"T-META"}`}), want: want{payment.KindPaid, "T-META", pi, 8888, "CNY"},
		},
		"session client_reference_id an email: not ours": {
			body: session(kv{"client_reference_id", `"buyer@example.com"`}), want: want{payment.KindOther, "", pi, 0, ""},
		},
		"session client_reference_id too long: not ours": {
			body: session(kv{"client_reference_id", `"` + strings.Repeat("c", 33) + `"`}), want: want{payment.KindOther, "", pi, 0, ""},
		},
		"session setup mode, null currency": {
			body: session(kv{"mode", `"setup"`}, kv{"currency", "null"}, kv{"amount_total", "null"}, kv{"payment_intent", "null"},
				kv{"payment_status", `"no_payment_required"`}, kv{"client_reference_id", "null"}, kv{"setup_intent", `"seti_1Test"`}),
			want: want{payment.KindOther, "", cs, 0, ""},
		},
		"session setup mode with a trade_no: moves no money": {
			body: session(kv{"mode", `"setup"`}, kv{"currency", "null"}, kv{"amount_total", "null"}, kv{"payment_intent", "null"},
				kv{"payment_status", `"no_payment_required"`}, kv{"metadata", `{"trade_no":"T20240501-0001"}`}),
			want: want{payment.KindOther, "", cs, 0, ""},
		},
		"session payment_intent 129 bytes": {
			body: session(kv{"payment_intent", `"pi_` + strings.Repeat("a", 126) + `"`}), wantErr: channels.ErrMalformed,
		},
		"session of ours, currency null": {body: session(kv{"currency", "null"}), wantErr: channels.ErrMalformed},
		"session without any trade_no":   {body: session(kv{"client_reference_id", "-"}), want: want{payment.KindOther, "", pi, 0, ""}},
		"session amount_total missing":   {body: session(kv{"amount_total", "-"}), wantErr: channels.ErrMalformed},
		"session amount_total float":     {body: session(kv{"amount_total", "1.5"}), wantErr: channels.ErrMalformed},

		"charge.refunded": {body: charge(), want: want{payment.KindRefund, "T20240501-0001", pi, 8888, "CNY"}},
		"charge.refunded partly": {
			body: charge(kv{"amount_refunded", "100"}, kv{"refunded", "false"}), want: want{payment.KindRefund, "T20240501-0001", pi, 100, "CNY"},
		},
		"charge without payment_intent": {
			body: charge(kv{"payment_intent", "null"}), want: want{payment.KindRefund, "T20240501-0001", ch, 8888, "CNY"},
		},
		"charge without trade_no": {body: charge(kv{"metadata", `{}`}), want: want{payment.KindRefund, "", pi, 8888, "CNY"}},
		"charge with a trade_no not ours": {
			body: charge(kv{"metadata", `{"trade_no":"a@b"}`}), want: want{payment.KindRefund, "", pi, 8888, "CNY"},
		},
		"charge without trade_no or payment_intent: not ours": {
			body: charge(kv{"metadata", `{}`}, kv{"payment_intent", "null"}), want: want{payment.KindOther, "", ch, 0, ""},
		},
		"charge payment_intent 129 bytes": {
			body: charge(kv{"payment_intent", `"pi_` + strings.Repeat("a", 126) + `"`}), wantErr: channels.ErrMalformed,
		},
		"charge amount_refunded float": {body: charge(kv{"amount_refunded", "1.0"}), wantErr: channels.ErrMalformed},

		"other: payment_intent.created": {
			body: stripeEnvelope("payment_intent.created", stripePaymentIntentObject()), want: want{payment.KindOther, "T20240501-0001", pi, 0, ""},
		},
		"other: payment_intent.canceled": {
			body: stripeEnvelope("payment_intent.canceled", stripePaymentIntentObject()), want: want{payment.KindOther, "T20240501-0001", pi, 0, ""},
		},
		"other: customer.created without trade_no": {
			body: stripeEnvelope("customer.created", `{"id":"cus_NffrFeUfNV2Hib","object":"customer","email":"a@example.com"}`),
			want: want{payment.KindOther, "", "cus_NffrFeUfNV2Hib", 0, ""},
		},
		"other: odd fields are no reason to refuse": {
			body: stripeEnvelope("invoice.paid", `{"id":5,"metadata":"x","amount_paid":1.5,"currency":7}`),
			want: want{payment.KindOther, "", "", 0, ""},
		},
		"other: bad trade_no left out": {
			body: stripeEnvelope("invoice.paid", `{"id":"in_1","metadata":{"trade_no":"T/1"}}`),
			want: want{payment.KindOther, "", "in_1", 0, ""},
		},
		"other: empty object": {
			body: stripeEnvelope("balance.available", `{}`), want: want{payment.KindOther, "", "", 0, ""},
		},

		"id missing":            {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"id", "-"}), wantErr: channels.ErrMalformed},
		"id not evt_":           {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"id", `"pi_1"`}), wantErr: channels.ErrMalformed},
		"id not a string":       {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"id", "1"}), wantErr: channels.ErrMalformed},
		"type missing":          {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"type", "-"}), wantErr: channels.ErrMalformed},
		"type with a space":     {body: stripeEnvelope("payment intent.succeeded", stripePaymentIntentObject()), wantErr: channels.ErrMalformed},
		"type upper case":       {body: stripeEnvelope("PAYMENT_INTENT.SUCCEEDED", stripePaymentIntentObject()), wantErr: channels.ErrMalformed},
		"created missing":       {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"created", "-"}), wantErr: channels.ErrMalformed},
		"created float":         {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"created", "1714564805.5"}), wantErr: channels.ErrMalformed},
		"created string":        {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"created", `"1714564805"`}), wantErr: channels.ErrMalformed},
		"data missing":          {body: stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"data", "-"}), wantErr: channels.ErrMalformed},
		"data.object null":      {body: stripeEnvelope("payment_intent.succeeded", "null"), wantErr: channels.ErrMalformed},
		"data.object an array":  {body: stripeEnvelope("payment_intent.succeeded", "[]"), wantErr: channels.ErrMalformed},
		"data.object a string":  {body: stripeEnvelope("customer.created", `"cus_1"`), wantErr: channels.ErrMalformed},
		"body a JSON array":     {body: "[" + piEvent() + "]", wantErr: channels.ErrMalformed},
		"body null":             {body: "null", wantErr: channels.ErrMalformed},
		"body with trailing {}": {body: piEvent() + "{}", wantErr: channels.ErrMalformed},
		"body cut short":        {body: piEvent()[:100], wantErr: channels.ErrMalformed},
	}

	s := newTestStripe(t)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := s.Verify([]byte(tt.body), stripeHeader(stripeSign(tt.body, stripeTestSecret, stripeTestNow)), stripeTestNow)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
				}
				if !reflect.DeepEqual(ev, payment.Event{}) {
					t.Errorf("event %+v returned with an error", ev)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got := want{ev.Kind, ev.TradeNo, ev.ChannelTxnID, ev.AmountFen, ev.Currency}
			if got != tt.want {
				t.Errorf("event = %+v, want %+v", got, tt.want)
			}
			if ev.Kind == payment.KindRefund && (ev.RefundFen != ev.AmountFen || !ev.RefundIsTotal) ||
				ev.Kind != payment.KindRefund && (ev.RefundID != "" || ev.RefundFen != 0 || ev.RefundIsTotal) {
				t.Errorf("refund fields %q %d %v on a %s event", ev.RefundID, ev.RefundFen, ev.RefundIsTotal, ev.Kind)
			}
			if ev.TradeNoUnsure && (ev.TradeNo == "" || !strings.Contains(tt.body, `"client_reference_id":"`+ev.TradeNo+`"`)) {
				t.Errorf("TradeNoUnsure on trade_no %q", ev.TradeNo)
			}
			if ev.Channel != "stripe" || ev.NotifyID != "evt_3TestLkdIwHu7ix0v8Hs1Qa" || !ev.PaidAt.Equal(time.Unix(1714564805, 0)) ||
				!bytes.Equal(ev.Raw, []byte(tt.body)) || !strings.Contains(tt.body, `"type":"`+ev.Status+`"`) {
				t.Errorf("envelope fields wrong: %+v", ev)
			}
		})
	}
}

// TestStripeTradeNoUnsure: a trade_no taken from client_reference_id, which other integrations
// fill too, is marked so that it counts only if the order exists; metadata.trade_no is ours.
func TestStripeTradeNoUnsure(t *testing.T) {
	s := newTestStripe(t)
	tests := map[string]struct {
		body   string
		unsure bool
	}{
		"session, client_reference_id":              {stripeEnvelope("checkout.session.completed", stripeSessionObject()), true},
		"async session, client_reference_id":        {stripeEnvelope("checkout.session.async_payment_succeeded", stripeSessionObject()), true},
		"session, metadata and client_reference_id": {stripeEnvelope("checkout.session.completed", stripeSessionObject(kv{"metadata", `{"trade_no":"T20240501-0001"}`})), false},
		"session, metadata alone":                   {stripeEnvelope("checkout.session.completed", stripeSessionObject(kv{"client_reference_id", "null"}, kv{"metadata", `{"trade_no":"T20240501-0001"}`})), false},
		"payment_intent":                            {stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject()), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := s.Verify([]byte(tt.body), stripeHeader(stripeSign(tt.body, stripeTestSecret, stripeTestNow)), stripeTestNow)
			if err != nil {
				t.Fatal(err)
			}
			if ev.TradeNoUnsure != tt.unsure || ev.TradeNo != "T20240501-0001" || ev.Kind != payment.KindPaid {
				t.Errorf("%s %q unsure=%v, want T20240501-0001 unsure=%v", ev.Kind, ev.TradeNo, ev.TradeNoUnsure, tt.unsure)
			}
		})
	}
}

// TestStripeRefundID: charge.refunded states the charge's refunded total. It is keyed by the newest
// refund the charge lists, else by the charge and that total: either is the same across Stripe's
// retries of one event, and differs for the next refund.
func TestStripeRefundID(t *testing.T) {
	s := newTestStripe(t)
	refund := func(id string, created int) string {
		return `{"id":"` + id + `","object":"refund","amount":100,"created":` + strconv.Itoa(created) + `,"status":"succeeded"}`
	}
	list := func(refunds ...string) kv {
		return kv{"refunds", `{"object":"list","data":[` + strings.Join(refunds, ",") + `],"has_more":false}`}
	}
	const fallback = "" // no refund named: the running total alone
	tests := map[string]struct {
		refunds kv
		want    string
	}{
		"no list":                       {kv{"refunds", "-"}, fallback},
		"null list":                     {kv{"refunds", "null"}, fallback},
		"empty list":                    {list(), fallback},
		"one refund":                    {list(refund("re_1", 10)), "re_1"},
		"newest first, as Stripe sends": {list(refund("re_2", 20), refund("re_1", 10)), "re_2"},
		"newest last":                   {list(refund("re_1", 10), refund("re_2", 20)), "re_2"},
		"same second: the first":        {list(refund("re_2", 20), refund("re_1", 20)), "re_2"},
		"newest unusable, next one":     {list(refund("re_"+strings.Repeat("x", 130), 30), refund("re_2", 20)), "re_2"},
		"list of another shape":         {kv{"refunds", `["re_1"]`}, fallback},
		"list not an object":            {kv{"refunds", `5`}, fallback},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			body := stripeEnvelope("charge.refunded", stripeChargeObject(kv{"amount_refunded", "300"}, tt.refunds))
			ev, err := s.Verify([]byte(body), stripeHeader(stripeSign(body, stripeTestSecret, stripeTestNow)), stripeTestNow)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != payment.KindRefund || ev.RefundID != tt.want || ev.RefundFen != 300 || !ev.RefundIsTotal {
				t.Errorf("%s %q %d total=%v, want refund %q of the total 300", ev.Kind, ev.RefundID, ev.RefundFen, ev.RefundIsTotal, tt.want)
			}
		})
	}
}

// Stripe sends checkout.session.completed and payment_intent.succeeded for one Checkout payment,
// in either order: both must name the same channel transaction, so that one is applied and the
// other is a repeat, while their event ids keep both in the journal.
func TestStripeSessionAndPaymentIntentAreOnePayment(t *testing.T) {
	s := newTestStripe(t)
	sessionBody := stripeEnvelope("checkout.session.completed", stripeSessionObject(), kv{"id", `"evt_1Session"`})
	piBody := stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject(), kv{"id", `"evt_1PaymentIntent"`})
	var events []payment.Event
	for _, body := range []string{sessionBody, piBody} {
		ev, err := s.Verify([]byte(body), stripeHeader(stripeSign(body, stripeTestSecret, stripeTestNow)), stripeTestNow)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	a, b := events[0], events[1]
	if a.ChannelTxnID != b.ChannelTxnID || a.Kind != payment.KindPaid || b.Kind != payment.KindPaid ||
		a.TradeNo != b.TradeNo || a.AmountFen != b.AmountFen || a.Currency != b.Currency {
		t.Errorf("not one payment:\n%+v\n%+v", a, b)
	}
	if a.NotifyID == b.NotifyID {
		t.Errorf("both events have notify id %q", a.NotifyID)
	}
}

func TestStripeReply(t *testing.T) {
	s := newTestStripe(t)
	tests := map[string]struct {
		reply payment.Reply
		want  channels.Response
	}{
		"success": {payment.ReplySuccess, channels.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"received":true}`)}},
		"refuse":  {payment.ReplyRefuse, channels.Response{Status: 400, ContentType: "application/json", Body: []byte(`{"error":"notification refused"}`)}},
		"retry":   {payment.ReplyRetry, channels.Response{Status: 500, ContentType: "application/json", Body: []byte(`{"error":"temporarily unavailable, retry"}`)}},
		"unknown": {payment.Reply(99), channels.Response{Status: 500, ContentType: "application/json", Body: []byte(`{"error":"temporarily unavailable, retry"}`)}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := s.Reply(tt.reply); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Reply = %d %s %q, want %d %s %q", got.Status, got.ContentType, got.Body, tt.want.Status, tt.want.ContentType, tt.want.Body)
			}
		})
	}
}

func TestNewStripe(t *testing.T) {
	tests := map[string]struct {
		secrets   []string
		tolerance time.Duration
		wantKey   string // "" = valid
	}{
		"one secret":          {secrets: []string{stripeTestSecret}, tolerance: stripeTolerance},
		"two secrets":         {secrets: []string{stripeNewSecret, stripeTestSecret}, tolerance: time.Second},
		"no secrets":          {secrets: nil, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets"},
		"empty list":          {secrets: []string{}, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets"},
		"API key, not secret": {secrets: []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc"}, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets[0]"},
		"second bad":          {secrets: []string{stripeTestSecret, "whsec"}, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets[1]"},
		"prefix only":         {secrets: []string{"whsec_"}, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets[0]"},
		"empty secret":        {secrets: []string{""}, tolerance: stripeTolerance, wantKey: "channels.stripe.webhook_secrets[0]"},
		"zero tolerance":      {secrets: []string{stripeTestSecret}, tolerance: 0, wantKey: "channels.stripe.tolerance"},
		"negative tolerance":  {secrets: []string{stripeTestSecret}, tolerance: -time.Second, wantKey: "channels.stripe.tolerance"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := New(tt.secrets, tt.tolerance)
			if tt.wantKey == "" {
				if err != nil || s == nil {
					t.Fatalf("NewStripe = %v, %v", s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("NewStripe error = %v, want one naming %s", err, tt.wantKey)
			}
			for _, secret := range tt.secrets {
				if len(secret) > 6 && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes a secret", err)
				}
			}
		})
	}

	// The verifier keeps its own copy: a caller reusing the slice changes nothing.
	secrets := []string{stripeTestSecret}
	s := newTestStripe(t, secrets...)
	secrets[0] = stripeOtherSecret
	body := stripeEnvelope("payment_intent.succeeded", stripePaymentIntentObject())
	if _, err := s.Verify([]byte(body), stripeHeader(stripeSign(body, stripeTestSecret, stripeTestNow)), stripeTestNow); err != nil {
		t.Errorf("Verify after the caller's slice changed: %v", err)
	}
}

func TestStripeName(t *testing.T) {
	if got := newTestStripe(t).Name(); got != "stripe" {
		t.Errorf("Name = %q", got)
	}
}

// A Refund object (refund.created, refund.updated, charge.refund.updated) states one refund's own
// amount under its re_ id: an item of the refund ledger, found by its payment_intent, with no
// trade_no needed. A refund that did not succeed moved no money, and one without a
// payment_intent cannot be tied to a payment of ours: both are acknowledged as other.
func TestStripeRefundObject(t *testing.T) {
	s := newTestStripe(t)
	object := func(edits ...kv) string {
		return jsonObject([]kv{
			{"id", `"re_3TestLkdIwHu7ix0Rf1"`}, {"object", `"refund"`}, {"amount", "300"}, {"currency", `"cny"`},
			{"charge", `"ch_3TestLkdIwHu7ix0Ut6oZ1c"`}, {"metadata", `{}`}, {"payment_intent", `"pi_3TestLkdIwHu7ix0Wb5Jx2L"`},
			{"status", `"succeeded"`},
		}, edits...)
	}
	tests := map[string]struct {
		typ    string
		object string
		want   payment.Kind
	}{
		"refund.created, succeeded":        {"refund.created", object(), payment.KindRefund},
		"refund.updated, succeeded":        {"refund.updated", object(), payment.KindRefund},
		"charge.refund.updated, succeeded": {"charge.refund.updated", object(), payment.KindRefund},
		"pending":                          {"refund.created", object(kv{"status", `"pending"`}), payment.KindOther},
		"failed":                           {"refund.updated", object(kv{"status", `"failed"`}), payment.KindOther},
		"no payment_intent":                {"refund.created", object(kv{"payment_intent", "null"}), payment.KindOther},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			body := stripeEnvelope(tt.typ, tt.object)
			ev, err := s.Verify([]byte(body), stripeHeader(stripeSign(body, stripeTestSecret, stripeTestNow)), stripeTestNow)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tt.want {
				t.Fatalf("kind %s, want %s", ev.Kind, tt.want)
			}
			if tt.want == payment.KindRefund && (ev.RefundID != "re_3TestLkdIwHu7ix0Rf1" || ev.RefundFen != 300 || ev.RefundIsTotal ||
				ev.ChannelTxnID != "pi_3TestLkdIwHu7ix0Wb5Jx2L" || ev.TradeNo != "" || ev.Currency != "CNY") {
				t.Errorf("refund %+v, want re_3TestLkdIwHu7ix0Rf1 of 300 CNY of pi_3TestLkdIwHu7ix0Wb5Jx2L", ev)
			}
		})
	}
}
