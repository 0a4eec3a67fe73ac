package main

import (
	"os"
	"strings"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
)

// `paygw reconcile bill` checks each payment line's fee against channels.X.fee_rate: a WeChat
// line of 19.99 charged 0.13 at 0.6% (which is 0.12) is a FEE_MISMATCH; the payment is still
// repaired (a fee moves no money), the run's totals are kept, and the exit status says a
// discrepancy remains (3). A fee_rate that is not a rate stops the command, naming the key.
func TestReconcileBillFeeRate(t *testing.T) {
	_, man := sandbox.Keys(t)
	channelsYAML := feesReadFile(t, man.ConfigPath)
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn, extra: channelsYAML})
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PFEE1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', '2026-11-30 01:00:00', '2026-11-30 01:00:00')`)
	line := "`2026-11-30 17:07:11,`wx0000000000000000,`1900000001,`0,`,`4200000925202611304997714293,`PFEE1,`openid,`NATIVE,`SUCCESS,`OTHERS,`CNY,`19.99,`0.00,`0,`0,`0.00,`0.00,`,`,`goods,`,`0.13000,`0.60%,`19.99,`0.00,`"
	bill := strings.Replace(feesReadFile(t, wechatBill(t, 1, line)), "`0.00000,`19.99", "`0.13000,`19.99", 1)
	file := tempFile(t, "wechat_fee_bill.txt", bill)

	r := runPaygw(t, []string{"PAYGW_CHANNELS__WECHATPAY__FEE_RATE=0.006"}, "reconcile", "bill", "--config", path,
		"--channel", "wechatpay", "--date", "2026-11-30", "--file", file)
	if r.code != 3 || !strings.Contains(r.stdout, "FEE_MISMATCH") || !strings.Contains(r.stdout, "CHANNEL_ONLY") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PFEE1' AND status = 'PAID'`); n != 1 {
		t.Fatal("the fee mismatch stopped the repair")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_discrepancy WHERE class = 'FEE_MISMATCH'
		AND line_key = 'fee:rate:pay:4200000925202611304997714293' AND bill_amount_fen = 13 AND local_amount_fen = 12 AND repair = ''`); n != 1 {
		t.Fatal("no FEE_MISMATCH row of the line's fee against the rate")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run_total WHERE currency = 'CNY' AND gross_fen = 1999
		AND fee_fen = 13 AND net_fen = 1986 AND summary_fee_fen = 13`); n != 1 {
		t.Fatal("the run's totals are not kept")
	}

	bad := runPaygw(t, []string{"PAYGW_CHANNELS__WECHATPAY__FEE_RATE=0.6%"}, "reconcile", "bill", "--config", path,
		"--channel", "wechatpay", "--date", "2026-11-30", "--file", file)
	if bad.code == 0 || !strings.Contains(bad.stderr+bad.stdout, "channels.wechatpay.fee_rate") {
		t.Fatalf("a bad fee_rate: exit %d\nstdout:\n%s\nstderr:\n%s", bad.code, bad.stdout, bad.stderr)
	}
}

func feesReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
