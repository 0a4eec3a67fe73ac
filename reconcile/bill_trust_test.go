package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

var cst = bills.ChinaTime

// The pid the Alipay bills below are of.
const testPID = "2088000000000001"

// alipayText is an Alipay 业务明细 file (GBK) of one payment: account in #账号 ("" leaves the line
// out), the period of day, the payment at at, and its totals right.
func alipayText(t testing.TB, account string, day time.Time, tradeNo, txn string, fen int64, at time.Time) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#支付宝业务明细查询\n")
	if account != "" {
		b.WriteString("#账号：[" + account + "]\n")
	}
	b.WriteString("#起始日期：[" + day.Format("2006年01月02日") + " 00:00:00]   终止日期：[" + day.AddDate(0, 0, 1).Format("2006年01月02日") + " 00:00:00]\n")
	b.WriteString("#-----------------------------------------业务明细列表----------------------------------------\n")
	b.WriteString("支付宝交易号,商户订单号,业务类型,完成时间,订单金额（元）,商家实收（元）,退款批次号/请求号\n")
	y := fmt.Sprintf("%d.%02d", fen/100, fen%100)
	fmt.Fprintf(&b, "%s\t,%s\t,交易\t,%s,%s,%s,\t\n", txn, tradeNo, at.In(cst).Format(time.DateTime), y, y)
	b.WriteString("#-----------------------------------------业务明细列表结束------------------------------------\n")
	fmt.Fprintf(&b, "#交易合计：1笔，商家实收共%s元，商家优惠共0.00元\n#退款合计：0笔，商家实收退款共0.00元，商家优惠退款共0.00元\n", y)
	text, err := simplifiedchinese.GBK.NewEncoder().String(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// wechatText is a WeChat trade bill of the rows given (each "time,status,mchid,appid,txn,trade,
// order fen,refund id,refund fen"), its summary right.
func wechatText(rows ...[9]string) string {
	var b strings.Builder
	b.WriteString("交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额," +
		"微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\n")
	var order, refund int64
	y := func(s string) string {
		var fen int64
		fmt.Sscan(s, &fen)
		return fmt.Sprintf("%d.%02d", fen/100, fen%100)
	}
	for _, r := range rows {
		var o, f int64
		fmt.Sscan(r[6], &o)
		fmt.Sscan(r[8], &f)
		order, refund = order+o, refund+f
		cells := []string{r[0], r[3], r[2], "0", "", r[4], r[5], "openid", "NATIVE", r[1], "OTHERS", "CNY", y(r[6]), "0.00", r[7], "",
			y(r[8]), "0.00", "", "", "goods", "", "0.00000", "0.60%", y(r[6]), y(r[8]), ""}
		b.WriteString("`" + strings.Join(cells, ",`") + "\n")
	}
	b.WriteString("总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\n")
	fmt.Fprintf(&b, "`%d,`%s,`%s,`0.00,`0.00000,`%s,`%s\n", len(rows), y(fmt.Sprint(order)), y(fmt.Sprint(refund)),
		y(fmt.Sprint(order)), y(fmt.Sprint(refund)))
	return b.String()
}

// zmWidths are the ZM file's field widths (package bills, PROTOCOLS.md).
var zmWidths = [...]int{3, 11, 11, 6, 10, 19, 12, 4, 2, 21, 2, 32, 2, 6, 10, 13, 13, 4, 15, 2, 2, 6, 2, 4, 32, 1, 21, 15, 1, 15, 32, 13, 13, 8, 32, 13, 13, 12, 2, 1, 32, 98}

// zmText is a ZM file of one consume (txnType 01) of fen at at, by merchant merID.
func zmText(tradeNo, queryID, merID string, fen int64, at time.Time) string {
	set := map[int]string{4: at.In(cst).Format("0102150405"), 6: fmt.Sprintf("%012d", fen), 9: queryID, 11: tradeNo, 19: "01", 27: merID}
	var b bytes.Buffer
	for i, w := range zmWidths {
		b.WriteString(set[i] + strings.Repeat(" ", w-len(set[i])) + " ")
	}
	return b.String() + "\r\n"
}

// A bill is judged before it repairs: refused when it is another merchant's or another day's
// (nothing of the run is kept), untrusted when whose it is cannot be checked (stored, nothing
// repaired), trusted within each channel's tolerance of its day.
func TestBillTrustRules(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, cst)
	wechatID := reconcile.Identity{Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}}
	mch, app := simulate.SandboxWeChatMchID, simulate.SandboxWeChatAppID
	const (
		trusted   = "trusted"
		untrusted = "untrusted"
		refused   = "refused"
	)
	cases := []struct {
		name    string
		channel string
		bill    func(day time.Time, tradeNo string) bills.Reader
		cfg     reconcile.BillConfig
		want    string
		detail  string // in the refusal, or the untrusted reason
	}{
		{"alipay, seller_id set", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, testPID+"0156", day, tn, "A"+tn, 100, day.Add(9*time.Hour))))
		}, reconcile.BillConfig{Identity: reconcile.Identity{Account: testPID}}, trusted, ""},
		{"alipay file, no seller_id to check #账号 against", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, testPID+"0156", day, tn, "A"+tn, 100, day.Add(9*time.Hour))))
		}, reconcile.BillConfig{}, untrusted, "channels.alipay.seller_id is not set"},
		{"alipay downloaded, no seller_id", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, testPID+"0156", day, tn, "A"+tn, 100, day.Add(9*time.Hour))))
		}, reconcile.BillConfig{Downloaded: true}, trusted, ""},
		{"alipay without #账号", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, "", day, tn, "A"+tn, 100, day.Add(9*time.Hour))))
		}, reconcile.BillConfig{Identity: reconcile.Identity{Account: testPID}, Downloaded: true}, untrusted, "no #账号"},
		{"alipay line at 23:55 the day before", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, testPID+"0156", day, tn, "A"+tn, 100, day.Add(-5*time.Minute))))
		}, reconcile.BillConfig{Identity: reconcile.Identity{Account: testPID}}, trusted, ""},
		{"alipay line an hour before the day", "alipay", func(day time.Time, tn string) bills.Reader {
			return bills.NewAlipayCSV(strings.NewReader(alipayText(t, testPID+"0156", day, tn, "A"+tn, 100, day.Add(-time.Hour))))
		}, reconcile.BillConfig{Identity: reconcile.Identity{Account: testPID}}, refused, "line 6: 完成时间"},
		{"wechat", "wechatpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewWeChat(strings.NewReader(wechatText([9]string{day.Add(time.Hour).Format(time.DateTime), "SUCCESS", mch, app, "W" + tn, tn, "100", "", "0"})))
		}, reconcile.BillConfig{Identity: wechatID}, trusted, ""},
		{"wechat row without 商户号", "wechatpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewWeChat(strings.NewReader(wechatText([9]string{day.Add(time.Hour).Format(time.DateTime), "SUCCESS", "", app, "W" + tn, tn, "100", "", "0"})))
		}, reconcile.BillConfig{Identity: wechatID, Downloaded: true}, untrusted, "商户号 empty"},
		{"wechat file, no mch_id to check against", "wechatpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewWeChat(strings.NewReader(wechatText([9]string{day.Add(time.Hour).Format(time.DateTime), "SUCCESS", mch, app, "W" + tn, tn, "100", "", "0"})))
		}, reconcile.BillConfig{Identity: reconcile.Identity{AppIDs: wechatID.AppIDs}}, untrusted, "the configuration names no 商户号"},
		{"wechat refund dated by its payment 200 days before", "wechatpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewWeChat(strings.NewReader(wechatText(
				[9]string{day.Add(time.Hour).Format(time.DateTime), "SUCCESS", mch, app, "W" + tn, tn, "100", "", "0"},
				[9]string{day.AddDate(0, 0, -200).Format(time.DateTime), "REFUND", mch, app, "WOLD" + tn, "OLD" + tn, "0", "R" + tn, "50"})))
		}, reconcile.BillConfig{Identity: wechatID}, trusted, ""},
		{"wechat payment the day before", "wechatpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewWeChat(strings.NewReader(wechatText([9]string{day.Add(-20 * time.Hour).Format(time.DateTime), "SUCCESS", mch, app, "W" + tn, tn, "100", "", "0"})))
		}, reconcile.BillConfig{Identity: wechatID}, refused, "line 2: 交易时间"},
		{"unionpay line from the settlement evening before", "unionpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewUnionPayZM(strings.NewReader(zmText(tn, "U"+tn[11:], simulate.SandboxUnionPayMerID, 100, day.Add(-30*time.Minute))), day)
		}, reconcile.BillConfig{Identity: reconcile.Identity{Merchant: simulate.SandboxUnionPayMerID}}, trusted, ""},
		{"unionpay line of another 商户代码", "unionpay", func(day time.Time, tn string) bills.Reader {
			return bills.NewUnionPayZM(strings.NewReader(zmText(tn, "U"+tn[11:], "777290058119999", 100, day.Add(time.Hour))), day)
		}, reconcile.BillConfig{Identity: reconcile.Identity{Merchant: simulate.SandboxUnionPayMerID}}, refused, "line 1: 商户代码"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := w.in(t)
			day := base.AddDate(0, 0, i)
			tn := w.order(c.channel, 100)
			runs := w.count(`SELECT COUNT(*) FROM recon_run`)
			c.cfg.Location = cst
			rep, err := w.job.MatchBill(ctx, c.channel, day, c.bill(day, tn), c.cfg, nil)
			var refusal *reconcile.RefusedError
			switch c.want {
			case refused:
				if !errors.As(err, &refusal) || !strings.Contains(err.Error(), c.detail) {
					t.Fatalf("%v, want a refusal at %s", err, c.detail)
				}
				if n := w.count(`SELECT COUNT(*) FROM recon_run`); n != runs {
					t.Fatalf("runs %d, want %d: a refused bill keeps nothing", n, runs)
				}
			case untrusted:
				if err != nil || rep.Trusted || len(rep.Untrusted) == 0 || !strings.Contains(strings.Join(rep.Untrusted, "; "), c.detail) {
					t.Fatalf("%v, trusted %v, reasons %q; want untrusted: %s", err, rep.Trusted, rep.Untrusted, c.detail)
				}
				if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy WHERE run_id = ? AND class = 'UNVERIFIED'`, rep.RunID); n != 1 {
					t.Fatalf("UNVERIFIED rows %d, want 1", n)
				}
				if n := w.count(`SELECT COUNT(*) FROM recon_discrepancy WHERE run_id = ? AND class = 'CHANNEL_ONLY' AND repair = ?`,
					rep.RunID, reconcile.RepairUntrusted); n != 1 {
					t.Fatalf("CHANNEL_ONLY rows left unrepaired %d, want 1", n)
				}
			case trusted:
				if err != nil || !rep.Trusted {
					t.Fatalf("%v, trusted %v, reasons %q", err, rep.Trusted, rep.Untrusted)
				}
			}
			want := payment.OrderWaitPay
			if c.want == trusted {
				want = payment.OrderPaid
			}
			if st := w.status(tn); st != want {
				t.Fatalf("the order is %s, want %s", st, want)
			}
		})
	}
}

// A bill refused part-way (its line 1300 is dated 40 days before the day, 1,000 lines being
// staged already) keeps nothing: no run, no line, no row.
func TestRefusedLateInTheBillKeepsNothing(t *testing.T) {
	w := newWorld(t)
	day := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString("trade_no,channel_txn_id,kind,amount_fen,currency,time\n")
	for no := 2; no <= 1400; no++ {
		at := day.Add(time.Hour)
		if no == 1300 {
			at = at.AddDate(0, 0, -40)
		}
		fmt.Fprintf(&b, "NOTOURS%d,X%d,PAY,100,CNY,%s\n", no, no, at.Format(time.RFC3339))
	}
	_, err := w.job.MatchBill(context.Background(), "alipay", day, bills.NewCSV(strings.NewReader(b.String())),
		reconcile.BillConfig{Location: time.UTC, Source: repository.SourceCSV}, nil)
	var refusal *reconcile.RefusedError
	if !errors.As(err, &refusal) || refusal.Line != 1300 || refusal.Field != "time" {
		t.Fatalf("%v, want a refusal at line 1300, time", err)
	}
	for _, table := range []string{"recon_run", "recon_line", "recon_discrepancy"} {
		if n := w.count(`SELECT COUNT(*) FROM ` + table); n != 0 {
			t.Errorf("%s: %d rows", table, n)
		}
	}
}

// An untrusted bill is no evidence for another day: the next day's untrusted bill does not
// settle the day's PENDING payment, nor does a later run of the day take it for the next bill.
func TestUntrustedBillIsNoEvidence(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	now := time.Now().In(cst)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, cst).AddDate(0, 0, -1)
	next := day.AddDate(0, 0, 1)
	late := w.paidOrder("L1", 100, next.Add(-time.Minute))
	cfg := reconcile.BillConfig{Location: cst, Identity: reconcile.Identity{Account: testPID}}
	pending := func() int {
		t.Helper()
		r, err := w.db.RunOf(ctx, "alipay", repository.SourceChannel, day)
		if err != nil {
			t.Fatal(err)
		}
		return w.count(`SELECT COUNT(*) FROM recon_discrepancy WHERE run_id = ? AND channel_txn_id = 'L1' AND class = 'PENDING'`, r.ID)
	}
	other := w.bareOrder(100)
	dayBill := alipayText(t, testPID+"0156", day, other, "O1", 100, day.Add(9*time.Hour))
	if _, err := w.job.MatchBill(ctx, "alipay", day, bills.NewAlipayCSV(strings.NewReader(dayBill)), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if pending() != 1 {
		t.Fatal("the late payment is not PENDING after its day's bill")
	}
	// The next day's bill shows L1, but its totals claim two payments: untrusted.
	nextBill := strings.Replace(alipayText(t, testPID+"0156", next, late, "L1", 100, next.Add(time.Minute)), "1\xb1\xca", "2\xb1\xca", 1)
	rep, err := w.job.MatchBill(ctx, "alipay", next, bills.NewAlipayCSV(strings.NewReader(nextBill)), cfg, nil)
	if err != nil || rep.Trusted {
		t.Fatalf("the next day: %v, trusted %v (summary %q)", err, rep.Trusted, rep.SummaryMismatch)
	}
	if pending() != 1 {
		t.Fatal("an untrusted bill settled the day before")
	}
	if _, err := w.job.MatchBill(ctx, "alipay", day, bills.NewAlipayCSV(strings.NewReader(dayBill)), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if pending() != 1 {
		t.Fatal("the day run again took the untrusted next bill for evidence")
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_line WHERE run_id = ?`, rep.RunID); n != 0 {
		t.Fatalf("the untrusted run kept %d staged lines", n)
	}
}

// The bill lease says who holds it and since when, and is free again once released.
func TestBillLeaseSaysWhoAndSince(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	held, release, err := w.job.HoldBillLease(ctx, "serve on a:1")
	if err != nil {
		t.Fatal(err)
	}
	if held.Err() != nil {
		t.Fatal("the lease's context ended at once")
	}
	_, _, err = w.job.HoldBillLease(ctx, "reconcile bill on b:2")
	var busy *lease.HeldError
	if !errors.As(err, &busy) || busy.Holder != "serve on a:1" || time.Since(busy.Since) > time.Minute || busy.Until.Before(time.Now()) {
		t.Fatalf("%v (%+v), want held by serve on a:1 since just now", err, busy)
	}
	// Taken again by its holder (a renewal), since stays.
	if ok, err := w.db.TakeLease(ctx, lease.ReconcileBill, "serve on a:1", time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	_, _, err = w.job.HoldBillLease(ctx, "reconcile bill on b:2")
	var again *lease.HeldError
	if !errors.As(err, &again) || !again.Since.Equal(busy.Since) {
		t.Fatalf("after a renewal: %v, want since %v", err, busy.Since)
	}
	release()
	if held.Err() == nil {
		t.Fatal("release left the lease's context running")
	}
	_, release2, err := w.job.HoldBillLease(ctx, "reconcile bill on b:2")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}
