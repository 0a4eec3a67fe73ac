package stripe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
)

// stripeCannedTransport answers every request with one status and body, without a network.
type stripeCannedTransport struct {
	status int
	body   []byte
}

func (t stripeCannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: t.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(t.body)), Request: r}, nil
}

// FuzzStripeQuery drives a whole query, stripe-go's decoding and paging included, over a body the
// fuzzer writes: a search page, or a PaymentIntent when retrieve is set.
func FuzzStripeQuery(f *testing.F) {
	charge := `{"id":"ch_A","object":"charge","amount_refunded":300,"refunded":false,"payment_intent":"pi_A"}`
	for _, seed := range []struct {
		body     string
		retrieve bool
		status   uint8
	}{
		{stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, "")), false, 0},
		{stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, charge)), false, 0},
		{stripeSearchJSON(stripeIntentJSON("pi_B", "T1", "succeeded", 1000, 200, ""), stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, "")), false, 0},
		{stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, ""), stripeIntentJSON("pi_B", "T1", "requires_action", 0, 100, "")), false, 0},
		{stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, "")), false, 0},
		{stripeSearchJSON(), false, 0},
		{`{"object":"search_result","data":[` + stripeIntentJSON("pi_A", "T1", "processing", 0, 1, "") + `],"has_more":true,"next_page":"p2"}`, false, 0},
		{stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, charge), true, 0},
		{stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, ""), true, 0},
		{`{"error":{"type":"api_error","message":"boom"}}`, false, 3},
		{`{"data":[null]}`, false, 0},
		{`<html>`, true, 1},
	} {
		f.Add([]byte(seed.body), seed.retrieve, seed.status)
	}
	statuses := []int{200, 502, 404, 500, 401, 429, 204, 301}

	f.Fuzz(func(t *testing.T, body []byte, retrieve bool, status uint8) {
		hc := &http.Client{Transport: stripeCannedTransport{status: statuses[int(status)%len(statuses)], body: body}}
		q, err := NewQuerier(config.Stripe{APIKey: "sk_test_fuzz", APIBaseURL: "http://stripe.invalid"}, hc)
		if err != nil {
			t.Fatal(err)
		}
		tq := channels.TradeQuery{TradeNo: "T1"}
		if retrieve {
			tq.ChannelRef = "pi_A"
		}
		answer, err := q.QueryTrade(context.Background(), tq)
		if err != nil {
			if !errors.Is(err, channels.ErrQueryFailed) && !errors.Is(err, channels.ErrMalformed) {
				t.Fatalf("error %v wraps neither ErrQueryFailed nor ErrMalformed", err)
			}
			return
		}
		channeltest.CheckAnswerInvariants(t, answer, "T1")
	})
}
