package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/webhook"
)

// The spec's published test vector (standard-webhooks libraries' TestWebhookSign, and Svix's
// documentation): this secret, id, time and body sign to this signature.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix      = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheSpecVector(t *testing.T) {
	got := webhook.Sign(vectorID, time.Unix(vectorUnix, 0), []byte(vectorBody), webhook.MustParseSecret(vectorSecret))
	if got != vectorSignature {
		t.Fatalf("Sign = %s, want %s", got, vectorSignature)
	}
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", strconv.Itoa(vectorUnix))
	h.Set("webhook-signature", vectorSignature)
	if err := webhook.Verify([]byte(vectorBody), h, []string{vectorSecret}, time.Unix(vectorUnix+60, 0)); err != nil {
		t.Fatalf("Verify of the vector: %v", err)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a, b, other := testenv.WebhookSecret(t), testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	body := []byte(`{"id":"evt_1","type":"order.paid"}`)
	signed := func(ts time.Time, secrets ...string) http.Header {
		ps := make([]webhook.Secret, len(secrets))
		for i, s := range secrets {
			ps[i] = webhook.MustParseSecret(s)
		}
		return webhook.Headers("evt_1", ts, body, ps...)
	}
	with := func(h http.Header, key, value string) http.Header {
		h = h.Clone()
		h.Set(key, value)
		return h
	}
	good := signed(now, a)
	cases := map[string]struct {
		body    []byte
		header  http.Header
		secrets []string
		want    error
	}{
		"signed":                  {body, good, []string{a}, nil},
		"second secret matches":   {body, good, []string{other, a}, nil},
		"rotation: new and old":   {body, signed(now, b, a), []string{a}, nil},
		"rotation: old receiver":  {body, signed(now, b, a), []string{b}, nil},
		"4m59s old":               {body, signed(now.Add(-webhook.Tolerance+time.Second), a), []string{a}, nil},
		"signed with no secret":   {body, with(good, "webhook-signature", " "), []string{a}, webhook.ErrNoMatchingSignature},
		"5m old is in":            {body, signed(now.Add(-webhook.Tolerance), a), []string{a}, nil},
		"5m1s old":                {body, signed(now.Add(-webhook.Tolerance-time.Second), a), []string{a}, webhook.ErrTooOld},
		"5m ahead is in":          {body, signed(now.Add(webhook.Tolerance), a), []string{a}, nil},
		"5m1s ahead":              {body, signed(now.Add(webhook.Tolerance+time.Second), a), []string{a}, webhook.ErrTooNew},
		"other secret":            {body, good, []string{other}, webhook.ErrNoMatchingSignature},
		"body changed":            {[]byte(`{"id":"evt_1","type":"order.paid" }`), good, []string{a}, webhook.ErrNoMatchingSignature},
		"id changed":              {body, with(good, "webhook-id", "evt_2"), []string{a}, webhook.ErrNoMatchingSignature},
		"timestamp changed":       {body, with(good, "webhook-timestamp", strconv.FormatInt(now.Unix()+1, 10)), []string{a}, webhook.ErrNoMatchingSignature},
		"v2 scheme only":          {body, with(good, "webhook-signature", strings.Replace(good.Get("webhook-signature"), "v1,", "v2,", 1)), []string{a}, webhook.ErrNoMatchingSignature},
		"junk before the good":    {body, with(good, "webhook-signature", ",,, v1,not-base64  v1a,xyz "+good.Get("webhook-signature")), []string{a}, nil},
		"truncated signature":     {body, with(good, "webhook-signature", good.Get("webhook-signature")[:20]), []string{a}, webhook.ErrNoMatchingSignature},
		"no id":                   {body, with(good, "webhook-id", ""), []string{a}, webhook.ErrMissingHeaders},
		"no timestamp":            {body, with(good, "webhook-timestamp", ""), []string{a}, webhook.ErrMissingHeaders},
		"no signature":            {body, with(good, "webhook-signature", ""), []string{a}, webhook.ErrMissingHeaders},
		"id with a dot":           {body, with(good, "webhook-id", "evt.1"), []string{a}, webhook.ErrBadID},
		"id too long":             {body, with(good, "webhook-id", strings.Repeat("e", webhook.MaxIDLen+1)), []string{a}, webhook.ErrBadID},
		"timestamp in ms":         {body, with(good, "webhook-timestamp", strconv.FormatInt(now.UnixMilli(), 10)), []string{a}, webhook.ErrBadTimestamp},
		"timestamp with sign":     {body, with(good, "webhook-timestamp", "+"+strconv.FormatInt(now.Unix(), 10)), []string{a}, webhook.ErrBadTimestamp},
		"timestamp with fraction": {body, with(good, "webhook-timestamp", strconv.FormatInt(now.Unix(), 10)+".5"), []string{a}, webhook.ErrBadTimestamp},
		"timestamp leading zero":  {body, with(good, "webhook-timestamp", "0"+strconv.FormatInt(now.Unix(), 10)), []string{a}, webhook.ErrBadTimestamp},
		"timestamp RFC 3339":      {body, with(good, "webhook-timestamp", now.UTC().Format(time.RFC3339)), []string{a}, webhook.ErrBadTimestamp},
		"no secrets":              {body, good, nil, webhook.ErrBadSecret},
		"a malformed secret":      {body, good, []string{a, "whsec_short"}, webhook.ErrBadSecret},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := webhook.Verify(c.body, c.header, c.secrets, now)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	cases := map[string]struct {
		in string
		ok bool
	}{
		"the vector's 24 bytes": {vectorSecret, true},
		"32 bytes":              {"whsec_" + strings.Repeat("A", 43) + "=", true},
		"64 bytes":              {"whsec_" + strings.Repeat("A", 86) + "==", true},
		"65 bytes":              {"whsec_" + strings.Repeat("A", 87) + "=", false},
		"18 bytes":              {"whsec_" + strings.Repeat("A", 24), false},
		"no prefix":             {strings.TrimPrefix(vectorSecret, "whsec_"), false},
		"whsk_ prefix":          {"whsk_" + strings.TrimPrefix(vectorSecret, "whsec_"), false},
		"not base64":            {"whsec_" + strings.Repeat("!", 32), false},
		"unpadded":              {"whsec_" + strings.Repeat("A", 43), false},
		"url base64":            {"whsec_" + strings.Repeat("_", 32), false},
		"trailing newline":      {vectorSecret + "\n", false},
		"empty":                 {"", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.ParseSecret(c.in)
			if (err == nil) != c.ok {
				t.Fatalf("ParseSecret = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, webhook.ErrBadSecret) {
				t.Fatalf("error %v does not wrap ErrBadSecret", err)
			}
			if err != nil && len(c.in) > 8 && strings.Contains(err.Error(), c.in[6:]) {
				t.Fatalf("error %q quotes the secret", err)
			}
		})
	}
}

func TestSecretPrintsMasked(t *testing.T) {
	s := testenv.WebhookSecret(t)
	p := webhook.MustParseSecret(s)
	enc := strings.TrimPrefix(s, "whsec_")
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := sprintf(f, p); strings.Contains(out, enc[:8]) || strings.Contains(out, "whsec_"+enc[:4]) {
			t.Fatalf("%s prints %q", f, out)
		}
	}
}

// TestCrossCheckStandardWebhooks checks this package against the official Standard Webhooks Go
// library, both ways: each verifies what the other signs, with one secret and during a rotation.
func TestCrossCheckStandardWebhooks(t *testing.T) {
	newer, older := testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	body := []byte(`{"id":"evt_x","type":"order.refunded","data":{"trade_no":"T1","refund_fen":500}}`)
	id, now := "evt_x", time.Now()

	theirs := func(secret string) *standardwebhooks.Webhook {
		w, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// Ours signs, theirs verifies (with either secret of the rotation).
	h := webhook.Headers(id, now, body, webhook.MustParseSecret(newer), webhook.MustParseSecret(older))
	for _, s := range []string{newer, older} {
		if err := theirs(s).Verify(body, h); err != nil {
			t.Fatalf("their Verify of our rotation signature: %v", err)
		}
	}
	if err := theirs(testenv.WebhookSecret(t)).Verify(body, h); err == nil {
		t.Fatal("their Verify accepted our signature under a third secret")
	}
	one := webhook.Headers(id, now, body, webhook.MustParseSecret(newer))
	if err := theirs(newer).Verify(body, one); err != nil {
		t.Fatalf("their Verify of our signature: %v", err)
	}

	// Theirs signs, ours verifies; two of their signatures joined as a sender does in a rotation.
	s1, err := theirs(newer).Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := theirs(older).Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := webhook.Sign(id, now, body, webhook.MustParseSecret(newer)); s1 != want {
		t.Fatalf("signatures differ: theirs %s, ours %s", s1, want)
	}
	for _, c := range []struct {
		sig     string
		secrets []string
		ok      bool
	}{
		{s1, []string{newer}, true},
		{s1 + " " + s2, []string{older}, true},
		{s2 + " " + s1, []string{newer, older}, true},
		{s1, []string{older}, false},
	} {
		th := http.Header{}
		th.Set("webhook-id", id)
		th.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		th.Set("webhook-signature", c.sig)
		err := webhook.Verify(body, th, c.secrets, time.Now())
		if (err == nil) != c.ok {
			t.Fatalf("our Verify of their %d signature(s) with %d secret(s) = %v, want ok %v", len(strings.Fields(c.sig)), len(c.secrets), err, c.ok)
		}
	}
}
