package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/paygw/paygw/internal/dashboard"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
	"github.com/paygw/paygw/webhook"
)

// A real Prometheus scrapes a running paygw's admin port while the test sends notifications that
// come to every outcome metrics.Outcomes lists (PROBE and RETRY included); its query API must
// then answer exactly what was sent, and every dashboard panel must have data.
func TestPrometheusScrapesWhatWasSent(t *testing.T) {
	prom := prometheusBinary(t)

	// The gateway, with channels trusting `paygw simulate keys`.
	keys, channelsYAML := simulateKeys(t)
	// No fake channel server runs: outbound calls go to a port nothing listens on.
	extra := strings.ReplaceAll(channelsYAML, simulate.FakeAddr, "127.0.0.1:1")
	addr, admin := freeAddr(t), freeAddr(t)
	extra += fmt.Sprintf("admin:\n  addr: %q\n", admin)
	// A webhook endpoint that verifies what it is sent, so the webhook panels have deliveries.
	secret := testenv.WebhookSecret(t)
	var delivered atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(body, r.Header, []string{secret}, time.Now()); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	extra += fmt.Sprintf("webhooks:\n  endpoints:\n    - {name: metrics, url: %q, secret: %q}\n", sink.URL+"/hooks", secret)
	token := newToken(t)
	dsn := testenv.NewDatabase(t)
	s := startServer(t, writeConfig(t, settings{addr: addr, dsn: dsn, token: token, extra: extra}), addr)

	// /metrics is the admin listener's alone.
	if r := s.do("GET", "/metrics", "", nil, ""); r.code != http.StatusNotFound {
		t.Errorf("GET /metrics on the public listener: %d, want 404", r.code)
	}

	// Prometheus, scraping the admin port every second.
	promAddr := startPrometheus(t, prom, admin)

	// Orders, then notifications that come to every outcome metrics exports.
	if r := s.do("PUT", "/v1/stock/M-1", token, nil, `{"num":100,"price_fen":1999}`); r.code != http.StatusOK {
		t.Fatalf("PUT /v1/stock/M-1: %d %s", r.code, r.body)
	}
	created := 0
	createOrder := func() (tradeNo string, amount int64) {
		created++
		r := s.do("POST", "/v1/orders", token, map[string]string{"Idempotency-Key": fmt.Sprintf("metrics-%d", created)},
			`{"user_id":7,"sku":"M-1","num":1}`)
		if r.code != http.StatusCreated {
			t.Fatalf("POST /v1/orders: %d %s", r.code, r.body)
		}
		var o struct {
			TradeNo   string `json:"trade_no"`
			AmountFen int64  `json:"amount_fen"`
		}
		if err := json.Unmarshal([]byte(r.body), &o); err != nil {
			t.Fatal(err)
		}
		return o.TradeNo, o.AmountFen
	}

	signers, err := simulate.LoadSigners(keys)
	if err != nil {
		t.Fatal(err)
	}
	otherKeys := t.TempDir()
	if _, err := simulate.WriteKeys(otherKeys, time.Now()); err != nil {
		t.Fatal(err)
	}
	strangers, err := simulate.LoadSigners(otherKeys)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	sent := map[string]int{}  // outcome -> notifications
	codes := map[string]int{} // status code -> notifications
	deliver := func(channel, outcome string, m simulate.Message, wantStatus int) {
		t.Helper()
		r := simulate.Send(t.Context(), client, simulate.NotifyURL(s.url, channel), m)
		if r.Err != nil || wantStatus != 0 && r.Status != wantStatus {
			t.Fatalf("notify %s for %s: %v, want %d\n%s", channel, outcome, r, wantStatus, s.out)
		}
		sent[outcome]++
		codes[strconv.Itoa(r.Status)]++
	}
	send := func(signer simulate.Signer, p simulate.Payment, outcome string, wantStatus int) {
		t.Helper()
		m, err := signer.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		deliver(signer.Channel(), outcome, m, wantStatus)
	}
	alipay := signers["alipay"]
	pay := func(tradeNo string, amount int64) simulate.Payment {
		return simulate.Payment{TradeNo: tradeNo, AmountFen: amount}
	}
	refund := func(tradeNo string, amount, total int64) simulate.Payment {
		return simulate.Payment{TradeNo: tradeNo, AmountFen: amount, Status: simulate.StatusRefund, RefundFen: total}
	}
	paid, amount := createOrder()
	send(alipay, pay(paid, amount), string(payment.OutcomeApplied), 200)
	send(alipay, pay(paid, amount), string(payment.OutcomeRepeat), 200)
	send(alipay, refund(paid, amount, 100), string(payment.OutcomeRefunded), 200)
	send(alipay, refund(paid, amount, amount+1), string(payment.OutcomeRefundExceedsPayment), 200)
	mismatched, _ := createOrder()
	send(alipay, pay(mismatched, amount+1), string(payment.OutcomeAmountMismatch), 200)
	send(alipay, refund(mismatched, amount+1, 100), string(payment.OutcomeAnomalyRefunded), 200)
	closed, _ := createOrder()
	send(alipay, simulate.Payment{TradeNo: closed, AmountFen: amount, Status: simulate.StatusClosed}, string(payment.OutcomeClosed), 200)
	send(alipay, pay(closed, amount), string(payment.OutcomePaidAfterClose), 200)
	twice, _ := createOrder()
	send(alipay, pay(twice, amount), string(payment.OutcomeApplied), 200)
	send(alipay, simulate.Payment{TradeNo: twice, AmountFen: amount, TxnID: "SECONDPAYMENTOFTWICE"}, string(payment.OutcomeDuplicatePayment), 200)
	waiting, _ := createOrder()
	send(alipay, simulate.Payment{TradeNo: waiting, AmountFen: amount, Status: simulate.StatusPending}, string(payment.OutcomeJournalled), 200)
	send(alipay, refund(waiting, amount, 100), string(payment.OutcomeRefundPending), 200)
	send(alipay, pay("NOSUCHORDER0000000001", amount), string(payment.OutcomeUnknownOrder), 503)
	send(strangers["alipay"], pay(paid, amount), metrics.OutcomeRefused, 400)
	// WeChat Pay's signature-test probe: a signed message whose signature is the probe's.
	probe, err := signers["wechatpay"].Sign(pay(paid, amount))
	if err != nil {
		t.Fatal(err)
	}
	probe.Header.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+probe.Header.Get("Wechatpay-Signature"))
	deliver("wechatpay", metrics.OutcomeProbe, probe, 0)
	// Our own fault: MySQL cannot apply while the orders table is away.
	sqlDB, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	unlucky, _ := createOrder()
	if _, err := sqlDB.ExecContext(t.Context(), "RENAME TABLE orders TO orders_away"); err != nil {
		t.Fatal(err)
	}
	send(alipay, pay(unlucky, amount), metrics.OutcomeRetry, 503)
	if _, err := sqlDB.ExecContext(t.Context(), "RENAME TABLE orders_away TO orders"); err != nil {
		t.Fatal(err)
	}
	// Every outcome the code exports was sent: the list is metrics', not this test's.
	total := 0
	wantOutcomes := map[string]string{}
	for _, o := range metrics.Outcomes() {
		if sent[o] == 0 {
			t.Errorf("no notification came to outcome %s", o)
		}
		wantOutcomes[o] = strconv.Itoa(sent[o])
		total += sent[o]
	}
	wantCodes := map[string]string{}
	for c, n := range codes {
		wantCodes[c] = strconv.Itoa(n)
	}

	want := map[string]map[string]string{
		`sum by (outcome) (paygw_notifications_total)`:                   wantOutcomes,
		`sum by (channel, reason) (paygw_verify_failures_total)`:         {"alipay,bad_signature": "1", "wechatpay,probe": "1"},
		`sum by (code) (paygw_http_requests_total{route=~"/notify/.*"})`: wantCodes,
		`sum by (route) (paygw_http_requests_total{route=~"/v1/.*"})`:    {"/v1/orders": strconv.Itoa(created), "/v1/stock/:sku": "1"},
		`sum by (result) (paygw_order_creates_total)`:                    {"created": strconv.Itoa(created)},
		`sum(paygw_notification_duration_seconds_count)`:                 {"": strconv.Itoa(total)},
		`sum by (result) (paygw_guard_total{result="acquired"}) > 0`:     nil, // any count
		`max by (kind) (paygw_anomalies_open{kind=~"AMOUNT_MISMATCH|PAID_AFTER_CLOSE|DUPLICATE_PAYMENT"})`: {
			"AMOUNT_MISMATCH": "1", "PAID_AFTER_CLOSE": "1", "DUPLICATE_PAYMENT": "1"},
		`paygw_mysql_up`:                        {"": "1"},
		`paygw_redis_up`:                        {"": "1"},
		`paygw_stored_state_up`:                 {"": "1"},
		`count by (version) (paygw_build_info)`: nil, // any one version, checked below
		`sum(paygw_idempotent_replays_total) + sum(paygw_sweeper_failed_records_total)`: {"": "0"},
	}
	deadline := time.Now().Add(30 * time.Second)
	for query, w := range want {
		for {
			got, err := promQuery(t.Context(), promAddr, query)
			if err == nil && (w == nil && len(got) == 1 || w != nil && reflect.DeepEqual(got, w)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus: %s = %v (err %v), want %v\npaygw:\n%s", query, got, err, w, s.out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Every dashboard panel's query parses and returns data from this Prometheus, the Grafana
	// variables replaced by ranges the test's minute of data covers.
	vars := strings.NewReplacer(dashboard.RateInterval, "1m", "$__range", "1h")
	for _, panel := range dashboard.Queries() {
		query := vars.Replace(panel)
		for {
			got, err := promQuery(t.Context(), promAddr, query)
			if err == nil && len(got) > 0 {
				break
			}
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatalf("dashboard panel %s: %v (err %v), want data", query, got, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if strings.Contains(s.out.String(), token) {
		t.Error("paygw logged the API token")
	}
	if delivered.Load() == 0 {
		t.Error("the webhook endpoint received no verified event")
	}
}

// prometheusBinary finds prometheus, installing it with scripts/prometheus.sh if missing. The
// test fails, never skips, without it: make test must prove the scrape.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	script, err := filepath.Abs("../../scripts/prometheus.sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script).CombinedOutput()
	if err != nil {
		t.Fatalf("prometheus is not installed and %s failed: %v\n%s", script, err, out)
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus still not on PATH after %s:\n%s", script, out)
	}
	return p
}

// startPrometheus runs prometheus scraping target every second, with its data in a temporary
// directory, and waits (at most 30 s) for it to be ready. It returns its listen address.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: paygw
    static_configs:
      - targets: [%q]
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	out := &testenv.LogBuffer{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	switch err := waitOK(http.DefaultClient, "http://"+addr+"/-/ready", done, 30*time.Second, 100*time.Millisecond); {
	case errors.Is(err, errExited):
		t.Fatalf("prometheus exited before it was ready:\n%s", out)
	case err != nil:
		t.Fatalf("prometheus not ready: %v:\n%s", err, out)
	}
	return addr
}

// promQuery runs an instant query and returns each series' value keyed by its labels' values
// (joined with ","; "" for a series without labels).
func promQuery(ctx context.Context, addr, query string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, body.Error)
	}
	got := map[string]string{}
	for _, r := range body.Data.Result {
		var names []string
		for k := range r.Metric {
			if k != "__name__" && k != "job" && k != "instance" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		vals := make([]string, len(names))
		for i, n := range names {
			vals[i] = r.Metric[n]
		}
		v, _ := r.Value[1].(string)
		got[strings.Join(vals, ",")] = v
	}
	return got, nil
}
