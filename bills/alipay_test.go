package bills

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// alipaySample is PROTOCOLS.md's real sample, verbatim, in UTF-8 with its `\t` marks made TABs.
func alipaySample(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/alipay_sample.txt")
	if err != nil {
		tb.Fatal(err)
	}
	return strings.ReplaceAll(string(b), `\t`, "\t")
}

const alipayTestHeader = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注"

// alipayRow is a detail row in the sample's shape.
func alipayRow(txn, trade, kind, done, amount, received, refundID string) string {
	return fmt.Sprintf("%s\t,%s\t,%s\t,下单测试,2019-09-16 10:55:16,%s,alipay_store\t,alipay_store\t,alipay\t,\t,*津水(602***@qq.com)\t,%s,%s,0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,%s\t,0.00,0.00,下单测试",
		txn, trade, kind, done, amount, received, refundID)
}

// alipayBill frames rows the way Alipay does, with a marker of another dash count than the
// sample's.
func alipayBill(header string, rows []string, trailer ...string) string {
	var b strings.Builder
	b.WriteString("#支付宝业务明细查询\r\n#账号：[20880211096256330156]\r\n#----------业务明细列表----------\r\n")
	b.WriteString(header + "\r\n")
	for _, r := range rows {
		b.WriteString(r + "\r\n")
	}
	b.WriteString("#----------业务明细列表结束----------\r\n")
	for _, t := range trailer {
		b.WriteString(t + "\r\n")
	}
	return b.String()
}

func TestAlipaySample(t *testing.T) {
	res := readClean(t, NewAlipayCSV(bytes.NewReader(gbk(t, alipaySample(t)))), 2)
	want := []Line{
		{No: 6, Kind: KindPay, TradeNo: "service_1568601259302", ChannelTxnID: "2019091622001458860515315453", AmountFen: 1, Currency: "CNY", Time: cst("2019-09-16 10:55:23")},
		{No: 7, Kind: KindRefund, TradeNo: "service_1568601259302", ChannelTxnID: "2019091622001458860515315453", RefundID: "re_test_1568602607356", AmountFen: 1, Currency: "CNY", Time: cst("2019-09-16 10:56:48")},
	}
	wantLines(t, res.lines, want)
	s := res.sum
	if !s.Present || s.PayCount != 6 || s.PayTotalFen != 6 || s.RefundCount != 4 || s.RefundTotalFen != 4 {
		t.Errorf("summary %+v", s)
	}
	// The sample shows 2 of its 10 rows: its own totals cannot agree, and the reader says so.
	if !strings.Contains(s.Mismatch, "交易合计 6笔, the detail has 1") || !strings.Contains(s.Mismatch, "退款合计 4笔, the detail has 1") {
		t.Errorf("mismatch %q", s.Mismatch)
	}
}

// alipayConsistent is a bill whose summary agrees with its rows, with a row of a 业务类型 paygw
// does not reconcile, and 商家实收 that differs from 订单金额 (a merchant discount).
func alipayConsistent() string {
	return alipayBill(alipayTestHeader, []string{
		alipayRow("2024050122001400001", "T1", "交易", "2024-05-01 09:00:00", "1000.00", "990.00", ""),
		alipayRow("2024050122001400002", "T2", "交易", "2024-05-01 23:59:59", "0.01", "0.01", ""),
		alipayRow("2024050122001400001", "T1", "退款", "2024-05-01 12:00:00", "-250.50", "-250.50", "rq_1"),
		alipayRow("2024050122001400003", "T3", "冻结", "2024-05-01 12:00:00", "5.00", "5.00", ""),
	},
		"#交易合计：2笔，商家实收共990.01元，商家优惠共10.00元",
		"#退款合计：1笔，商家实收退款共-250.50元，商家优惠退款共0.00元",
		"#导出时间：[2024年05月02日 05:46:49]")
}

func TestAlipayConsistentBill(t *testing.T) {
	res := readClean(t, NewAlipayCSV(bytes.NewReader(gbk(t, alipayConsistent()))), 3)
	if l := res.lines[0]; l.AmountFen != 100000 || l.Kind != KindPay || !l.Time.Equal(cst("2024-05-01 09:00:00")) {
		t.Errorf("line 0 %+v", l)
	}
	if l := res.lines[2]; l.AmountFen != 25050 || l.Kind != KindRefund || l.RefundID != "rq_1" || l.TradeNo != "T1" {
		t.Errorf("refund %+v", l)
	}
	s := res.sum
	if s.Mismatch != "" || s.Skipped != 1 || s.PayCount != 2 || s.PayTotalFen != 99001 || s.RefundTotalFen != 25050 {
		t.Errorf("summary %+v", s)
	}
}

func TestAlipaySummaryMismatch(t *testing.T) {
	bill := strings.Replace(alipayConsistent(), "商家实收共990.01元", "商家实收共990.02元", 1)
	res := readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, bill))), 100)
	if res.err != nil || res.sum.Mismatch != "交易 商家实收 99002 fen, the detail sums 99001" {
		t.Fatalf("err %v, mismatch %q", res.err, res.sum.Mismatch)
	}
}

// A bank-channel variant: extra columns, one of them before the ones paygw reads.
func TestAlipayColumnsByName(t *testing.T) {
	header := strings.Replace(alipayTestHeader, "商户订单号,", "商户订单号,银行卡号,", 1) + ",渠道"
	row := strings.Replace(alipayRow("2024050122001400009", "T9", "交易", "2024-05-01 09:00:00", "12.30", "12.30", ""), "T9\t,", "T9\t,6222***1234,", 1) + ",bank"
	res := readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, alipayBill(header, []string{row})))), 100)
	if res.err != nil || len(res.lines) != 1 || res.lines[0].AmountFen != 1230 || res.lines[0].TradeNo != "T9" {
		t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
	}
	if res.sum.Present {
		t.Errorf("no totals in the bill, summary %+v", res.sum)
	}
}

func TestAlipayZipGBKNames(t *testing.T) {
	detail := gbk(t, alipayConsistent())
	summary := gbk(t, "#支付宝业务汇总查询\r\n门店编号,门店名称,交易订单总笔数\r\n")
	for name, z := range map[string][]byte{
		// The 汇总 file first: only the decoded names tell them apart.
		"by name": zipOf(t,
			zipEntry{gbk(t, "20880211096256330156_20240501_业务明细(汇总).csv"), summary},
			zipEntry{gbk(t, "20880211096256330156_20240501_业务明细.csv"), detail}),
		// Names no decoder makes sense of: the first entry that is not the 汇总 file.
		"by position": zipOf(t,
			zipEntry{[]byte("\xff\xfe_1.csv"), detail},
			zipEntry{[]byte("\xff\xfe_2.csv"), summary}),
	} {
		t.Run(name, func(t *testing.T) {
			r, err := NewAlipay(bytes.NewReader(z), int64(len(z)))
			if err != nil {
				t.Fatal(err)
			}
			res := readAll(t, r, 100)
			if res.err != nil || len(res.lines) != 3 || res.sum.Mismatch != "" {
				t.Fatalf("err %v, lines %d, summary %+v", res.err, len(res.lines), res.sum)
			}
		})
	}
	// The names really are garbled for archive/zip: it reports them as not UTF-8.
	z := zipOf(t, zipEntry{gbk(t, "x_业务明细.csv"), detail})
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	if f := zr.File[0]; !f.NonUTF8 || f.Flags&0x800 != 0 || f.Name == "x_业务明细.csv" || entryName(f) != "x_业务明细.csv" {
		t.Errorf("entry name %q (flags %#x, NonUTF8 %v), decoded %q", f.Name, f.Flags, f.NonUTF8, entryName(f))
	}
}

func TestAlipayMalformed(t *testing.T) {
	good := alipayConsistent()
	z := zipOf(t, zipEntry{gbk(t, "20880211096256330156_20240501_业务明细.csv"), gbk(t, good)})

	t.Run("truncated zip", func(t *testing.T) {
		for _, n := range []int{len(z) - 10, len(z) / 2, 30, 0} {
			if _, err := NewAlipay(bytes.NewReader(z[:n]), int64(n)); !strings.Contains(fmt.Sprint(err), ErrFormat.Error()) {
				t.Errorf("cut at %d: %v", n, err)
			}
		}
	})
	t.Run("corrupt entry", func(t *testing.T) {
		bad := bytes.Clone(z)
		zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			t.Fatal(err)
		}
		off, err := zr.File[0].DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		bad[off+8] ^= 0xff // inside the deflated data: a flate error or a checksum error
		r, err := NewAlipay(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			t.Fatal(err)
		}
		wantFormat(t, readAll(t, r, 100), "")
	})
	t.Run("UTF-8 instead of GBK", func(t *testing.T) {
		wantFormat(t, readAll(t, NewAlipayCSV(strings.NewReader(good)), 100), "UTF-8")
	})
	t.Run("invalid GBK", func(t *testing.T) {
		b := gbk(t, good)
		i := bytes.Index(b, []byte("T2"))
		b[i] = 0xff
		wantFormat(t, readAll(t, NewAlipayCSV(bytes.NewReader(b)), 100), "GBK")
	})
	t.Run("missing column", func(t *testing.T) {
		bill := strings.Replace(good, ",商户订单号,", ",订单号,", 1)
		wantFormat(t, readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, bill))), 100), "商户订单号")
	})
	t.Run("no marker", func(t *testing.T) {
		wantFormat(t, readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, alipayTestHeader+"\n"))), 100), "业务明细列表")
	})
	t.Run("cut inside the detail block", func(t *testing.T) {
		cut := good[:strings.Index(good, "#----------业务明细列表结束")]
		res := readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, cut))), 100)
		if len(res.lines) != 3 {
			t.Errorf("lines %d", len(res.lines))
		}
		wantFormat(t, res, "cut short")
	})
	t.Run("bad amounts are counted lines", func(t *testing.T) {
		bill := strings.Replace(good, ",0.01,0.01,", ",0.001,0.001,", 1)                            // three decimals
		bill = strings.Replace(bill, ",1000.00,990.00,", ",1,000.00,990.00,", 1)                    // a thousands separator
		bill = strings.Replace(bill, "2024-05-01 12:00:00,alipay", "2024-05-01 25:00:00,alipay", 1) // no such hour
		res := readAll(t, NewAlipayCSV(bytes.NewReader(gbk(t, bill))), 100)
		if res.err != nil || len(res.bad) != 3 || len(res.lines) != 0 {
			t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
		}
		for i, want := range []string{"line 5: 26 fields, the header has 25", "line 6: 订单金额（元） \"0.001\"", "line 7: 完成时间"} {
			if !strings.HasPrefix(res.bad[i].Error(), want) {
				t.Errorf("bad %d: %q, want %q…", i, res.bad[i], want)
			}
		}
		if !strings.Contains(res.sum.Mismatch, "3 bad lines") {
			t.Errorf("mismatch %q", res.sum.Mismatch)
		}
	})
}
