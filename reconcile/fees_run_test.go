package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// wechatFeeRow is a WeChat trade bill row with its 手续费: a SUCCESS of fen, or a REFUND of fen
// under refundID, at at.
type wechatFeeRow struct {
	status, txn, trade, refundID string
	fen, fee                     int64
	at                           time.Time
}

// wechatFeeBill is a WeChat trade bill of rows, its summary right but for its fee total, which
// is summaryFee (in fen).
func wechatFeeBill(rows []wechatFeeRow, summaryFee int64) string {
	y := func(fen int64) string {
		sign := ""
		if fen < 0 {
			sign, fen = "-", -fen
		}
		return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
	}
	var b strings.Builder
	b.WriteString("交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额," +
		"微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\n")
	var order, refund int64
	for _, r := range rows {
		o, f := r.fen, int64(0)
		if r.status == "REFUND" {
			o, f = 0, r.fen
		}
		order, refund = order+o, refund+f
		cells := []string{r.at.In(bills.ChinaTime).Format(time.DateTime), simulate.SandboxWeChatAppID, simulate.SandboxWeChatMchID, "0", "",
			r.txn, r.trade, "openid", "NATIVE", r.status, "OTHERS", "CNY", y(o), "0.00", r.refundID, "", y(f), "0.00", "", "", "goods", "",
			y(r.fee) + "000", "0.60%", y(o), y(f), ""}
		b.WriteString("`" + strings.Join(cells, ",`") + "\n")
	}
	b.WriteString("总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\n")
	fmt.Fprintf(&b, "`%d,`%s,`%s,`0.00,`%s000,`%s,`%s\n", len(rows), y(order), y(refund), y(summaryFee), y(order), y(refund))
	return b.String()
}

// A run keeps the bill's own totals and checks its fees: a bill whose fees agree with the rate
// and its summary has no FEE_MISMATCH; a line's fee off the rate, or a summary fee total off the
// lines, is one FEE_MISMATCH row each, which repairs nothing, moves no money and leaves the bill
// trusted. Without a rate configured, only the summary is checked.
func TestBillFees(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	day := time.Now().In(bills.ChinaTime).AddDate(0, 0, -5)
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, bills.ChinaTime)
	at := day.Add(10 * time.Hour)

	// Two payments (10.00 and 6.00: 0.06 and 0.04 at 0.6%) and a refund of 2.50 of the first,
	// all known to paygw: every line matches.
	a, b := w.order("wechatpay", 1000), w.order("wechatpay", 600)
	for _, p := range []struct {
		trade, txn string
		fen        int64
	}{{a, "4200000001", 1000}, {b, "4200000002", 600}} {
		w.apply(payment.Event{Channel: "wechatpay", NotifyID: "n-" + p.txn, TradeNo: p.trade, ChannelTxnID: p.txn, Kind: payment.KindPaid,
			Status: "SUCCESS", AmountFen: p.fen, Currency: "CNY", PaidAt: at, Raw: []byte(p.txn)}, payment.OutcomeApplied)
	}
	w.refund("wechatpay", a, "4200000001", "50300001", 250, false, payment.OutcomeRefunded)
	rows := func(feeB int64) []wechatFeeRow {
		return []wechatFeeRow{
			{status: "SUCCESS", txn: "4200000001", trade: a, fen: 1000, fee: 6, at: at},
			{status: "SUCCESS", txn: "4200000002", trade: b, fen: 600, fee: feeB, at: at.Add(time.Minute)},
			{status: "REFUND", txn: "4200000001", trade: a, refundID: "50300001", fen: 250, fee: -2, at: at.Add(time.Hour)},
		}
	}
	rate := reconcile.FeeRate{PPM: 6000, Set: true}
	id := reconcile.Identity{Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}}
	anomalies := w.count(`SELECT COUNT(*) FROM anomaly`)

	type finding struct {
		txn        string
		bill, want int64
		repair     string
	}
	cases := []struct {
		name       string
		feeB, sum  int64 // b's fee, the summary's fee total
		rate       reconcile.FeeRate
		fees       int64 // the lines' fees, summed
		mismatches []finding
	}{
		{name: "fees agree", feeB: 4, sum: 8, rate: rate, fees: 8},
		{name: "a fee off the rate", feeB: 5, sum: 9, rate: rate, fees: 9, mismatches: []finding{{txn: "4200000002", bill: 5, want: 4}}},
		{name: "no rate: not checked", feeB: 5, sum: 9, fees: 9},
		{name: "the summary off the lines", feeB: 4, sum: 10, rate: rate, fees: 8, mismatches: []finding{{bill: 10, want: 8}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := w.in(t)
			bill := wechatFeeBill(rows(c.feeB), c.sum)
			rep, err := w.job.MatchBill(ctx, "wechatpay", day, bills.NewWeChat(strings.NewReader(bill)),
				reconcile.BillConfig{Location: bills.ChinaTime, Identity: id, FeeRate: c.rate}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantCounts(t, c.name, rep, map[string]int{reconcile.ClassMatched: 2, reconcile.ClassRefundMatched: 1,
				reconcile.ClassFeeMismatch: len(c.mismatches), reconcile.ClassBadLine: 0})
			if !rep.Trusted || rep.Settled() != (len(c.mismatches) == 0) {
				t.Errorf("trusted %v (%v), settled %v: want trusted, settled without a mismatch", rep.Trusted, rep.Untrusted, rep.Settled())
			}
			var got []finding
			if err := w.job.Discrepancies(ctx, rep.RunID, func(d reconcile.Discrepancy) error {
				if !d.Found { // an earlier case's finding this run no longer makes: gone, as its bill is trusted
					if d.Status != repository.StatusGone {
						t.Errorf("%s of an earlier run not found again: status %s, want %s", d.Class, d.Status, repository.StatusGone)
					}
					return nil
				}
				if d.Class != reconcile.ClassFeeMismatch {
					t.Errorf("a %s row", d.Class)
					return nil
				}
				got = append(got, finding{txn: d.ChannelTxnID, bill: *d.BillAmountFen, want: *d.LocalAmountFen, repair: d.Repair})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.mismatches) {
				t.Errorf("FEE_MISMATCH rows %+v, want %+v", got, c.mismatches)
			}

			totals, err := w.db.RunTotals(ctx, []int64{rep.RunID})
			if err != nil {
				t.Fatal(err)
			}
			want := repository.RunTotal{RunID: rep.RunID, Currency: "CNY", PayCount: 2, RefundCount: 1, GrossFen: 1600, RefundFen: 250,
				FeeFen: c.fees, FeeLines: 3, NetFen: 1600 - 250 - c.fees, SummaryFeeFen: sql.NullInt64{Int64: c.sum, Valid: true}}
			if !reflect.DeepEqual(totals[rep.RunID], []repository.RunTotal{want}) {
				t.Errorf("totals %+v, want %+v", totals[rep.RunID], want)
			}

			// No money moved: the orders, the refund ledger and the anomalies are as they were.
			if w.status(a) != payment.OrderPaid || w.status(b) != payment.OrderPaid || w.refunded(a) != 250 || w.refunded(b) != 0 {
				t.Errorf("orders moved: %s %s, refunded %d %d", w.status(a), w.status(b), w.refunded(a), w.refunded(b))
			}
			if n := w.count(`SELECT COUNT(*) FROM refund`); n != 1 {
				t.Errorf("%d refunds, want 1", n)
			}
			if n := w.count(`SELECT COUNT(*) FROM anomaly`); n != anomalies {
				t.Errorf("%d anomalies, want %d", n, anomalies)
			}
		})
	}
}

// A Stripe line states its net: one whose net is not its gross less its fee is a FEE_MISMATCH
// (key fee:net:...). Totals are kept per currency, with the lines' stated net.
func TestBillStripeNet(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	day := time.Now().UTC().AddDate(0, 0, -5).Truncate(24 * time.Hour)
	ts := day.Add(10 * time.Hour).Format(time.DateTime)
	report := strings.Join([]string{
		"balance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,payment_intent_id,payment_metadata[trade_no],source_id",
		"txn_1," + ts + ",usd,10.00,0.59,9.41,charge,pi_1,NOTOURS1,ch_1",
		"txn_2," + ts + ",usd,-2.50,0.00,-2.50,refund,pi_1,NOTOURS1,re_2",
		"txn_3," + ts + ",usd,20.00,0.88,19.00,charge,pi_3,NOTOURS3,ch_3", // 20.00 - 0.88 is 19.12
		"txn_4," + ts + ",jpy,1000,36,964,charge,pi_4,NOTOURS4,ch_4",
	}, "\n") + "\n"
	rep, err := w.job.MatchBill(ctx, "stripe", day, bills.NewStripe(strings.NewReader(report)), reconcile.BillConfig{Location: time.UTC}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, "stripe", rep, map[string]int{reconcile.ClassFeeMismatch: 1, reconcile.ClassUnknownOrder: 3})
	if !rep.Trusted {
		t.Errorf("untrusted: %v", rep.Untrusted)
	}
	rows, err := w.db.Discrepancies(ctx, rep.RunID, reconcile.ClassFeeMismatch, 0, 10)
	if err != nil || len(rows) != 1 {
		t.Fatalf("FEE_MISMATCH rows %+v, %v", rows, err)
	}
	if r := rows[0]; r.LineKey != "fee:net:pay:pi_3" || r.BillAmountFen.Int64 != 1900 || r.LocalAmountFen.Int64 != 1912 || r.Repair != "" {
		t.Errorf("row %+v", r)
	}
	totals, err := w.db.RunTotals(ctx, []int64{rep.RunID})
	if err != nil {
		t.Fatal(err)
	}
	stated := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	want := []repository.RunTotal{
		{RunID: rep.RunID, Currency: "JPY", PayCount: 1, GrossFen: 1000, FeeFen: 36, FeeLines: 1, NetFen: 964, StatedNetFen: stated(964)},
		{RunID: rep.RunID, Currency: "USD", PayCount: 2, RefundCount: 1, GrossFen: 3000, RefundFen: 250, FeeFen: 147, FeeLines: 3,
			NetFen: 3000 - 250 - 147, StatedNetFen: stated(941 - 250 + 1900)},
	}
	if !reflect.DeepEqual(totals[rep.RunID], want) {
		t.Errorf("totals\n got %+v\nwant %+v", totals[rep.RunID], want)
	}
}
