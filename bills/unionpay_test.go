package bills

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// zmLine builds a ZM line from the widths: each field GBK-encoded and padded to its width in
// bytes (numbers with zeros on the left, text with spaces on the right), then one space.
func zmLine(tb testing.TB, set map[int]string) []byte {
	tb.Helper()
	var b []byte
	for i, w := range zmWidths {
		v := gbk(tb, set[i])
		if len(v) > w {
			tb.Fatalf("field %d: %q is %d bytes, width %d", i, set[i], len(v), w)
		}
		pad := bytes.Repeat([]byte(" "), w-len(v))
		if i == zmAmount {
			b = append(append(b, bytes.Repeat([]byte("0"), w-len(v))...), v...)
		} else {
			b = append(append(b, v...), pad...)
		}
		b = append(b, ' ')
	}
	return b
}

// zmRow is a typical row: Chinese text in 账单号码 (before 原交易查询流水号, so a parser counting
// characters instead of bytes would misread it) and in 二级商户简称.
func zmRow(txnType, when, amount, queryID, orderID, origQryID string) map[int]string {
	return map[int]string{
		0: "S22", 1: "00010000", 2: "48020000", 3: "123456", zmTime: when, 5: "6216***********1234",
		zmAmount: amount, 7: "5812", 8: "07", zmQueryID: queryID, zmOrderID: orderID, 12: "01",
		zmTxnType: txnType, 20: "01", 21: "000201", 24: "账单测试号码", zmOrigQryID: origQryID,
		27: "777290058110048", 30: "测试二级商户", 33: "00000001",
	}
}

func zmFile(tb testing.TB, eol string, rows ...map[int]string) []byte {
	var b []byte
	for _, r := range rows {
		b = append(append(b, zmLine(tb, r)...), eol...)
	}
	return b
}

func TestUnionPayZM(t *testing.T) {
	billDate := time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime)
	file := zmFile(t, "\r\n",
		zmRow("01", "1231235959", "1999", "512412312359590001", "T1", ""),
		zmRow("01", "0101000001", "100000", "512501010000010002", "T2", ""),
		zmRow("04", "0101100000", "500", "512501011000000003", "T1", "512412312359590001"),
		zmRow("31", "0101110000", "100000", "512501011100000004", "T2", "512501010000010002"),
		zmRow("02", "0101120000", "700", "512501011200000005", "T3", ""), // pre-authorisation: skipped
	)
	if n := len(zmLine(t, zmRow("01", "0101000001", "1", "1", "T", ""))); n != zmLen || zmLen != 608 {
		t.Fatalf("line %d bytes, zmLen %d", n, zmLen)
	}
	res := readClean(t, NewUnionPayZM(bytes.NewReader(file), billDate), 4)
	want := []Line{
		{No: 1, Kind: KindPay, TradeNo: "T1", ChannelTxnID: "512412312359590001", AmountFen: 1999, Currency: "CNY", Time: cst("2024-12-31 23:59:59")},
		{No: 2, Kind: KindPay, TradeNo: "T2", ChannelTxnID: "512501010000010002", AmountFen: 100000, Currency: "CNY", Time: cst("2025-01-01 00:00:01")},
		{No: 3, Kind: KindRefund, TradeNo: "T1", ChannelTxnID: "512412312359590001", RefundID: "512501011000000003", AmountFen: 500, Currency: "CNY", Time: cst("2025-01-01 10:00:00")},
		{No: 4, Kind: KindRefund, TradeNo: "T2", ChannelTxnID: "512501010000010002", RefundID: "512501011100000004", AmountFen: 100000, Currency: "CNY", Time: cst("2025-01-01 11:00:00")},
	}
	wantLines(t, res.lines, want)
	if s := res.sum; s.Present || s.Skipped != 1 {
		t.Errorf("summary %+v", s)
	}
}

func TestUnionPayYear(t *testing.T) {
	for _, c := range []struct {
		bill, mmdd, want string // want "" = a bad line
	}{
		{"2025-01-01", "1231235959", "2024-12-31 23:59:59"},
		{"2024-12-31", "0101000000", "2025-01-01 00:00:00"},
		{"2024-03-01", "0229120000", "2024-02-29 12:00:00"},
		{"2025-03-01", "0229120000", ""}, // no February 29th within reach
		{"2025-06-15", "0615000000", "2025-06-15 00:00:00"},
		{"2025-06-15", "0101000000", ""}, // months away from the bill
		{"2025-06-15", "1301000000", ""},
		{"2025-06-15", "0431000000", ""},
	} {
		d, _ := time.Parse(time.DateOnly, c.bill)
		u := NewUnionPayZM(nil, d)
		got, err := u.resolve(c.mmdd)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("bill %s, %s: got %v, want an error", c.bill, c.mmdd, got)
		case c.want != "" && (err != nil || !got.Equal(cst(c.want))):
			t.Errorf("bill %s, %s: got %v, %v, want %s", c.bill, c.mmdd, got, err, c.want)
		}
	}
}

func TestUnionPayZip(t *testing.T) {
	billDate := time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime)
	zm := zmFile(t, "\n", zmRow("01", "0101000001", "1999", "512501010000010002", "T1", ""))
	z := zipOf(t,
		zipEntry{[]byte("INN25010188ZME_777290058110048"), []byte("not this one\n")},
		zipEntry{[]byte("INN25010188ZM_777290058110048"), zm},
	)
	r, err := NewUnionPayZip(bytes.NewReader(z), int64(len(z)), billDate)
	if err != nil {
		t.Fatal(err)
	}
	res := readAll(t, r, 100)
	if res.err != nil || len(res.lines) != 1 || res.lines[0].AmountFen != 1999 {
		t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
	}
	for _, n := range []int{len(z) - 1, len(z) / 2, 0} {
		if _, err := NewUnionPayZip(bytes.NewReader(z[:n]), int64(n), billDate); err == nil || !strings.Contains(err.Error(), ErrFormat.Error()) {
			t.Errorf("cut at %d: %v", n, err)
		}
	}
	other := zipOf(t, zipEntry{[]byte("a.txt"), zm}, zipEntry{[]byte("b.txt"), zm})
	if _, err := NewUnionPayZip(bytes.NewReader(other), int64(len(other)), billDate); err == nil {
		t.Error("two entries, neither a ZM file: want an error")
	}
}

func TestUnionPayMalformed(t *testing.T) {
	billDate := time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime)
	good := zmRow("01", "0101000001", "1999", "512501010000010002", "T1", "")
	t.Run("UTF-8 instead of GBK", func(t *testing.T) {
		line := zmLine(t, good)
		s, _ := decodeGBK(line) // the same text in UTF-8: the Chinese fields grow by half
		res := readAll(t, NewUnionPayZM(strings.NewReader(s+"\n"), billDate), 100)
		wantFormat(t, res, "UTF-8")
	})
	t.Run("invalid GBK", func(t *testing.T) {
		line := zmLine(t, good)
		i := bytes.Index(line, gbk(t, "测试"))
		line[i+1] = 0x20 // a lead byte followed by a space
		wantFormat(t, readAll(t, NewUnionPayZM(bytes.NewReader(line), billDate), 100), "GBK")
	})
	t.Run("bad lines are counted", func(t *testing.T) {
		short := zmLine(t, good)[:400]
		amount := zmRow("01", "0101000001", "1,000", "512501010000010002", "T1", "")
		noOrder := zmRow("01", "0101000001", "1", "512501010000010002", "", "")
		refundNoOrig := zmRow("04", "0101000001", "1", "512501010000010003", "T1", "")
		sep := zmLine(t, good)
		sep[3] = '|'
		file := append(append(append(short, '\n'), zmFile(t, "\n", amount, noOrder, refundNoOrig)...), sep...)
		file = append(append(file, '\n'), zmFile(t, "\n", good)...)
		res := readAll(t, NewUnionPayZM(bytes.NewReader(file), billDate), 100)
		if res.err != nil || len(res.bad) != 5 || len(res.lines) != 1 || res.lines[0].No != 6 {
			t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
		}
		for i, want := range []string{"400 bytes", "交易金额", "商户订单号", "原交易查询流水号", "separator"} {
			if !strings.Contains(res.bad[i].Reason, want) {
				t.Errorf("bad %d: %q, want %q", i, res.bad[i].Reason, want)
			}
		}
	})
}
