package handlers

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// Label values stay bounded whatever the traffic: notifications about many orders, and requests
// for many orders' paths, add to the same few series. A trade_no in any label would make one
// series per order and, in time, exhaust Prometheus.
func TestMetricsLabelsAreBounded(t *testing.T) {
	m := metrics.New("test")
	h := newHarness(t, options{metrics: m})
	const orders = 5
	var tradeNos []string
	for range orders {
		tn := h.seedOrder(1000)
		tradeNos = append(tradeNos, tn)
		wantReply(t, h.notifyAlipay(alipayPayment(tn, 1000)), 200, alipaySuccess)               // APPLIED
		wantReply(t, h.notifyAlipay(alipayPayment(tn, 1000)), 200, alipaySuccess)               // REPEAT
		wantReply(t, h.notifyAlipay(alipayPayment("NOSUCH"+suffix(tn), 1000)), 503, alipayFail) // UNKNOWN_ORDER
		forged, err := simulate.AlipayBody(simulate.AlipayPayment{TradeNo: tn, AmountFen: 1000, AppID: testAppID,
			AlipayTxn: "2026" + tn, NotifyID: "forged-" + tn, TradeStatus: "TRADE_SUCCESS"}, mustKey())
		if err != nil {
			t.Fatal(err)
		}
		wantReply(t, h.post("/notify/alipay", forged), 400, alipayFail) // REFUSED, bad_signature
		if r := h.do("GET", "/v1/orders/"+tn, testToken, nil, ""); r.code != 200 {
			t.Fatalf("GET /v1/orders/%s: %d %s", tn, r.code, r.body)
		}
		h.do("GET", "/no/such/path/"+tn, "", nil, "")
	}

	want := map[string]int{
		// APPLIED, REPEAT, UNKNOWN_ORDER, REFUSED
		"paygw_notifications_total": 4,
		// one histogram per channel
		"paygw_notification_duration_seconds": 1,
		"paygw_verify_failures_total":         1,
		// /notify/alipay 200, 500, 400; /v1/orders/:trade_no 200; unmatched 404
		"paygw_http_requests_total":           5,
		"paygw_http_request_duration_seconds": 3,
	}
	for name, n := range want {
		if got := testutil.CollectAndCount(m.Registry(), name); got != n {
			t.Errorf("%s: %d series after %d orders, want %d", name, got, orders, n)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"paygw_notifications_total", map[string]string{"channel": "alipay", "outcome": string(payment.OutcomeApplied)}, orders},
		{"paygw_notifications_total", map[string]string{"channel": "alipay", "outcome": string(payment.OutcomeRepeat)}, orders},
		{"paygw_notifications_total", map[string]string{"channel": "alipay", "outcome": string(payment.OutcomeUnknownOrder)}, orders},
		{"paygw_notifications_total", map[string]string{"channel": "alipay", "outcome": metrics.OutcomeRefused}, orders},
		{"paygw_verify_failures_total", map[string]string{"channel": "alipay", "reason": metrics.ReasonBadSignature}, orders},
		{"paygw_http_requests_total", map[string]string{"route": "/v1/orders/:trade_no", "code": "200"}, orders},
		{"paygw_http_requests_total", map[string]string{"route": "/notify/alipay", "code": "200"}, 2 * orders},
		{"paygw_http_requests_total", map[string]string{"route": "/notify/alipay", "code": "503"}, orders},
		{"paygw_http_requests_total", map[string]string{"route": "/notify/alipay", "code": "400"}, orders},
	} {
		if got := sample(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// No label value anywhere is one of the orders' numbers.
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				for _, tn := range tradeNos {
					if strings.Contains(l.GetValue(), suffix(tn)) {
						t.Errorf("%s{%s=%q} carries an order's number", f.GetName(), l.GetName(), l.GetValue())
					}
				}
				if f.GetName() == "paygw_http_requests_total" && l.GetName() == "route" && strings.Contains(l.GetValue(), "/v1/orders/") &&
					l.GetValue() != "/v1/orders/:trade_no" {
					t.Errorf("route label %q is a path, not the route pattern", l.GetValue())
				}
			}
		}
	}
}

// suffix is the random part of a trade_no made by orders.NewTradeNo.
func suffix(tradeNo string) string { return tradeNo[len(tradeNo)-16:] }

// sample is the value of the counter name{labels} (all its labels given); -1 when there is none.
func sample(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	found := -1.0
	testenv.Series(t, m, name, func(l map[string]string, v float64) {
		if found == -1 && maps.Equal(l, labels) {
			found = v
		}
	})
	return found
}

func TestVerifyReason(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"probe":         {fmt.Errorf("wechatpay: %w", channels.ErrProbe), metrics.ReasonProbe},
		"bad signature": {fmt.Errorf("%w: alipay: sign", channels.ErrBadSignature), metrics.ReasonBadSignature},
		"malformed":     {fmt.Errorf("%w: stripe: json", channels.ErrMalformed), metrics.ReasonMalformed},
		"not ours":      {fmt.Errorf("%w: app_id", channels.ErrNotOurs), metrics.ReasonNotOurs},
		"unsupported":   {fmt.Errorf("%w: sign_type", channels.ErrUnsupported), metrics.ReasonUnsupported},
		"stale":         {fmt.Errorf("%w: timestamp", channels.ErrStale), metrics.ReasonStale},
		"no sentinel":   {errors.New("something else"), metrics.ReasonOther},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := verifyReason(tc.err); got != tc.want {
				t.Errorf("verifyReason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
