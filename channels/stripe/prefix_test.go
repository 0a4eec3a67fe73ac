package stripe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/simulate"
)

// stripeProxy is an egress proxy that forwards /stripe/... to the fake Stripe API (the prefix
// removed), and answers anything else with its own HTML 404, as a proxy does for a path it does
// not route. It keeps the paths it was asked.
type stripeProxy struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newStripeProxy(t *testing.T, fake http.Handler) *stripeProxy {
	t.Helper()
	p := &stripeProxy{}
	mux := http.NewServeMux()
	mux.Handle("/stripe/", http.StripPrefix("/stripe", fake))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<html><body>no route</body></html>")
	})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.URL.EscapedPath())
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *stripeProxy) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...)
}

// Issue 20, case 12: an api_base_url with a path (an egress proxy's /stripe) made stripe-go refuse
// every response ("unknown path prefix"), reported as "HTTP 200 body does not decode as
// PaymentIntents". The prefix is now added by the transport: queries by search and by id, and
// the Stripe bill over the same client, reach the proxy under /stripe and read its answers.
func TestIssue20Case12StripeBaseURLWithPathQueriesAndBills(t *testing.T) {
	e := newStripeQueryEnv(t)
	for i, base := range []string{"/stripe", "/stripe/"} {
		t.Run(base, func(t *testing.T) {
			proxy := newStripeProxy(t, e.Fake.Handler())
			c := e.cfg
			c.APIBaseURL = proxy.URL + base
			q, err := NewQuerier(c, proxy.Client())
			if err != nil {
				t.Fatal(err)
			}
			day := time.Now().UTC().AddDate(0, 0, -2).Truncate(24 * time.Hour)
			paid := e.Add(t, simulate.FakeTrade{TradeNo: "T-proxy-" + strconv.Itoa(i), AmountFen: 4321, Status: simulate.FakePaid,
				PaidAt: day.Add(9 * time.Hour)})

			for _, tq := range []channels.TradeQuery{{TradeNo: paid.TradeNo}, {TradeNo: paid.TradeNo, ChannelRef: paid.TxnID}} {
				got, err := q.QueryTrade(context.Background(), tq)
				if err != nil {
					t.Fatalf("%+v: %v", tq, err)
				}
				if got.State != channels.TradePaid || len(got.Events) != 1 || got.Events[0].ChannelTxnID != paid.TxnID || got.Events[0].AmountFen != 4321 {
					t.Fatalf("%+v: %+v, want the payment of %s", tq, got, paid.TxnID)
				}
			}

			bills, err := NewBillDownloader(c, time.UTC, proxy.Client())
			if err != nil {
				t.Fatal(err)
			}
			b, err := bills.DownloadBill(context.Background(), day)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			lines := channeltest.BillLines(t, b)
			found := false
			for _, l := range lines {
				found = found || l.ChannelTxnID == paid.TxnID && l.AmountFen == 4321
			}
			if !found {
				t.Fatalf("the bill through the proxy lacks %s: %+v", paid.TxnID, lines)
			}

			asked := proxy.asked()
			if len(asked) != 3 { // search, retrieve, balance transactions
				t.Fatalf("the proxy saw %v", asked)
			}
			for _, p := range asked {
				if !strings.HasPrefix(p, "/stripe/v1/") {
					t.Errorf("request to %s, want every one under /stripe/v1/", p)
				}
			}
		})
	}
}

// An api_base_url the transport cannot put in front of a path is refused at construction.
func TestStripeBaseURLRefused(t *testing.T) {
	for _, u := range []string{"https://proxy.example/stripe?x=1", "https://proxy.example/stripe#f", "https://user:pw@proxy.example/stripe", "ftp://proxy.example", "/stripe"} {
		if _, err := NewQuerier(config.Stripe{APIKey: "sk_test_x", APIBaseURL: u}, nil); err == nil || !strings.Contains(err.Error(), "channels.stripe.api_base_url") {
			t.Errorf("%q: %v, want an error naming channels.stripe.api_base_url", u, err)
		}
	}
}

// Issue 20, case 12, second half: a 2xx body that stripe-go cannot use is reported with its real
// cause, not always as "does not decode as PaymentIntents".
func TestIssue20Case12StripeErrorNamesTheCause(t *testing.T) {
	serve := func(t *testing.T, h http.HandlerFunc) channels.Querier {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		q, err := NewQuerier(config.Stripe{APIKey: "sk_test_cause", APIBaseURL: srv.URL}, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	tests := map[string]struct {
		h    http.HandlerFunc
		want error
		says []string
	}{
		"an HTML page with 200": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html>captive portal</html>")
		}, channels.ErrMalformed, []string{"HTTP 200", "is not JSON", `"text/html; charset=utf-8"`, "api_base_url"}},
		"JSON of another shape": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"search_result","data":[{"id":"pi_A","amount_received":"12"}]}`)
		}, channels.ErrMalformed, []string{"HTTP 200", "does not decode", `"data.amount_received"`, "JSON string", "int64"}},
		"a body cut short": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "4096")
			_, _ = io.WriteString(w, `{"object":"search_result","data":[`)
		}, channels.ErrQueryFailed, []string{"HTTP 200", "cut short"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := serve(t, tt.h).QueryTrade(context.Background(), channels.TradeQuery{TradeNo: "T1"})
			if !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
		})
	}
}
