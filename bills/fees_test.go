package bills

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// fees is what a line states of its fee and net.
type fees struct {
	fee, base, net       int64
	feeStated, netStated bool
}

func feesOf(l Line) fees {
	return fees{fee: l.FeeFen, base: l.FeeBaseFen, net: l.NetFen, feeStated: l.FeeStated, netStated: l.NetStated}
}

func wantFees(tb testing.TB, lines []Line, want []fees) {
	tb.Helper()
	if len(lines) != len(want) {
		tb.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i := range want {
		if got := feesOf(lines[i]); got != want[i] {
			tb.Errorf("line %d (%s %s): fees %+v, want %+v", lines[i].No, lines[i].Kind, lines[i].ChannelTxnID, got, want[i])
		}
	}
}

// Alipay's sample lines state 服务费 0.00: a fee stated, of nothing. A fee charged reads negative
// in the 业务明细 (a flow out of the merchant's balance) and is positive in paygw's sign; a fee
// returned with a refund the other way round. The rate applies to 商家实收.
func TestAlipayFees(t *testing.T) {
	res := readClean(t, NewAlipayCSV(bytes.NewReader(gbk(t, alipaySample(t)))), 2)
	wantFees(t, res.lines, []fees{{fee: 0, base: 1, feeStated: true}, {fee: 0, base: 1, feeStated: true}})
	if res.sum.FeeStated {
		t.Errorf("the 合计 lines state no fee total: %+v", res.sum)
	}

	row := func(txn, trade, kind, amount, received, refundID, fee string) string {
		r := alipayRow(txn, trade, kind, "2024-05-01 09:00:00", amount, received, refundID)
		// The sample's row ends with 退款批次号/请求号, 服务费（元）, 分润（元）, 备注.
		i := strings.LastIndex(r, ",0.00,0.00,下单测试")
		return r[:i] + "," + fee + ",0.00,下单测试"
	}
	bill := alipayBill(alipayTestHeader, []string{
		row("2024050122001400001", "T1", "交易", "1000.00", "990.00", "", "-5.94"),
		row("2024050122001400001", "T1", "退款", "-250.50", "-250.50", "rq_1", "1.50"),
		row("2024050122001400002", "T2", "交易", "10.00", "10.00", "", ""),
		row("2024050122001400003", "T3", "交易", "10.00", "10.00", "", "-0.061"),
	}, "#交易合计：3笔，商家实收共1000.00元，商家优惠共10.00元", "#退款合计：1笔，商家实收退款共-250.50元，商家优惠退款共0.00元")
	res = readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, bill))), 100)
	wantFees(t, res.lines, []fees{{fee: 594, base: 99000, feeStated: true}, {fee: -150, base: 25050, feeStated: true}, {}})
	if len(res.bad) != 1 || !strings.Contains(res.bad[0].Reason, "服务费") {
		t.Fatalf("bad %v: want the fee of three decimals", res.bad)
	}
}

// WeChat's own lines, from bills captured from WeChat Pay (binarywang/WxJava's
// WxPayBillResultTest, 2019): 6.00 at 0.60% carries 手续费 0.04000 (rounded to the fen), and a
// REFUND bill's 手续费总金额 is negative (the fees returned).
func TestWeChatFees(t *testing.T) {
	sample, err := os.ReadFile("testdata/wechat_sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := readClean(t, NewWeChat(bytes.NewReader(sample)), 1)
	wantFees(t, res.lines, []fees{{fee: 0, base: 1, feeStated: true}})
	if !res.sum.FeeStated || res.sum.FeeTotalFen != 0 {
		t.Errorf("summary %+v: want 手续费总金额 0 stated", res.sum)
	}

	const header = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
	all := strings.Join([]string{header,
		"`2019-07-25 08:35:41,`WWWW,`XXXXXXXX,`0,`,`XXXXXXXXXXXXX,`XXXXXXXXXX,`XXXXXXXXXXX,`JSAPI,`SUCCESS,`PSBC_DEBIT,`CNY,`6.00,`0.00,`0,`0,`0.00,`0.00,`,`,`XXXXXX,`XXXXXXX,`0.04000,`0.60%,`6.00,`0.00,`",
		// A coupon WeChat does not settle: the rate applies to 应结订单金额, 5.00.
		"`2019-07-25 09:00:00,`WWWW,`XXXXXXXX,`0,`,`XXXXXXXXXXXX2,`XXXXXXXXX2,`XXXXXXXXXXX,`JSAPI,`SUCCESS,`PSBC_DEBIT,`CNY,`5.00,`1.00,`0,`0,`0.00,`0.00,`,`,`XXXXXX,`XXXXXXX,`0.03000,`0.60%,`6.00,`0.00,`",
		"`2019-07-25 10:00:00,`WWWW,`XXXXXXXX,`0,`,`XXXXXXXXXXXXX,`XXXXXXXXXX,`XXXXXXXXXXX,`JSAPI,`REFUND,`PSBC_DEBIT,`CNY,`0.00,`0.00,`50000001,`R1,`6.00,`0.00,`ORIGINAL,`SUCCESS,`XXXXXX,`XXXXXXX,`-0.04000,`0.60%,`0.00,`6.00,`",
		"`2019-07-25 11:00:00,`WWWW,`XXXXXXXX,`0,`,`XXXXXXXXXXXX3,`XXXXXXXXX3,`XXXXXXXXXXX,`MICROPAY,`REVOKED,`PSBC_DEBIT,`CNY,`0.00,`0.00,`0,`0,`0.00,`0.00,`,`,`XXXXXX,`XXXXXXX,`0.01000,`0.60%,`0.00,`0.00,`",
		// Sub-fen fees are not what WeChat writes: a bad line, not a guess.
		"`2019-07-25 12:00:00,`WWWW,`XXXXXXXX,`0,`,`XXXXXXXXXXXX4,`XXXXXXXXX4,`XXXXXXXXXXX,`JSAPI,`SUCCESS,`PSBC_DEBIT,`CNY,`9.90,`0.00,`0,`0,`0.00,`0.00,`,`,`XXXXXX,`XXXXXXX,`0.05940,`0.60%,`9.90,`0.00,`",
		"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额",
		"`5,`20.90,`6.00,`0.00,`-0.02000,`21.90,`6.00",
	}, "\n") + "\n"
	res = readAll(t, NewWeChat(strings.NewReader(all)), 100)
	if res.err != nil || len(res.bad) != 1 || !strings.Contains(res.bad[0].Reason, "手续费") {
		t.Fatalf("err %v, bad %v: want the sub-fen fee bad", res.err, res.bad)
	}
	wantFees(t, res.lines, []fees{{fee: 4, base: 600, feeStated: true}, {fee: 3, base: 500, feeStated: true}, {fee: -4, base: 600, feeStated: true}})
	if s := res.sum; !s.FeeStated || s.FeeTotalFen != -2 || s.SkippedFeeFen != 1 {
		t.Errorf("summary %+v: want 手续费总金额 -2 fen, 1 fen on the skipped row", s)
	}
}

// UnionPay's 商户手续费: D debits the merchant, C credits it. 清算净额 is not read, whatever it holds.
func TestUnionPayFees(t *testing.T) {
	pay := zmRow("01", "0101000001", "10000", "512501010000010002", "T2", "")
	pay[zmFee], pay[32] = "D000000000060", "C000000009940"
	refund := zmRow("04", "0101100000", "10000", "512501011000000003", "T2", "512501010000010002")
	refund[zmFee], refund[32] = "C000000000060", "0000000009940"
	none := zmRow("01", "0101000002", "500", "512501010000020002", "T3", "")
	bad := zmRow("01", "0101000003", "500", "512501010000030002", "T4", "")
	bad[zmFee] = "+000000000060"
	res := readAll(t, NewUnionPayZM(bytes.NewReader(zmFile(t, "\r\n", pay, refund, none, bad)), time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime)), 100)
	if res.err != nil || len(res.bad) != 1 || !strings.Contains(res.bad[0].Reason, "商户手续费") {
		t.Fatalf("err %v, bad %v", res.err, res.bad)
	}
	wantFees(t, res.lines, []fees{
		{fee: 60, base: 10000, feeStated: true},
		{fee: -60, base: 10000, feeStated: true},
		{base: 500},
	})
}

// Stripe's fee and net columns, in the currency's minor units: a JPY fee of 36 is 36.
func TestStripeFees(t *testing.T) {
	res := readClean(t, NewStripe(strings.NewReader(stripeReport)), 5)
	wantFees(t, res.lines, []fees{
		{fee: 59, base: 1000, net: 941, feeStated: true, netStated: true},
		{fee: 36, base: 1000, net: 964, feeStated: true, netStated: true},
		{fee: 0, base: 250, net: -250, feeStated: true, netStated: true},
		{fee: 0, base: 1234, net: 1234, feeStated: true, netStated: true},
		{fee: 0, base: 1000, net: 1000, feeStated: true, netStated: true},
	})
	bad := "balance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,payment_intent_id,payment_metadata[trade_no],source_id\n" +
		"txn_1,2024-05-01 10:00:00,usd,10.00,0.595,9.405,charge,pi_1,T1,ch_1\n" +
		"txn_2,2024-05-01 10:00:00,usd,10.00,,,charge,pi_2,T2,ch_2\n"
	res = readAll(t, NewStripe(strings.NewReader(bad)), 100)
	if len(res.bad) != 1 || !strings.Contains(res.bad[0].Reason, "fee") {
		t.Fatalf("bad %v: want the fee of three decimals", res.bad)
	}
	wantFees(t, res.lines, []fees{{base: 1000}})
}

// The generic CSV's optional fee_fen.
func TestCSVFees(t *testing.T) {
	bill := "trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id,fee_fen\n" +
		"T1,ch_1,PAY,1999,CNY,2024-05-01T10:20:30+08:00,,12\n" +
		"T1,ch_1,REFUND,500,CNY,2024-05-01T12:00:00+08:00,rf_77,-3\n" +
		"T2,ch_2,PAY,100,CNY,2024-05-01T12:00:00+08:00,,\n" +
		"T3,ch_3,PAY,100,CNY,2024-05-01T12:00:00+08:00,,1.5\n"
	res := readAll(t, NewCSV(strings.NewReader(bill)), 100)
	if res.err != nil || len(res.bad) != 1 || !strings.Contains(res.bad[0].Reason, "fee_fen") {
		t.Fatalf("err %v, bad %v", res.err, res.bad)
	}
	wantFees(t, res.lines, []fees{{fee: 12, base: 1999, feeStated: true}, {fee: -3, base: 500, feeStated: true}, {}})
}
