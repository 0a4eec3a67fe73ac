package stripe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// stripeQueryEnv is the fake channel over HTTP with fresh sandbox keys, and the gateway's Stripe
// configuration pointing at it.
type stripeQueryEnv struct {
	*channeltest.FakeEnv
	cfg      config.Stripe
	verifier *Channel
	signer   simulate.Signer
}

func newStripeQueryEnv(t *testing.T) *stripeQueryEnv {
	t.Helper()
	e := &stripeQueryEnv{FakeEnv: channeltest.NewFakeEnv(t, "stripe")}
	e.cfg = channeltest.LoadConfig(t, e.Man, "PAYGW_CHANNELS__STRIPE__API_BASE_URL="+e.Srv.URL).Channels.Stripe
	var err error
	if e.verifier, err = New(e.cfg.WebhookSecrets, e.cfg.Tolerance); err != nil {
		t.Fatal(err)
	}
	e.signer = channeltest.LoadSigners(t, e.Dir)["stripe"]
	return e
}

func (e *stripeQueryEnv) querier(t *testing.T) channels.Querier {
	t.Helper()
	q, err := NewQuerier(e.cfg, e.Srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// notified is what the verifier makes of the trade's own notification: the event a query's answer
// must match, so that the two apply once between them.
func (e *stripeQueryEnv) notified(t *testing.T, p simulate.Payment) payment.Event {
	t.Helper()
	return channeltest.SignVerified(t, e.signer, e.verifier, p, p.Time)
}

func TestStripeQuerierAgainstFake(t *testing.T) {
	e := newStripeQueryEnv(t)
	q := e.querier(t)

	paid := e.Add(t, simulate.FakeTrade{TradeNo: "T-paid-1", AmountFen: 1250, Currency: "USD", Status: simulate.FakePaid})
	refunded := e.Add(t, simulate.FakeTrade{TradeNo: "T-refunded-1", AmountFen: 1000, Status: simulate.FakeRefunded, RefundFen: 300})
	e.Add(t, simulate.FakeTrade{TradeNo: "T-pending-1", AmountFen: 500, Status: simulate.FakePending})
	closed := e.Add(t, simulate.FakeTrade{TradeNo: "T-closed-1", AmountFen: 700, Status: simulate.FakeClosed})
	paidNotice := e.notified(t, simulate.Payment{TradeNo: paid.TradeNo, AmountFen: paid.AmountFen, Currency: paid.Currency, TxnID: paid.TxnID, Time: paid.PaidAt})
	refundedNotice := e.notified(t, simulate.Payment{TradeNo: refunded.TradeNo, AmountFen: refunded.AmountFen, TxnID: refunded.TxnID, Time: refunded.PaidAt})
	refundNotice := e.notified(t, simulate.Payment{TradeNo: refunded.TradeNo, AmountFen: refunded.AmountFen, TxnID: refunded.TxnID,
		Time: refunded.PaidAt, Status: simulate.StatusRefund, RefundFen: refunded.RefundFen})

	tests := map[string]struct {
		q      channels.TradeQuery
		state  channels.TradeState
		events []payment.Event // compared by channeltest.SameAsNotified
		asked  int             // questions the fake counted for the trade
	}{
		"paid, by search":     {channels.TradeQuery{TradeNo: paid.TradeNo}, channels.TradePaid, []payment.Event{paidNotice}, 1},
		"paid, by id":         {channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: paid.TxnID}, channels.TradePaid, []payment.Event{paidNotice}, 1},
		"refunded, by search": {channels.TradeQuery{TradeNo: refunded.TradeNo}, channels.TradeRefunded, []payment.Event{refundedNotice, refundNotice}, 1},
		"refunded, by id":     {channels.TradeQuery{TradeNo: refunded.TradeNo, ChannelRef: refunded.TxnID}, channels.TradeRefunded, []payment.Event{refundedNotice, refundNotice}, 1},
		"pending":             {channels.TradeQuery{TradeNo: "T-pending-1"}, channels.TradeNotPaid, nil, 1},
		"not found":           {channels.TradeQuery{TradeNo: "T-unknown-1"}, channels.TradeNotPaid, nil, 1},
		// The search lags: "every PaymentIntent found is canceled" proves no close.
		"canceled, by search": {channels.TradeQuery{TradeNo: closed.TradeNo}, channels.TradeNotPaid, nil, 1},
		// A canceled PaymentIntent is not the whole trade: the search is asked too.
		"closed, by id": {channels.TradeQuery{TradeNo: closed.TradeNo, ChannelRef: closed.TxnID}, channels.TradeClosed, nil, 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, n := e.Ask(t, q, tt.q)
			if got.State != tt.state {
				t.Fatalf("state %s (%s), want %s", got.State, got.Status, tt.state)
			}
			if n != tt.asked {
				t.Errorf("the fake was asked %d times, want %d", n, tt.asked)
			}
			if tt.state == channels.TradeClosed {
				if len(got.Events) != 1 || got.Events[0].Kind != payment.KindClosed || got.Events[0].NotifyID != "query:close:"+tt.q.ChannelRef ||
					got.Events[0].TradeNo != tt.q.TradeNo || got.Events[0].ChannelTxnID != closed.TxnID {
					t.Fatalf("events %+v, want one close of %s", got.Events, tt.q.TradeNo)
				}
				return
			}
			if len(got.Events) != len(tt.events) {
				t.Fatalf("%d events %+v, want %d", len(got.Events), got.Events, len(tt.events))
			}
			for i, ev := range got.Events {
				channeltest.SameAsNotified(t, ev, tt.events[i])
				if len(ev.Raw) == 0 {
					t.Errorf("event %d: Raw empty", i)
				}
			}
			if len(got.Events) > 0 && got.Events[0].NotifyID != channels.QueryNotifyID(got.Events[0].ChannelTxnID) {
				t.Errorf("payment NotifyID %q, want %q", got.Events[0].NotifyID, channels.QueryNotifyID(got.Events[0].ChannelTxnID))
			}
			if len(got.Events) == 2 && (got.Events[1].NotifyID != "query:refund:"+refunded.TxnID+":300" ||
				got.Events[1].RefundID != "" || !got.Events[1].RefundIsTotal) {
				t.Errorf("refund NotifyID %q RefundID %q, want query:refund:<pi>:300 and a running total naming no refund",
					got.Events[1].NotifyID, got.Events[1].RefundID)
			}
		})
	}
}

func TestStripeQuerierFailures(t *testing.T) {
	e := newStripeQueryEnv(t)
	q := e.querier(t)
	ctx := context.Background()
	paid := e.Add(t, simulate.FakeTrade{TradeNo: "T-paid-2", AmountFen: 100, Status: simulate.FakePaid})
	other := e.Add(t, simulate.FakeTrade{TradeNo: "T-other-2", AmountFen: 100, Status: simulate.FakePaid})

	t.Run("server error", func(t *testing.T) {
		e.Fake.Break("stripe", true)
		defer e.Fake.Break("stripe", false)
		for _, tq := range []channels.TradeQuery{{TradeNo: paid.TradeNo}, {TradeNo: paid.TradeNo, ChannelRef: paid.TxnID}} {
			if _, err := q.QueryTrade(ctx, tq); !errors.Is(err, channels.ErrQueryFailed) || !strings.Contains(err.Error(), "HTTP 500") {
				t.Errorf("%+v: %v, want ErrQueryFailed with HTTP 500", tq, err)
			}
		}
	})
	t.Run("no such PaymentIntent", func(t *testing.T) {
		_, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: "pi_doesnotexist"})
		if !errors.Is(err, channels.ErrQueryFailed) || !strings.Contains(err.Error(), "resource_missing") {
			t.Errorf("%v, want ErrQueryFailed naming resource_missing", err)
		}
	})
	t.Run("another trade's PaymentIntent", func(t *testing.T) {
		_, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: other.TxnID})
		if !errors.Is(err, channels.ErrMalformed) || !strings.Contains(err.Error(), "metadata.trade_no") {
			t.Errorf("%v, want ErrMalformed for metadata.trade_no", err)
		}
	})
	t.Run("channel_ref not a PaymentIntent", func(t *testing.T) {
		for _, ref := range []string{"ch_123", "pi_", "pi_a/../b", "pi_" + strings.Repeat("a", channels.MaxChannelTxnID)} {
			if _, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: ref}); !errors.Is(err, channels.ErrQueryFailed) {
				t.Errorf("%q: %v, want ErrQueryFailed", ref, err)
			}
		}
	})
	t.Run("trade_no not ours", func(t *testing.T) {
		if _, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T'1"}); !errors.Is(err, channels.ErrQueryFailed) {
			t.Errorf("%v, want ErrQueryFailed", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		c := e.cfg
		c.APIKey = "sk_test_wrongwrongwrong"
		wrong, err := NewQuerier(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = wrong.QueryTrade(ctx, channels.TradeQuery{TradeNo: paid.TradeNo})
		if !errors.Is(err, channels.ErrQueryFailed) || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("%v, want ErrQueryFailed with HTTP 401", err)
		}
		if err != nil && (strings.Contains(err.Error(), "wrongwrong") || strings.Contains(err.Error(), e.cfg.APIKey)) {
			t.Errorf("error %q carries an API key", err)
		}
	})
	t.Run("transport", func(t *testing.T) {
		c := e.cfg
		c.APIBaseURL = channeltest.ClosedURL(t)
		down, err := NewQuerier(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		channeltest.WantUnreachable(t, down, channels.TradeQuery{TradeNo: paid.TradeNo})
	})
	t.Run("context canceled", func(t *testing.T) {
		channeltest.WantCanceled(t, q, channels.TradeQuery{TradeNo: paid.TradeNo})
	})
}

// stripeCannedServer answers every search and retrieve with the given status and body.
func stripeCannedServer(t *testing.T, answers map[string]struct {
	status int
	body   string
}) channels.Querier {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	q, err := NewQuerier(config.Stripe{APIKey: "sk_test_canned", APIBaseURL: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func stripeIntentJSON(id, tradeNo, status string, received, created int64, charge string) string {
	if charge == "" {
		charge = "null"
	}
	return `{"id":"` + id + `","object":"payment_intent","amount":1000,"amount_received":` + strconv.FormatInt(received, 10) +
		`,"created":` + strconv.FormatInt(created, 10) + `,"currency":"eur","metadata":{"trade_no":"` + tradeNo + `"},"status":"` + status +
		`","latest_charge":` + charge + `}`
}

func stripeSearchJSON(intents ...string) string {
	return `{"object":"search_result","url":"/v1/payment_intents/search","has_more":false,"next_page":null,"data":[` +
		strings.Join(intents, ",") + `]}`
}

func TestStripeQuerierAnswers(t *testing.T) {
	type answer = struct {
		status int
		body   string
	}
	const search, retrieve = "/v1/payment_intents/search", "/v1/payment_intents/pi_A"
	ctx := context.Background()

	// afterCancel asks about T1 by pi_A, which Stripe retrieves canceled, while its search also
	// finds pi_B in status other with amount_received received.
	afterCancel := func(t *testing.T, other string, received int64) channels.TradeAnswer {
		t.Helper()
		q := stripeCannedServer(t, map[string]answer{
			retrieve: {200, stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, "")},
			search: {200, stripeSearchJSON(
				stripeIntentJSON("pi_B", "T1", other, received, 200, ""),
				stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, ""),
			)},
		})
		got, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1", ChannelRef: "pi_A"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("two succeeded intents: both payments, oldest first", func(t *testing.T) {
		q := stripeCannedServer(t, map[string]answer{search: {200, stripeSearchJSON(
			stripeIntentJSON("pi_B", "T1", "succeeded", 1000, 200, ""),
			stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, ""),
		)}})
		got, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1"})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != channels.TradePaid || len(got.Events) != 2 || got.Events[0].ChannelTxnID != "pi_A" || got.Events[1].ChannelTxnID != "pi_B" ||
			got.Events[0].Kind != payment.KindPaid || got.Events[1].Kind != payment.KindPaid {
			t.Fatalf("%+v, want two payments pi_A then pi_B", got)
		}
		if got.Events[0].Currency != "EUR" || got.Events[0].AmountFen != 1000 || !got.Events[0].PaidAt.Equal(time.Unix(100, 0)) {
			t.Errorf("payment %+v, want EUR 1000 at 100", channeltest.EventNoRaw(got.Events[0]))
		}
	})
	t.Run("retrieved canceled, search finds a payment", func(t *testing.T) {
		got := afterCancel(t, "succeeded", 1000)
		if got.State != channels.TradePaid || len(got.Events) != 1 || got.Events[0].ChannelTxnID != "pi_B" {
			t.Fatalf("%+v, want the payment of pi_B", got)
		}
	})
	t.Run("canceled and open: not paid, not closed", func(t *testing.T) {
		q := stripeCannedServer(t, map[string]answer{search: {200, stripeSearchJSON(
			stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, ""),
			stripeIntentJSON("pi_B", "T1", "requires_payment_method", 0, 200, ""),
		)}})
		got, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1"})
		if err != nil || got.State != channels.TradeNotPaid || len(got.Events) != 0 {
			t.Fatalf("%+v, %v; want not paid, no events", got, err)
		}
	})
	// Issue 20, case 3: the search lags, so it never proves a close; a close names the
	// PaymentIntent retrieved by id, and only that one.
	t.Run("search alone finds only canceled: not closed", func(t *testing.T) {
		q := stripeCannedServer(t, map[string]answer{search: {200, stripeSearchJSON(
			stripeIntentJSON("pi_A", "T1", "canceled", 0, 100, ""),
			stripeIntentJSON("pi_B", "T1", "canceled", 0, 200, ""),
		)}})
		got, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1"})
		if err != nil || got.State != channels.TradeNotPaid || len(got.Events) != 0 || !strings.Contains(got.Status, "search") {
			t.Fatalf("%+v, %v; want not paid, no events, a status naming the search", got, err)
		}
	})
	t.Run("retrieved canceled, search finds another canceled: the retrieved one closes", func(t *testing.T) {
		got := afterCancel(t, "canceled", 0)
		if got.State != channels.TradeClosed || len(got.Events) != 1 || got.Events[0].Kind != payment.KindClosed ||
			got.Events[0].ChannelTxnID != "pi_A" || got.Events[0].NotifyID != "query:close:pi_A" {
			t.Fatalf("%+v, want one close of pi_A", got)
		}
	})
	t.Run("retrieved canceled, search finds one open: not closed", func(t *testing.T) {
		if got := afterCancel(t, "processing", 0); got.State != channels.TradeNotPaid || len(got.Events) != 0 {
			t.Fatalf("%+v; want not paid, no events", got)
		}
	})
	t.Run("full refund on the latest charge", func(t *testing.T) {
		charge := `{"id":"ch_A","object":"charge","amount_refunded":1000,"refunded":true,"payment_intent":"pi_A"}`
		q := stripeCannedServer(t, map[string]answer{retrieve: {200, stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, charge)}})
		got, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1", ChannelRef: "pi_A"})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != channels.TradeRefunded || len(got.Events) != 2 || got.Events[1].Kind != payment.KindRefund ||
			got.Events[1].RefundFen != 1000 || !got.Events[1].RefundIsTotal || got.Events[1].Status != "refunded" {
			t.Fatalf("%+v, want the payment then a refund of the total 1000", got)
		}
	})
	t.Run("a charge of another PaymentIntent", func(t *testing.T) {
		charge := `{"id":"ch_A","object":"charge","amount_refunded":10,"payment_intent":"pi_Z"}`
		q := stripeCannedServer(t, map[string]answer{retrieve: {200, stripeIntentJSON("pi_A", "T1", "succeeded", 1000, 100, charge)}})
		if _, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1", ChannelRef: "pi_A"}); !errors.Is(err, channels.ErrMalformed) {
			t.Fatalf("%v, want ErrMalformed", err)
		}
	})

	failures := map[string]struct {
		answer answer
		want   error
	}{
		"2xx not JSON":          {answer{200, `{"object":"search_result","data":[`}, channels.ErrMalformed},
		"2xx wrong shape":       {answer{200, `{"object":"search_result","data":{"id":"pi_A"}}`}, channels.ErrMalformed},
		"amount not an integer": {answer{200, stripeSearchJSON(strings.Replace(stripeIntentJSON("pi_A", "T1", "succeeded", 1, 1, ""), `"amount_received":1`, `"amount_received":1.5`, 1))}, channels.ErrMalformed},
		"unknown status":        {answer{200, stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "exploded", 0, 1, ""))}, channels.ErrMalformed},
		"negative amount":       {answer{200, stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "succeeded", -5, 1, ""))}, channels.ErrMalformed},
		"another trade":         {answer{200, stripeSearchJSON(stripeIntentJSON("pi_A", "T2", "succeeded", 1, 1, ""))}, channels.ErrMalformed},
		"not a pi_ id":          {answer{200, stripeSearchJSON(stripeIntentJSON("ch_A", "T1", "succeeded", 1, 1, ""))}, channels.ErrMalformed},
		"null intent":           {answer{200, stripeSearchJSON("null")}, channels.ErrMalformed},
		"too large":             {answer{200, stripeSearchJSON(stripeIntentJSON("pi_A", "T1", "succeeded", 1, 1, "")) + strings.Repeat(" ", stripeMaxResponse)}, channels.ErrMalformed},
		"proxy error page":      {answer{502, `<html>Bad Gateway</html>`}, channels.ErrQueryFailed},
		"rate limited":          {answer{429, `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests"}}`}, channels.ErrQueryFailed},
	}
	for name, tt := range failures {
		t.Run(name, func(t *testing.T) {
			q := stripeCannedServer(t, map[string]answer{search: tt.answer})
			if _, err := q.QueryTrade(ctx, channels.TradeQuery{TradeNo: "T1"}); !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewStripeQuerier(t *testing.T) {
	base := config.Stripe{APIKey: "sk_test_abcdefghijklmnop", APIBaseURL: "https://api.stripe.com"}
	if _, err := NewQuerier(base, nil); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	missing := base
	missing.APIKey = ""
	if _, err := NewQuerier(missing, nil); !errors.Is(err, channels.ErrNoCredentials) || !strings.Contains(err.Error(), "channels.stripe.api_key") {
		t.Errorf("no api_key: %v, want ErrNoCredentials naming channels.stripe.api_key", err)
	}
	publishable := base
	publishable.APIKey = "pk_test_abcdefghijklmnop"
	if _, err := NewQuerier(publishable, nil); err == nil || errors.Is(err, channels.ErrNoCredentials) || strings.Contains(err.Error(), publishable.APIKey) {
		t.Errorf("pk_ key: %v, want a refusal that does not quote the key", err)
	}
	badURL := base
	badURL.APIBaseURL = "api.stripe.com"
	if _, err := NewQuerier(badURL, nil); err == nil || !strings.Contains(err.Error(), "channels.stripe.api_base_url") {
		t.Errorf("bad URL: %v, want an error naming channels.stripe.api_base_url", err)
	}
}

func TestStripeSearchQuery(t *testing.T) {
	tests := map[string]string{
		"T-1_a":   `metadata['trade_no']:'T-1_a'`,
		`it's`:    `metadata['trade_no']:'it\'s'`,
		`back\'s`: `metadata['trade_no']:'back\\\'s'`,
	}
	for in, want := range tests {
		if got := stripeSearchQuery(in); got != want {
			t.Errorf("stripeSearchQuery(%q) = %s, want %s", in, got, want)
		}
	}
}
