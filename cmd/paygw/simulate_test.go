package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// TestSimulateAgainstServe drives the real binary end to end: `paygw simulate keys` makes the
// sandbox, a `paygw serve` trusts it, and `paygw simulate notify` pays one order per channel with
// a concurrent storm of repeats, then redelivers on a compressed retry schedule until an order
// that did not exist yet appears.
func TestSimulateAgainstServe(t *testing.T) {
	keys := t.TempDir()
	if r := runPaygw(t, nil, "simulate", "keys", "--out", keys); r.code != 0 {
		t.Fatalf("simulate keys: %d\n%s", r.code, r.stderr)
	}
	snippet, err := os.ReadFile(filepath.Join(keys, "channels.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.NewDatabase(t)
	addr, token := freeAddr(t), newToken()
	path := writeConfig(t, settings{addr: addr, dsn: dsn, token: token})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(snippet); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv := startServer(t, path, addr)
	if r := srv.do("PUT", "/v1/stock/A-100", token, nil, `{"num":100,"price_fen":1999}`); r.code != 200 {
		t.Fatalf("stock: %d %s", r.code, r.body)
	}

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
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 4 {
		t.Fatalf("payment records = %d, want 4", n)
	}

	// --schedule: the order appears only after the first delivery, as when a notification
	// outruns the order's commit. Alipay's first redelivery is due after 4 minutes; at
	// --speedup 1000 that is 240 ms.
	const late = "LATE0000000000000001"
	done := make(chan result, 1)
	go func() {
		done <- runPaygw(t, nil, "simulate", "notify", "--channel", "alipay", "--trade-no", late, "--amount-fen", "500",
			"--schedule", "--speedup", "1000", "--target", srv.url, "--keys", keys)
	}()
	time.Sleep(120 * time.Millisecond)
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency) VALUES (?, 1, 'A-100', 1, 500, 'CNY')`, late)
	res := <-done
	if res.code != 0 || !strings.Contains(res.stdout, "#1 503") || !strings.Contains(res.stdout, "1 retry") {
		t.Fatalf("simulate --schedule: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = 'PAID'`, late); n != 1 {
		t.Fatal("the late order was not paid by the redelivery")
	}
}
