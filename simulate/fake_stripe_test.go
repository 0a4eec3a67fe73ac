package simulate

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// newFakeOverHTTP is a fake on fresh sandbox keys, served over HTTP.
func newFakeOverHTTP(t *testing.T) (*Fake, *httptest.Server, Manifest) {
	t.Helper()
	dir := t.TempDir()
	man, err := WriteKeys(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFake(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	return f, srv, man
}

func TestFakeStripeAPI(t *testing.T) {
	f, srv, man := newFakeOverHTTP(t)
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tr := range []FakeTrade{
		{Channel: "stripe", TradeNo: "T-paid", AmountFen: 1250, Currency: "USD", Status: FakePaid, PaidAt: at},
		{Channel: "stripe", TradeNo: "T-refunded", AmountFen: 1000, Status: FakeRefunded, RefundFen: 300, PaidAt: at},
		{Channel: "stripe", TradeNo: "T-closed", AmountFen: 700, Status: FakeClosed, PaidAt: at, TxnID: "custom"},
		{Channel: "stripe", TradeNo: "T-pending", AmountFen: 500, Status: FakePending, PaidAt: at},
	} {
		if _, err := f.Add(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
	}
	get := func(t *testing.T, key, path string, query url.Values) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path+"?"+query.Encode(), nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := srv.Client().Do(req)
		body := readAll(t, resp, err)
		return resp.StatusCode, body
	}
	search := func(tradeNo string) url.Values {
		return url.Values{"query": {"metadata['trade_no']:'" + tradeNo + "'"}, "expand[0]": {"data.latest_charge"}}
	}
	key := man.Stripe.APIKey

	t.Run("search", func(t *testing.T) {
		before := f.Asked("stripe", "T-refunded")
		status, body := get(t, key, "/v1/payment_intents/search", search("T-refunded"))
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		var page struct {
			Object  string                  `json:"object"`
			HasMore bool                    `json:"has_more"`
			Data    []*stripe.PaymentIntent `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Object != "search_result" || page.HasMore || len(page.Data) != 1 {
			t.Fatalf("page %s", body)
		}
		pi := page.Data[0]
		if !strings.HasPrefix(pi.ID, "pi_") || pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 1000 ||
			pi.Currency != "cny" || pi.Metadata["trade_no"] != "T-refunded" || pi.Created != at.Unix() ||
			pi.LatestCharge == nil || pi.LatestCharge.AmountRefunded != 300 || pi.LatestCharge.Refunded {
			t.Errorf("PaymentIntent %s", body)
		}
		if n := f.Asked("stripe", "T-refunded") - before; n != 1 {
			t.Errorf("asked %d times, want 1", n)
		}
		status, body = get(t, key, "/v1/payment_intents/search", search("T-none"))
		if status != http.StatusOK || !strings.Contains(string(body), `"data":[]`) {
			t.Errorf("unknown trade: HTTP %d %s, want an empty search_result", status, body)
		}
	})
	t.Run("retrieve", func(t *testing.T) {
		for tradeNo, want := range map[string]struct {
			id     string
			status stripe.PaymentIntentStatus
		}{
			"T-closed":  {"pi_custom", stripe.PaymentIntentStatusCanceled},
			"T-pending": {"", stripe.PaymentIntentStatusProcessing},
			"T-paid":    {"", stripe.PaymentIntentStatusSucceeded},
		} {
			id := want.id
			if id == "" {
				id = stripeIntentID(FakeTrade{TxnID: Payment{TradeNo: tradeNo}.normalized("stripe").TxnID})
			}
			status, body := get(t, key, "/v1/payment_intents/"+id, nil)
			var pi stripe.PaymentIntent
			if status != http.StatusOK || json.Unmarshal(body, &pi) != nil {
				t.Fatalf("%s: HTTP %d %s", tradeNo, status, body)
			}
			if pi.ID != id || pi.Status != want.status || pi.Metadata["trade_no"] != tradeNo {
				t.Errorf("%s: %s", tradeNo, body)
			}
			// Not expanded: the charge's id, or null when there is none.
			if pi.Status == stripe.PaymentIntentStatusSucceeded && (pi.LatestCharge == nil || pi.LatestCharge.ID == "" || pi.LatestCharge.Object != "") {
				t.Errorf("%s: latest_charge %+v, want its id only", tradeNo, pi.LatestCharge)
			}
		}
		status, body := get(t, key, "/v1/payment_intents/pi_nothere", nil)
		if status != http.StatusNotFound || !strings.Contains(string(body), "resource_missing") {
			t.Errorf("unknown id: HTTP %d %s", status, body)
		}
	})
	t.Run("authentication", func(t *testing.T) {
		for _, k := range []string{"", "sk_test_wrong", key + "x"} {
			status, body := get(t, k, "/v1/payment_intents/search", search("T-paid"))
			if status != http.StatusUnauthorized || strings.Contains(string(body), key) {
				t.Errorf("key %q: HTTP %d %s, want 401 without the key", k, status, body)
			}
		}
	})
	t.Run("a query it does not understand", func(t *testing.T) {
		for _, q := range []string{"status:'succeeded'", "metadata['trade_no']:'T-paid", "metadata['trade_no']:''", "metadata['trade_no']:'a'b'"} {
			if status, body := get(t, key, "/v1/payment_intents/search", url.Values{"query": {q}}); status != http.StatusBadRequest {
				t.Errorf("%q: HTTP %d %s, want 400", q, status, body)
			}
		}
	})
	t.Run("broken", func(t *testing.T) {
		f.Break("stripe", true)
		status, body := get(t, key, "/v1/payment_intents/search", search("T-paid"))
		if status != http.StatusInternalServerError || !strings.Contains(string(body), "api_error") {
			t.Errorf("broken: HTTP %d %s, want 500 api_error", status, body)
		}
		f.Break("stripe", false)
		if status, body := get(t, key, "/v1/payment_intents/search", search("T-paid")); status != http.StatusOK {
			t.Errorf("mended: HTTP %d %s", status, body)
		}
	})
}

func TestStripeTradeNoQuery(t *testing.T) {
	tests := map[string]struct {
		want string
		ok   bool
	}{
		`metadata['trade_no']:'T-1_a'`:   {"T-1_a", true},
		`metadata['trade_no']:'it\'s'`:   {"it's", true},
		`metadata['trade_no']:'a\\b'`:    {`a\b`, true},
		`metadata['trade_no']:''`:        {"", false},
		`metadata['trade_no']:'a'b'`:     {"", false},
		`metadata['trade_no']:'a\'`:      {"", false},
		`metadata["trade_no"]:"T1"`:      {"", false},
		`metadata['trade_no']:'T1' OR 1`: {"", false},
	}
	for q, tt := range tests {
		got, ok := stripeTradeNoQuery(q)
		if got != tt.want || ok != tt.ok {
			t.Errorf("stripeTradeNoQuery(%s) = %q, %v; want %q, %v", q, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzStripeTradeNoQuery: any query is refused or read; any trade_no quoted as the gateway quotes
// it reads back as itself.
func FuzzStripeTradeNoQuery(f *testing.F) {
	for _, s := range []string{"T-1_a", "it's", `a\b`, `\'`, "", "'"} {
		f.Add(s)
	}
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = stripeTradeNoQuery(s)
		got, ok := stripeTradeNoQuery("metadata['trade_no']:'" + quote.Replace(s) + "'")
		if ok != (s != "") || ok && got != s {
			t.Fatalf("quoted %q reads back as %q, %v", s, got, ok)
		}
	})
}
