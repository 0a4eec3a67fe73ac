package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/simulate"
)

// The bill run's trust, identity and atomicity, through `paygw reconcile bill` as an operator
// runs it: issue 20, cases 5, 6, 9 and 11.

// billPID is the Alipay partner id the test configuration names (channels.alipay.seller_id).
const billPID = "2088000000000001"

var cst = bills.ChinaTime

// billDay is the bills' day: long past, so every payment missing from it is LOCAL_ONLY at once.
var billDay = time.Date(2026, 11, 30, 0, 0, 0, 0, cst)

// billSetup writes the sandbox channels' configuration, with Alipay's seller_id, over a migrated
// database of its own.
func billSetup(t *testing.T) (path, dsn string) {
	t.Helper()
	_, man := sandbox.Keys(t)
	raw, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	const alipay = "  alipay:\n    enabled: true\n"
	if !strings.Contains(string(raw), alipay) {
		t.Fatalf("the sandbox configuration has no %q block", alipay)
	}
	yaml := strings.Replace(string(raw), alipay, alipay+"    seller_id: \""+billPID+"\"\n", 1)
	dsn = testenv.EmptyDatabase(t)
	path = migratedConfig(t, settings{dsn: dsn, extra: yaml})
	return path, dsn
}

// waitPayOrder inserts a WAIT_PAY order.
func waitPayOrder(t *testing.T, dsn, tradeNo string, fen int64) {
	t.Helper()
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES (?, 1, 'S', 1, ?, 'CNY', 'WAIT_PAY', ?, ?)`, tradeNo, fen, billDay.UTC(), billDay.UTC())
}

// paidOrder inserts an order of status (PAID or CLOSED) paid by channel's txn at paid.
func paidOrder(t *testing.T, dsn, tradeNo, status, channel, txn string, fen int64, paid time.Time) {
	t.Helper()
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, channel, channel_txn_id,
		paid_time, create_time, update_time) VALUES (?, 1, 'S', 1, ?, 'CNY', ?, ?, ?, ?, ?, ?)`,
		tradeNo, fen, status, channel, txn, paid.UTC(), paid.UTC(), paid.UTC())
}

// alipayRow is one 业务明细 row: kind 交易 or 退款, fen positive either way.
type alipayRow struct {
	txn, trade, kind string
	fen              int64
	at               time.Time
	refundID         string
}

func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// alipayFile writes an Alipay 业务明细 file as Alipay makes it (GBK, the # header lines, the
// detail block, the totals): account and the period [from, from+1 day) in its header, and the
// totals stating payCount and refundCount rows (the sums are the rows').
func alipayFile(t *testing.T, account string, from time.Time, rows []alipayRow, payCount, refundCount int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#支付宝业务明细查询\n#账号：[" + account + "]\n")
	b.WriteString("#起始日期：[" + from.Format("2006年01月02日") + " 00:00:00]   终止日期：[" + from.AddDate(0, 0, 1).Format("2006年01月02日") + " 00:00:00]\n")
	b.WriteString("#-----------------------------------------业务明细列表----------------------------------------\n")
	b.WriteString("支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）," +
		"支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注\n")
	var pays, refunds int64
	for _, r := range rows {
		fen := r.fen
		if r.kind == "退款" {
			fen = -fen
			refunds += fen
		} else {
			pays += fen
		}
		when := r.at.In(cst).Format(time.DateTime)
		b.WriteString(strings.Join([]string{r.txn + "\t", r.trade + "\t", r.kind + "\t", "goods", when, when, "\t", "\t", "\t", "\t",
			"159****5620\t", yuan(fen), yuan(fen), "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00\t", "0.00", r.refundID + "\t",
			"0.00", "0.00", ""}, ",") + "\n")
	}
	b.WriteString("#-----------------------------------------业务明细列表结束------------------------------------\n")
	fmt.Fprintf(&b, "#交易合计：%d笔，商家实收共%s元，商家优惠共0.00元\n", payCount, yuan(pays))
	fmt.Fprintf(&b, "#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共0.00元\n", refundCount, yuan(refunds))
	b.WriteString("#导出时间：[2026年12月01日 05:46:49]\n")
	text, err := simplifiedchinese.GBK.NewEncoder().String(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return tempFile(t, "alipay_业务明细.csv", text)
}

// csvFile writes paygw's generic bill.
func csvFile(t *testing.T, rows ...string) string {
	t.Helper()
	return tempFile(t, "bill.csv", "trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\n"+strings.Join(rows, "\n")+"\n")
}

// wechatRow is a WeChat SUCCESS row of 19.99 at 17:07:11 on the bill day, of appid and mchid.
func wechatRow(appid, mchid, txn, tradeNo string) string {
	return fmt.Sprintf("`2026-11-30 17:07:11,`%s,`%s,`0,`,`%s,`%s,`openid,`NATIVE,`SUCCESS,`OTHERS,`CNY,`19.99,`0.00,`0,`0,`0.00,`0.00,`,`,`goods,`,`0.00000,`0.60%%,`19.99,`0.00,`",
		appid, mchid, txn, tradeNo)
}

// untouched checks that nothing moved money: no order changed status, no refund, no anomaly, no
// journalled repair.
func untouched(t *testing.T, dsn string, statuses map[string]string) {
	t.Helper()
	for tn, want := range statuses {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = ? AND refunded_fen = 0`, tn, want); n != 1 {
			t.Errorf("order %s is no longer %s with nothing refunded", tn, want)
		}
	}
	for _, table := range []string{"refund", "anomaly", "notify_journal", "idempotent_record"} {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows: the bill moved something", table, n)
		}
	}
}

// Case 5: an Alipay bill whose own totals disagree with its lines (one invented payment line,
// 交易合计：0笔) is evidence that contradicts itself. It is stored and reported, repairs nothing
// (no apply, no refund, no anomaly), and the command exits 4 saying why.
func TestIssue20Case05UntrustedBillRepairsNothing(t *testing.T) {
	path, dsn := billSetup(t)
	at := billDay.Add(10 * time.Hour)
	waitPayOrder(t, dsn, "PINVENTED", 1000)
	paidOrder(t, dsn, "PAMOUNT", "PAID", "alipay", "2026113022001", 1000, at)
	paidOrder(t, dsn, "PCLOSED", "CLOSED", "", "", 1000, at)
	paidOrder(t, dsn, "PREFUND", "PAID", "alipay", "2026113022003", 1000, at)
	rows := []alipayRow{
		{txn: "2026113022000", trade: "PINVENTED", kind: "交易", fen: 1000, at: at}, // CHANNEL_ONLY: would be applied
		{txn: "2026113022001", trade: "PAMOUNT", kind: "交易", fen: 1500, at: at},   // AMOUNT_MISMATCH: would flag an anomaly
		{txn: "2026113022002", trade: "PCLOSED", kind: "交易", fen: 1000, at: at},   // STATUS_MISMATCH: would record PAID_AFTER_CLOSE
		{txn: "2026113022003", trade: "PREFUND", kind: "交易", fen: 1000, at: at},
		{txn: "2026113022003", trade: "PREFUND", kind: "退款", fen: 300, at: at, refundID: "R1"}, // REFUND_CHANNEL_ONLY: would refund
	}
	bill := alipayFile(t, billPID+"0156", billDay, rows, 0, 1) // 交易合计：0笔 beside four payment lines
	report := filepath.Join(t.TempDir(), "report.json")
	r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "alipay", "--date", "2026-11-30", "--file", bill,
		"--report", report)
	untouched(t, dsn, map[string]string{"PINVENTED": "WAIT_PAY", "PAMOUNT": "PAID", "PCLOSED": "CLOSED", "PREFUND": "PAID"})
	if r.code != 4 || !strings.Contains(r.stdout, "untrusted") || !strings.Contains(r.stdout, "交易合计 0笔, the detail has 4") {
		t.Fatalf("exit %d, want 4 saying why\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Stored and reported all the same: the run, with every discrepancy and why none was repaired.
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE trusted = 0 AND finished_at IS NOT NULL`); n != 1 {
		t.Fatalf("untrusted complete runs: %d, want 1", n)
	}
	for class, repair := range map[string]string{"CHANNEL_ONLY": "UNTRUSTED_BILL", "AMOUNT_MISMATCH": "UNTRUSTED_BILL",
		"STATUS_MISMATCH": "UNTRUSTED_BILL", "REFUND_CHANNEL_ONLY": "UNTRUSTED_BILL", "SUMMARY_MISMATCH": ""} {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_discrepancy WHERE class = ? AND repair = ?`, class, repair); n != 1 {
			t.Errorf("%s rows with repair %q: %d, want 1", class, repair, n)
		}
	}
	raw, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(raw), `"trusted":false`) || !strings.Contains(string(raw), `"untrusted":[`) {
		t.Fatalf("report %s (%v)", raw, err)
	}

	// The same bill with its totals right is trusted: it repairs (exit 3: the amount mismatch and
	// the closed order's payment remain for a person).
	fixed := alipayFile(t, billPID+"0156", billDay, rows, 4, 1)
	r = runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "alipay", "--date", "2026-11-30", "--file", fixed)
	if r.code != 3 || !strings.Contains(r.stdout, "trusted true") {
		t.Fatalf("consistent bill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PINVENTED' AND status = 'PAID'`); n != 1 {
		t.Fatal("the trusted bill did not repair the order")
	}
}

// Case 6: a bill of another day or another merchant is refused before anything is written:
// exit 1, one line naming the file, the line and the field, and no run, repair or row.
func TestIssue20Case06WrongDayOrMerchantIsRefused(t *testing.T) {
	path, dsn := billSetup(t)
	waitPayOrder(t, dsn, "PWRONG", 1999)
	at := billDay.Add(10 * time.Hour)
	early := at.AddDate(0, 0, -40)
	pay := func(when time.Time) []alipayRow {
		return []alipayRow{{txn: "2026113022009", trade: "PWRONG", kind: "交易", fen: 1999, at: when}}
	}
	cases := []struct {
		name, channel string
		args          []string
		file          string
		line, field   string
	}{
		{"csv lines 40 days before --date", "csv", []string{"--csv-channel", "alipay"},
			csvFile(t, "PWRONG,2026113022009,PAY,1999,CNY,"+early.Format(time.RFC3339)+","), "line 2", "time"},
		{"alipay lines 40 days before --date", "alipay", nil, alipayFile(t, billPID+"0156", billDay, pay(early), 1, 0), "line 6", "完成时间"},
		{"alipay bill of another day", "alipay", nil, alipayFile(t, billPID+"0156", billDay.AddDate(0, 0, -40), pay(early), 1, 0), "line 3", "#起始日期"},
		{"alipay bill of another account", "alipay", nil, alipayFile(t, "20889999999999990156", billDay, pay(at), 1, 0), "line 2", "#账号"},
		{"wechat line of another 商户号", "wechatpay", nil, wechatBill(t, 1, wechatRow(simulate.SandboxWeChatAppID, "1900009999", "4200000925202611304997714299", "PWRONG")),
			"line 2", "商户号"},
		{"wechat line of another appid", "wechatpay", nil, wechatBill(t, 1, wechatRow("wx9999999999999999", simulate.SandboxWeChatMchID, "4200000925202611304997714299", "PWRONG")),
			"line 2", "公众账号ID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"reconcile", "bill", "--config", path, "--channel", c.channel, "--date", "2026-11-30", "--file", c.file}, c.args...)
			r := runPaygw(t, nil, args...)
			msg := strings.TrimSpace(r.stderr)
			if r.code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, c.file) || !strings.Contains(msg, c.line+": "+c.field) ||
				!strings.Contains(msg, "refused") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the file, %s and %s", r.code, r.stderr, c.line, c.field)
			}
			t.Log(msg)
			for _, table := range []string{"recon_run", "recon_line", "recon_discrepancy"} {
				if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM `+table); n != 0 {
					t.Errorf("%s: %d rows written for a refused bill", table, n)
				}
			}
			untouched(t, dsn, map[string]string{"PWRONG": "WAIT_PAY"})
		})
	}
}

// Case 9: the command takes the bill lease serve's daily bills take. While another holds it, it
// says who and since when (exit 1) and writes nothing; runs started at once never meet in the
// database (no raw "Error 1062 Duplicate entry").
func TestIssue20Case09CommandTakesTheBillLease(t *testing.T) {
	path, dsn := billSetup(t)
	waitPayOrder(t, dsn, "PLEASE", 1999)
	bill := wechatBill(t, 1, wechatRow(simulate.SandboxWeChatAppID, simulate.SandboxWeChatMchID, "4200000925202611304997714292", "PLEASE"))
	args := []string{"reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30", "--file", bill}

	db := testenv.Open(t, dsn)
	ctx := t.Context()
	if err := db.EnsureLease(ctx, "reconcile_bill"); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.TakeLease(ctx, "reconcile_bill", "serve on replica-b:4242", time.Hour); err != nil || !ok {
		t.Fatalf("the other replica's lease: %v %v", ok, err)
	}
	r := runPaygw(t, nil, args...)
	msg := strings.TrimSpace(r.stderr)
	if r.code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, `"serve on replica-b:4242"`) || !strings.Contains(msg, "since 20") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the holder and since when", r.code, r.stderr)
	}
	t.Log(msg)
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run`); n != 0 {
		t.Fatalf("runs while the lease was held elsewhere: %d", n)
	}
	untouched(t, dsn, map[string]string{"PLEASE": "WAIT_PAY"})

	if err := db.ReleaseLease(ctx, "reconcile_bill", "serve on replica-b:4242"); err != nil {
		t.Fatal(err)
	}
	// Four at once: each runs alone or is told the lease is held; none fails in the database.
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runPaygw(t, nil, args...)
		}()
	}
	wg.Wait()
	ran := 0
	for _, r := range results {
		switch {
		case r.code == 0:
			ran++
		case r.code == 1 && strings.Contains(r.stderr, "lease is held by"):
		default:
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	}
	if ran == 0 {
		t.Fatal("no run took the lease")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE finished_at IS NOT NULL AND trusted = 1 AND line_count = 1`); n != ran {
		t.Fatalf("complete runs %d, want one per run that took the lease (%d)", n, ran)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PLEASE' AND status = 'PAID'`); n != 1 {
		t.Fatal("the runs did not repair the order")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM job_lease WHERE name = 'reconcile_bill' AND expires_at < NOW(3)`); n != 1 {
		t.Fatal("the command did not give the lease up")
	}
}

// Case 11: a generic csv bill run for Alipay is a run of its own, beside the Alipay bill's run of
// the day, not in its place, and its day is Alipay's (Beijing time), not UTC's.
func TestIssue20Case11CSVRunIsItsOwnOnTheChannelDay(t *testing.T) {
	path, dsn := billSetup(t)
	waitPayOrder(t, dsn, "PBOTH", 1999)
	// Paid through Alipay at 01:00 Beijing time on the bill day (17:00 UTC the day before), in no
	// bill: both runs of the day must find it missing.
	paidOrder(t, dsn, "PLOCAL", "PAID", "alipay", "2026113022555", 500, billDay.Add(time.Hour))
	at := billDay.Add(10 * time.Hour)
	alipay := alipayFile(t, billPID+"0156", billDay, []alipayRow{{txn: "2026113022100", trade: "PBOTH", kind: "交易", fen: 1999, at: at}}, 1, 0)
	r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "alipay", "--date", "2026-11-30", "--file", alipay)
	if r.code != 3 || !strings.Contains(r.stdout, "LOCAL_ONLY") {
		t.Fatalf("alipay bill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	csv := csvFile(t, "PBOTH,2026113022100,PAY,1999,CNY,"+at.Format(time.RFC3339)+",")
	r = runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "csv", "--csv-channel", "alipay", "--date", "2026-11-30", "--file", csv)
	if r.code != 3 || !strings.Contains(r.stdout, "LOCAL_ONLY") {
		t.Fatalf("csv bill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE channel = 'alipay' AND bill_date = '2026-11-30' AND finished_at IS NOT NULL`); n != 2 {
		t.Fatalf("complete alipay runs of the day: %d, want 2 (the csv run beside the bill's)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(DISTINCT run_id) FROM recon_discrepancy WHERE trade_no = 'PLOCAL' AND class = 'LOCAL_ONLY'`); n != 2 {
		t.Fatalf("runs that found PLOCAL missing: %d, want both (each cut at Beijing midnight)", n)
	}
	for _, source := range []string{"channel", "csv"} { // repository.SourceChannel, SourceCSV
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE channel = 'alipay' AND bill_date = '2026-11-30' AND source = ? AND status = 'complete'`, source); n != 1 {
			t.Errorf("complete %s runs of the day: %d, want 1", source, n)
		}
	}
}
