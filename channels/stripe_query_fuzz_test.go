package channels

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
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
		q, err := NewStripeQuerier(config.Stripe{APIKey: "sk_test_fuzz", APIBaseURL: "http://stripe.invalid"}, hc)
		if err != nil {
			t.Fatal(err)
		}
		tq := TradeQuery{TradeNo: "T1"}
		if retrieve {
			tq.ChannelRef = "pi_A"
		}
		answer, err := q.QueryTrade(context.Background(), tq)
		if err != nil {
			if !errors.Is(err, ErrQueryFailed) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps neither ErrQueryFailed nor ErrMalformed", err)
			}
			return
		}
		checkAnswerInvariants(t, answer, "T1")
	})
}

// checkAnswerInvariants holds what every answer must: events for its state only, each about the trade
// asked, a refund right after the payment it undoes.
func checkAnswerInvariants(t *testing.T, a TradeAnswer, tradeNo string) {
	t.Helper()
	for i, ev := range a.Events {
		if _, err := checkEvent(ev); err != nil || ev.TradeNo != tradeNo {
			t.Fatalf("event %d %+v: %v (trade %q)", i, eventNoRaw(ev), err, tradeNo)
		}
		if ev.AmountFen < 0 || ev.AmountFen > maxFen || ev.RefundFen < 0 || ev.RefundFen > maxFen {
			t.Fatalf("event %d: amount out of range %+v", i, eventNoRaw(ev))
		}
	}
	kinds := func() (paid, refunds, closes int) {
		for i, ev := range a.Events {
			switch ev.Kind {
			case payment.KindPaid:
				paid++
				if ev.NotifyID != QueryNotifyID(ev.ChannelTxnID) {
					t.Fatalf("payment NotifyID %q", ev.NotifyID)
				}
			case payment.KindRefund:
				refunds++
				if i == 0 || a.Events[i-1].Kind != payment.KindPaid || a.Events[i-1].ChannelTxnID != ev.ChannelTxnID || !ev.RefundIsTotal {
					t.Fatalf("refund %d does not follow its payment: %+v", i, a.Events)
				}
			case payment.KindClosed:
				closes++
				// Stripe closes one PaymentIntent (retrieved by id), the others the trade.
				if ev.NotifyID != "query:close:"+tradeNo && !(ev.Channel == "stripe" && ev.NotifyID == "query:close:"+ev.ChannelTxnID) {
					t.Fatalf("close NotifyID %q", ev.NotifyID)
				}
			default:
				t.Fatalf("event %d of kind %s", i, ev.Kind)
			}
		}
		return
	}
	paid, refunds, closes := kinds()
	ok := false
	switch a.State {
	case TradeNotPaid:
		ok = len(a.Events) == 0
	case TradePaid:
		ok = paid > 0 && refunds == 0 && closes == 0
	case TradeRefunded:
		ok = paid > 0 && refunds > 0 && closes == 0
	case TradeClosed:
		ok = len(a.Events) == 1 && closes == 1
	}
	if !ok {
		t.Fatalf("state %s with %d payments, %d refunds, %d closes", a.State, paid, refunds, closes)
	}
}
