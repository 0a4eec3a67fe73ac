package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/simulate"
)

// `paygw reconcile query` against the fake channel: one line per order asked, a summary, exit 0
// whatever it found; --dry-run changes nothing; a channel that cannot be asked is an error.
func TestReconcileQueryCommand(t *testing.T) {
	fake, extra, man := sandboxFake(t)
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn, extra: extra})
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PRECON1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', NOW(3), NOW(3))`)
	testenv.Exec(t, dsn, `INSERT INTO payment_attempt (trade_no, channel, created_time, next_query_at) VALUES ('PRECON1', 'alipay', NOW(3), NOW(3))`)
	if _, err := fake.Add(t.Context(), simulate.FakeTrade{Channel: "alipay", TradeNo: "PRECON1", AmountFen: 1999, Status: simulate.FakePaid, DropNotify: true}); err != nil {
		t.Fatal(err)
	}

	dry := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s", "--channel", "alipay", "--dry-run")
	if dry.code != 0 || !strings.Contains(dry.stdout, "PRECON1 alipay PAID: dry run") || !strings.Contains(dry.stdout, "asked 1: paid 1") {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", dry.code, dry.stdout, dry.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE status = 'PAID'`); n != 0 {
		t.Fatal("the dry run changed the order")
	}
	// --json: the same answers and counts, one document.
	js := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s", "--channel", "alipay", "--dry-run", "--json")
	var q struct {
		Answers                                                           []string `json:"answers"`
		Asked, Paid, Refunded, Closed, Failed, Unverified, Applied, Stale int
		NotPaid                                                           int `json:"not_paid"`
	}
	decodeJSON(t, js, &q)
	if js.code != 0 || q.Asked != 1 || q.Paid != 1 || q.Applied != 0 || len(q.Answers) != 1 || !strings.HasPrefix(q.Answers[0], "PRECON1 alipay PAID: dry run") {
		t.Fatalf("dry run --json: exit %d, %+v\nstdout:\n%s\nstderr:\n%s", js.code, q, js.stdout, js.stderr)
	}
	r := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s")
	if r.code != 0 || !strings.Contains(r.stdout, "PRECON1 alipay PAID: applied: [APPLIED]") || !strings.Contains(r.stdout, "asked 1: paid 1") {
		t.Fatalf("reconcile query: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM notify_journal WHERE trade_no = 'PRECON1' AND source = 'query'`); n != 1 {
		t.Fatalf("journal rows from the query = %d, want 1", n)
	}
	// Nothing left to ask: still exit 0, and the summary says so.
	if again := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s"); again.code != 0 || !strings.Contains(again.stdout, "asked 0") {
		t.Fatalf("second run: exit %d\n%s\n%s", again.code, again.stdout, again.stderr)
	}
	if bad := runPaygw(t, nil, "reconcile", "query", "--config", path, "--channel", "paypal"); bad.code == 0 || !strings.Contains(bad.stderr, "paypal") {
		t.Fatalf("unknown channel: exit %d, stderr %q", bad.code, bad.stderr)
	}
	for _, out := range []string{dry.stdout + dry.stderr, r.stdout + r.stderr} {
		for _, s := range []string{man.Stripe.APIKey, man.UnionPay.MerchantSignCertPassword} {
			if strings.Contains(out, s) {
				t.Fatal("reconcile query printed a merchant secret")
			}
		}
	}
}

// wechatBill writes a WeChat trade bill in its real format: backtick-prefixed fields, then the
// summary header and line (rows states the summary's 总交易单数).
func wechatBill(t *testing.T, rows int, lines ...string) string {
	t.Helper()
	header := "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
	body := header + "\r\n" + strings.Join(lines, "\r\n") + "\r\n" +
		"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n" +
		fmt.Sprintf("`%d,`19.99,`0.00,`0.00,`0.00000,`19.99,`0.00\r\n", rows)
	return tempFile(t, "wechat_bill.txt", body)
}

// `paygw reconcile bill --file` with a real WeChat bill: a payment whose notification was lost
// is repaired (exit 0); a bill whose summary disagrees with its lines is untrusted (exit 4, in
// the report); a bill that is not one stops with one line naming the file (exit 1).
func TestReconcileBillCommand(t *testing.T) {
	_, man := sandbox.Keys(t)
	channelsYAML, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn, extra: string(channelsYAML)})
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PBILL1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', '2026-11-30 01:00:00', '2026-11-30 01:00:00')`)
	line := "`2026-11-30 17:07:11,`wx0000000000000000,`1900000001,`0,`,`4200000925202611304997714292,`PBILL1,`openid,`NATIVE,`SUCCESS,`OTHERS,`CNY,`19.99,`0.00,`0,`0,`0.00,`0.00,`,`,`goods,`,`0.00000,`0.60%,`19.99,`0.00,`"
	report := filepath.Join(t.TempDir(), "report.json")

	r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30",
		"--file", wechatBill(t, 1, line), "--report", report)
	if r.code != 0 || !strings.Contains(r.stdout, "CHANNEL_ONLY") {
		t.Fatalf("repairing bill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PBILL1' AND status = 'PAID' AND channel = 'wechatpay'`); n != 1 {
		t.Fatal("the bill did not repair the order")
	}
	var rep struct {
		Channel  string         `json:"channel"`
		BillDate string         `json:"bill_date"`
		Lines    int            `json:"lines"`
		Counts   map[string]int `json:"counts"`
		Rows     []struct {
			Class, Repair string
			TradeNo       string `json:"trade_no"`
		} `json:"discrepancies"`
	}
	raw, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(raw, &rep) != nil || rep.Channel != "wechatpay" || rep.BillDate != "2026-11-30" || rep.Lines != 1 ||
		len(rep.Rows) != 1 || rep.Rows[0].Repair != "APPLIED" || rep.Rows[0].TradeNo != "PBILL1" {
		t.Fatalf("report %s (%v)", raw, err)
	}

	// The same day again, its summary claiming two rows: the payment now matches, the summary does
	// not, so the bill is untrusted (exit 4) and says why.
	again := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30",
		"--file", wechatBill(t, 2, line), "--report", report)
	if again.code != 4 || !strings.Contains(again.stdout, "SUMMARY_MISMATCH") || !strings.Contains(again.stdout, "MATCHED") ||
		!strings.Contains(again.stdout, "untrusted, nothing repaired: the summary disagrees") {
		t.Fatalf("summary mismatch: exit %d\nstdout:\n%s\nstderr:\n%s", again.code, again.stdout, again.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE status = 'complete'`); n != 2 {
		t.Fatalf("complete runs = %d, want 2: a re-run is a run of its own", n)
	}

	// --json: the report, as --report writes it, on stdout; the bill now agrees with the books.
	js := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30",
		"--file", wechatBill(t, 1, line), "--json")
	// Decoded into the types --report and --json write, strictly: a field renamed on one side fails.
	var doc struct {
		reconcile.BillReport
		Rows []reconcile.Discrepancy `json:"discrepancies"`
	}
	decodeJSON(t, js, &doc)
	if js.code != 0 || doc.Channel != "wechatpay" || doc.BillDate != "2026-11-30" || doc.Source != "channel" || doc.Lines != 1 ||
		!doc.Trusted || doc.Counts["MATCHED"] != 1 || doc.Rows == nil {
		t.Fatalf("bill --json: exit %d, %+v\nstdout:\n%s\nstderr:\n%s", js.code, doc, js.stdout, js.stderr)
	}

	notABill := tempFile(t, "notes.txt", "just some text\n")
	bad := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30", "--file", notABill)
	if bad.code != 1 || !strings.Contains(bad.stderr, notABill) || strings.Count(strings.TrimSpace(bad.stderr), "\n") != 0 {
		t.Fatalf("not a bill: exit %d, stderr %q; want exit 1 and one line naming the file", bad.code, bad.stderr)
	}
}
