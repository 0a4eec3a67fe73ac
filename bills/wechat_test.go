package bills

import (
	"bytes"
	"compress/gzip"
	"os"
	"strings"
	"testing"
)

const wechatTestHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"

const wechatSummaryHeader = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"

// wechatBill is a consistent ALL bill: two payments (one with a comma in its product name), a
// refund, a revoked micropay.
func wechatBill(eol string) string {
	return strings.Join([]string{
		wechatTestHeader,
		"`2024-05-01 00:00:01,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000001,`T1,`oUser,`NATIVE,`SUCCESS,`OTHERS,`CNY,`1000.00,`0.00,`0,`0,`0.00,`0.00,`,`,`Tea, green,`,`6.00000,`0.60%,`1000.00,`0.00,`",
		"`2024-05-01 10:00:00,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000002,`T2,`oUser,`JSAPI,`SUCCESS,`OTHERS,`CNY,`0.01,`0.00,`0,`0,`0.00,`0.00,`,`,`Tea,`,`0.00000,`0.60%,`0.01,`0.00,`",
		"`2024-05-01 11:00:00,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000001,`T1,`oUser,`NATIVE,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`50300000001,`R1,`250.50,`0.00,`ORIGINAL,`SUCCESS,`Tea,`,`-1.50000,`0.60%,`0.00,`250.50,`",
		"`2024-05-01 12:00:00,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000003,`T3,`oUser,`MICROPAY,`REVOKED,`OTHERS,`CNY,`0.00,`0.00,`0,`0,`0.00,`0.00,`,`,`Tea,`,`0.00000,`0.60%,`0.00,`0.00,`",
		wechatSummaryHeader,
		"`4,`1000.01,`250.50,`0.00,`4.50000,`1000.01,`250.50",
	}, eol) + eol
}

func TestWeChatSample(t *testing.T) {
	b, err := os.ReadFile("testdata/wechat_sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := readClean(t, NewWeChat(bytes.NewReader(b)), 1)
	want := Line{No: 2, Kind: KindPay, TradeNo: "S20210128170702357723", ChannelTxnID: "4200000925202101284997714292", AmountFen: 1, Currency: "CNY", Time: cst("2021-01-28 17:07:11")}
	if !linesEqual(res.lines[0], want) {
		t.Errorf("got %+v\nwant %+v", res.lines[0], want)
	}
	s := res.sum
	if !s.Present || s.RowCount != 3 || s.PayTotalFen != 3 || s.RefundTotalFen != 0 || s.PayCount != 0 {
		t.Errorf("summary %+v", s)
	}
	// One of the sample's three rows is shown: the totals disagree, and the reader says so.
	if s.Mismatch != "总交易单数 3, the detail has 1 rows; 订单总金额 3, the detail sums 1" {
		t.Errorf("mismatch %q", s.Mismatch)
	}
}

func gzipped(tb testing.TB, s string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestWeChatBill(t *testing.T) {
	for name, input := range map[string][]byte{
		"LF":        []byte(wechatBill("\n")),
		"CRLF":      []byte(wechatBill("\r\n")),
		"BOM":       []byte("\ufeff" + wechatBill("\n")),
		"gzip":      gzipped(t, wechatBill("\n")),
		"gzip CRLF": gzipped(t, wechatBill("\r\n")),
	} {
		t.Run(name, func(t *testing.T) {
			res := readClean(t, NewWeChat(bytes.NewReader(input)), 3)
			want := []Line{
				{No: 2, Kind: KindPay, TradeNo: "T1", ChannelTxnID: "4200000001", AmountFen: 100000, Currency: "CNY", Time: cst("2024-05-01 00:00:01")},
				{No: 3, Kind: KindPay, TradeNo: "T2", ChannelTxnID: "4200000002", AmountFen: 1, Currency: "CNY", Time: cst("2024-05-01 10:00:00")},
				{No: 4, Kind: KindRefund, TradeNo: "T1", ChannelTxnID: "4200000001", RefundID: "50300000001", AmountFen: 25050, Currency: "CNY", Time: cst("2024-05-01 11:00:00")},
			}
			wantLines(t, res.lines, want)
			s := res.sum
			if !s.Present || s.Mismatch != "" || s.RowCount != 4 || s.PayTotalFen != 100001 || s.RefundTotalFen != 25050 || s.Skipped != 1 {
				t.Errorf("summary %+v", s)
			}
		})
	}
}

// A SUCCESS bill: other columns, in another order, no refund columns.
func TestWeChatSuccessBillOtherColumns(t *testing.T) {
	bill := "商户订单号,交易状态,订单金额,货币种类,微信订单号,交易时间,商品名称\n" +
		"`T7,`SUCCESS,`88.88,`CNY,`4200000007,`2024-05-01 08:00:00,`x\n" +
		"`T8,`REFUND,`1.00,`CNY,`4200000008,`2024-05-01 08:00:00,`x\n" +
		wechatSummaryHeader + "\n`2,`88.88,`0.00,`0.00,`0.00000,`89.88,`0.00\n"
	res := readAll(t, NewWeChat(strings.NewReader(bill)), 100)
	if res.err != nil || len(res.lines) != 1 || res.lines[0].AmountFen != 8888 || res.lines[0].TradeNo != "T7" {
		t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
	}
	if len(res.bad) != 1 || !strings.Contains(res.bad[0].Error(), "no 微信退款单号 or 退款金额 column") {
		t.Errorf("bad %v", res.bad)
	}
}

func TestWeChatMalformed(t *testing.T) {
	good := wechatBill("\n")
	t.Run("thousands separator and three decimals are counted lines", func(t *testing.T) {
		bill := strings.Replace(good, "`0.60%,`1000.00,", "`0.60%,`1,000.00,", 1)
		bill = strings.Replace(bill, "`0.60%,`0.01,", "`0.60%,`0.010,", 1)
		res := readAll(t, NewWeChat(strings.NewReader(bill)), 100)
		if res.err != nil || len(res.bad) != 2 || len(res.lines) != 1 {
			t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
		}
		if got := res.bad[0].Error(); !strings.HasPrefix(got, "line 2: 订单金额 \"1,000.00\"") {
			t.Errorf("bad %q", got)
		}
		if got := res.bad[1].Error(); !strings.HasPrefix(got, "line 3: 订单金额 \"0.010\"") {
			t.Errorf("bad %q", got)
		}
		if !strings.Contains(res.sum.Mismatch, "2 bad lines") {
			t.Errorf("mismatch %q", res.sum.Mismatch)
		}
	})
	t.Run("GBK instead of UTF-8", func(t *testing.T) {
		wantFormat(t, readAll(t, NewWeChat(bytes.NewReader(gbk(t, good))), 100), "not UTF-8")
	})
	t.Run("missing column", func(t *testing.T) {
		bill := strings.Replace(good, ",商户订单号,", ",商户单号,", 1)
		wantFormat(t, readAll(t, NewWeChat(strings.NewReader(bill)), 100), "商户订单号")
	})
	t.Run("missing summary column", func(t *testing.T) {
		bill := strings.Replace(good, ",退款总金额,", ",退款金额合计,", 1)
		wantFormat(t, readAll(t, NewWeChat(strings.NewReader(bill)), 100), "退款总金额")
	})
	t.Run("truncated gzip", func(t *testing.T) {
		z := gzipped(t, good)
		for _, n := range []int{len(z) - 4, len(z) / 2, 5} {
			wantFormat(t, readAll(t, NewWeChat(bytes.NewReader(z[:n])), 100), "")
		}
	})
	t.Run("no summary", func(t *testing.T) {
		cut := good[:strings.Index(good, "总交易单数")]
		res := readAll(t, NewWeChat(strings.NewReader(cut)), 100)
		if len(res.lines) != 3 {
			t.Errorf("lines %d", len(res.lines))
		}
		wantFormat(t, res, "without its summary")
	})
	t.Run("empty", func(t *testing.T) {
		wantFormat(t, readAll(t, NewWeChat(strings.NewReader("")), 100), "empty")
	})
	t.Run("unknown state, missing backtick, short row", func(t *testing.T) {
		bill := strings.Replace(good, "`SUCCESS,", "`PAYERROR,", 1)
		bill = strings.Replace(bill, "`2024-05-01 10:00:00,", "2024-05-01 10:00:00,", 1)
		bill = strings.Replace(bill, ",`250.50,`0.00,`ORIGINAL", ",`250.50,`ORIGINAL", 1)
		res := readAll(t, NewWeChat(strings.NewReader(bill)), 100)
		if res.err != nil || len(res.bad) != 3 || len(res.lines) != 0 {
			t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
		}
	})
}
