package main

import (
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
)

// `paygw reconcile bill` without --file downloads the bill through the channel: against the fake
// channel, a WeChat payment whose notification never came is found in the downloaded bill and
// repaired (exit 0); a day whose bill holds an order that is not ours leaves a discrepancy
// (exit 3).
func TestReconcileBillDownload(t *testing.T) {
	fake, extra, man := sandboxFake(t)
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn, extra: extra})

	cst := bills.ChinaTime
	y, m, d := time.Now().In(cst).AddDate(0, 0, -2).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, cst)
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PBILL1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', ?, ?)`, day.Add(9*time.Hour).UTC(), day.Add(9*time.Hour).UTC())
	if _, err := fake.Add(t.Context(), simulate.FakeTrade{Channel: "wechatpay", TradeNo: "PBILL1", AmountFen: 1999,
		Status: simulate.FakePaid, PaidAt: day.Add(10 * time.Hour), DropNotify: true}); err != nil {
		t.Fatal(err)
	}

	date := day.Format(time.DateOnly)
	r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", date)
	if r.code != 0 || !strings.Contains(r.stdout, "CHANNEL_ONLY") || !strings.Contains(r.stdout, "1 lines") {
		t.Fatalf("bill download run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PBILL1' AND status = 'PAID'`); n != 1 {
		t.Fatal("the CHANNEL_ONLY order was not repaired to PAID")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_discrepancy WHERE class = 'CHANNEL_ONLY' AND repair = 'APPLIED'`); n != 1 {
		t.Fatalf("CHANNEL_ONLY rows repaired: %d, want 1", n)
	}

	// The day before: the bill holds an order paygw never made.
	prev := day.AddDate(0, 0, -1)
	if _, err := fake.Add(t.Context(), simulate.FakeTrade{Channel: "wechatpay", TradeNo: "NOTOURS1", AmountFen: 500,
		Status: simulate.FakePaid, PaidAt: prev.Add(15 * time.Hour), DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	r = runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", prev.Format(time.DateOnly))
	if r.code != exitDiscrepancies || !strings.Contains(r.stdout, "UNKNOWN_ORDER") {
		t.Fatalf("bill with an unknown order: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitDiscrepancies, r.stdout, r.stderr)
	}

	// A day without trades: WeChat has no statement, an empty bill; nothing to settle.
	empty := day.AddDate(0, 0, -5)
	if r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", empty.Format(time.DateOnly)); r.code != 0 || !strings.Contains(r.stdout, "0 lines") {
		t.Fatalf("empty day: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The generic format cannot be downloaded.
	if r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "csv", "--date", date); r.code == 0 || !strings.Contains(r.stderr, "--file") {
		t.Fatalf("csv without --file: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, out := range []string{r.stdout + r.stderr} {
		if strings.Contains(out, man.Stripe.APIKey) || strings.Contains(out, man.UnionPay.MerchantSignCertPassword) {
			t.Fatal("reconcile bill printed a merchant secret")
		}
	}
}
