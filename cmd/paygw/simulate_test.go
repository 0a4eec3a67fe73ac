package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
)

// TestSimulateAgainstServe drives the real binary end to end: `paygw simulate keys` makes the
// sandbox, a `paygw serve` trusts it, and `paygw simulate notify` pays one order per channel with
// a concurrent storm of repeats, then redelivers on a compressed retry schedule until an order
// that did not exist yet appears.
func TestSimulateAgainstServe(t *testing.T) {
	keys, snippet := simulateKeys(t)
	dsn := testenv.NewDatabase(t)
	addr, token := freeAddr(t), newToken(t)
	path := writeConfig(t, settings{addr: addr, dsn: dsn, token: token})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(snippet); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv := startServer(t, path, addr)
	if r := srv.do("PUT", "/v1/stock/A-100", token, nil, `{"num":100,"price_fen":1999}`); r.code != 200 {
		t.Fatalf("stock: %d %s", r.code, r.body)
	}

	paid := map[string]string{} // channel -> trade_no
	for i, ch := range []string{"alipay", "wechatpay", "stripe", "unionpay"} {
		r := srv.do("POST", "/v1/orders", token, map[string]string{"Idempotency-Key": "sim-" + ch}, `{"user_id":1,"sku":"A-100","num":1}`)
		var o struct {
			TradeNo string `json:"trade_no"`
		}
		if r.code != 201 || json.Unmarshal([]byte(r.body), &o) != nil {
			t.Fatalf("create %d: %d %s", i, r.code, r.body)
		}
		res := runPaygw(t, nil, "simulate", "notify", "--channel", ch, "--trade-no", o.TradeNo, "--amount-fen", "1999",
			"--repeat", "6", "--concurrency", "3", "--target", srv.url, "--keys", keys)
		if res.code != 0 || !strings.Contains(res.stdout, "6 sent: 6 success, 0 refusal, 0 retry, 0 error") {
			t.Fatalf("simulate notify %s: exit %d\n%s\n%s", ch, res.code, res.stdout, res.stderr)
		}
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = 'PAID' AND channel = ?`, o.TradeNo, ch); n != 1 {
			t.Fatalf("%s: order not PAID by the channel", ch)
		}
		paid[ch] = o.TradeNo
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 4 {
		t.Fatalf("payment records = %d, want 4", n)
	}

	// Two refunds of each payment, the first sent twice; Alipay's signed in GBK.
	for ch, tradeNo := range paid {
		refund := []string{"simulate", "notify", "--channel", ch, "--trade-no", tradeNo, "--amount-fen", "1999", "--status", "refund",
			"--target", srv.url, "--keys", keys}
		if ch == "alipay" {
			refund = append(refund, "--charset", "gbk")
		}
		for _, args := range [][]string{{"--refund-fen", "500", "--repeat", "2"}, {"--refund-fen", "300", "--refund-total-fen", "800"}} {
			res := runPaygw(t, nil, append(refund, args...)...)
			if res.code != 0 || !strings.Contains(res.stdout, "0 refusal, 0 retry, 0 error") {
				t.Fatalf("simulate notify %s refund %v: exit %d\n%s\n%s", ch, args, res.code, res.stdout, res.stderr)
			}
		}
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = 'PAID' AND refunded_fen = 800`, tradeNo); n != 1 {
			t.Fatalf("%s: order not PAID with 800 refunded after two refunds", ch)
		}
	}
	if res := runPaygw(t, nil, "simulate", "notify", "--channel", "wechatpay", "--trade-no", "T1", "--amount-fen", "1", "--status", "closed",
		"--target", srv.url, "--keys", keys); res.code == 0 || !strings.Contains(res.stderr, "WeChat sends no notification") {
		t.Fatalf("a WeChat close was simulated: exit %d\n%s", res.code, res.stderr)
	}

	// --schedule: the order appears only after the first delivery, as when a notification
	// outruns the order's commit. Alipay's first redelivery is due after 4 minutes; at
	// --speedup 1000 that is 240 ms.
	late := "LATE" + testenv.Random(8) // fresh: the binary's Redis done markers outlive this test's database
	cmd := exec.Command(bin, "simulate", "notify", "--channel", "alipay", "--trade-no", late, "--amount-fen", "500",
		"--schedule", "--speedup", "1000", "--target", srv.url, "--keys", keys)
	cmd.Env = childEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "#1 ") {
			if !strings.HasPrefix(lines.Text(), "#1 503") {
				t.Fatalf("first delivery for a missing order: %s, want 503", lines.Text())
			}
			// The order commits between the first delivery and the redelivery.
			testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency) VALUES (?, 1, 'A-100', 1, 500, 'CNY')`, late)
		}
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "2 sent: 1 success, 0 refusal, 1 retry") {
		t.Fatalf("simulate --schedule: %v\n%s", err, out.String())
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = 'PAID'`, late); n != 1 {
		t.Fatal("the late order was not paid by the redelivery")
	}
}

// `paygw simulate notify` exits 1 when the gateway accepted none of its notifications, and 0 when
// it accepted one: a storm against a gateway that refuses every signature is not a success.
func TestSimulateNotifyExitCode(t *testing.T) {
	keys, _ := sandbox.Keys(t)
	tests := map[string]struct {
		answers []int // the gateway's statuses, in order, then the last one repeated
		code    int
		summary string
	}{
		"all refused":        {[]int{http.StatusBadRequest}, exitFailed, "3 sent: 0 success, 3 refusal, 0 retry, 0 error"},
		"all retried":        {[]int{http.StatusServiceUnavailable}, exitFailed, "3 sent: 0 success, 0 refusal, 3 retry, 0 error"},
		"one accepted":       {[]int{http.StatusBadRequest, http.StatusBadRequest, http.StatusOK}, exitOK, "3 sent: 1 success, 2 refusal"},
		"every one accepted": {[]int{http.StatusOK}, exitOK, "3 sent: 3 success, 0 refusal"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				status := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				w.WriteHeader(status)
			}))
			defer gw.Close()
			r := runPaygw(t, nil, "simulate", "notify", "--keys", keys, "--target", gw.URL, "--channel", "alipay",
				"--trade-no", "PSIM1", "--amount-fen", "1999", "--repeat", "3")
			if r.code != tc.code || !strings.Contains(r.stdout, tc.summary) {
				t.Fatalf("exit %d, want %d; want %q\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, tc.summary, r.stdout, r.stderr)
			}
			if tc.code == exitFailed && !strings.Contains(r.stderr, "accepted none of the 3 notification(s)") {
				t.Errorf("stderr does not say none was accepted:\n%s", r.stderr)
			}
		})
	}
}

// simulateKeys runs `paygw simulate keys` into a directory of the test's own; it returns the
// directory and the channels: block it wrote (channels.yaml).
func simulateKeys(t *testing.T) (string, string) {
	t.Helper()
	keys := t.TempDir()
	if r := runPaygw(t, nil, "simulate", "keys", "--out", keys); r.code != 0 {
		t.Fatalf("paygw simulate keys: %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(keys, "channels.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return keys, string(b)
}
