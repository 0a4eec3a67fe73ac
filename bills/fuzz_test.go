package bills

import (
	"bytes"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// Every reader of outside input is fuzzed (NewAlipayCSV, NewAlipay, NewWeChat, NewUnionPayZM,
// NewUnionPayZip, NewStripe, NewCSV, each a target below). The property, whatever the bytes:
// the reader never panics (the fuzzing engine fails a target on any panic), it ends (each call to
// Next consumes at least one line, so the calls are bounded by the input's size), yields only
// well-formed lines, and reports nothing but io.EOF, *LineError or a sticky ErrFormat (readAll
// checks all of that).

func maxCalls(data []byte) int { return bytes.Count(data, []byte("\n")) + 3 }

// inflatedCalls bounds the calls for compressed input: deflate expands at most 1032 to 1, and a
// line is at least one byte.
func inflatedCalls(data []byte) int { return 1032*len(data) + 3 }

func FuzzAlipayCSV(f *testing.F) {
	f.Add(gbk(f, alipaySample(f)))
	f.Add(gbk(f, alipayConsistent()))
	f.Add([]byte(alipayConsistent()))
	f.Add(gbk(f, "#业务明细列表\n支付宝交易号,商户订单号,业务类型,完成时间,订单金额（元）,退款批次号/请求号\n1,T,交易,2024-05-01 00:00:00,1,\n#\n#交易合计：1笔，商家实收共0.01元"))
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, NewAlipayCSV(bytes.NewReader(data)), maxCalls(data))
	})
}

func FuzzAlipayZip(f *testing.F) {
	f.Add(zipOf(f, zipEntry{gbk(f, "x_业务明细.csv"), gbk(f, alipayConsistent())}))
	f.Add(zipOf(f, zipEntry{gbk(f, "x_业务明细(汇总).csv"), []byte("a")}, zipEntry{[]byte("b"), gbk(f, alipaySample(f))}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewAlipay(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			wantFormat(t, result{err: err}, "")
			return
		}
		readAll(t, r, inflatedCalls(data))
	})
}

func FuzzWeChat(f *testing.F) {
	sample, err := os.ReadFile("testdata/wechat_sample.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(wechatBill("\r\n")))
	f.Add(gzipped(f, wechatBill("\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		calls := maxCalls(data)
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			calls = inflatedCalls(data)
		}
		readAll(t, NewWeChat(bytes.NewReader(data)), calls)
	})
}

func FuzzUnionPayZM(f *testing.F) {
	f.Add(zmFile(f, "\r\n",
		zmRow("01", "1231235959", "1999", "512412312359590001", "T1", ""),
		zmRow("04", "0101100000", "500", "512501011000000003", "T1", "512412312359590001")))
	f.Add(zmLine(f, zmRow("31", "0101000001", "1", "1", "订单", "2")))
	withFees := zmRow("01", "0101000001", "10000", "1", "T", "")
	withFees[zmFee], withFees[32] = "D000000000060", "C000000009940"
	f.Add(zmLine(f, withFees))
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, NewUnionPayZM(bytes.NewReader(data), time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime)), maxCalls(data))
	})
}

func FuzzUnionPayZip(f *testing.F) {
	zm := zmFile(f, "\r\n",
		zmRow("01", "1231235959", "1999", "512412312359590001", "T1", ""),
		zmRow("04", "0101100000", "500", "512501011000000003", "T1", "512412312359590001"))
	f.Add(zipOf(f, zipEntry{[]byte("INN25010188ZM_777290058110048"), zm}))
	f.Add(zipOf(f, zipEntry{[]byte("INN25010188ZME_777290058110048"), []byte("x\n")}, zipEntry{[]byte("INN25010188ZM_777290058110048"), zm}))
	f.Add(zipOf(f, zipEntry{[]byte("only"), zm[:len(zm)/2]}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewUnionPayZip(bytes.NewReader(data), int64(len(data)), time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime))
		if err != nil {
			wantFormat(t, result{err: err}, "")
			return
		}
		readAll(t, r, inflatedCalls(data))
	})
}

// The RFC 4180 readers are fuzzed twice over each input: as a bill, and through a record bound
// of limit+1 bytes read one byte at a time, so that the bound (1 MiB in a bill, out of a fuzzer's
// reach) fails the read at every place a record can be: the error path of issue 20 case 8.

func FuzzStripe(f *testing.F) {
	f.Add([]byte(stripeReport), uint8(40))
	f.Add([]byte(strings.ReplaceAll(stripeReport, "\n", "\r\n")), uint8(200))
	f.Add([]byte(stripeReport+`"`), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		readAll(t, NewStripe(bytes.NewReader(data)), maxCalls(data))
		readAll(t, &Stripe{rows: headedRecords{rs: newCSVRecordsLimit(iotest.OneByteReader(bytes.NewReader(data)), int(limit)+1)}}, maxCalls(data))
	})
}

func FuzzCSV(f *testing.F) {
	bill := "trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\nT1,ch_1,PAY,1999,CNY,2024-05-01T10:20:30+08:00,\nT1,ch_1,REFUND,5,CNY,2024-05-01T10:20:30Z,r\n"
	f.Add([]byte(bill), uint8(80))
	f.Add([]byte(bill+"\n\n\"T2\n\",ch_2,PAY,1,CNY,2024-05-01T10:20:30Z,\n\""), uint8(255))
	f.Add([]byte("trade_no,channel_txn_id,kind,amount_fen,currency,time,fee_fen\nT1,ch_1,PAY,1999,CNY,2024-05-01T10:20:30Z,12\nT1,ch_1,REFUND,5,CNY,2024-05-01T10:20:30Z,-1\n"), uint8(120))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		readAll(t, NewCSV(bytes.NewReader(data)), maxCalls(data))
		readAll(t, &CSV{rows: headedRecords{rs: newCSVRecordsLimit(iotest.OneByteReader(bytes.NewReader(data)), int(limit)+1)}}, maxCalls(data))
	})
}

// FuzzParseDecimal holds parseDecimal to math/big.Rat: what it accepts is the input's exact value
// in minor units, and every input of its documented grammar within bounds is accepted.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0.01", "-12.5", "1,000.00", "1000", "0.001", "01", "-0", "1e3", "1/2", "999999999999.99"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, exp int) {
		exp = ((exp % 4) + 4) % 4
		scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil))
		v, err := parseDecimal(s, exp)
		r, isNumber := new(big.Rat).SetString(s)
		if err != nil {
			frac := ""
			if exp > 0 {
				frac = fmt.Sprintf(`(\.[0-9]{1,%d})?`, exp)
			}
			grammar := regexp.MustCompile(`^-?(0|[1-9][0-9]*)` + frac + `$`)
			if grammar.MatchString(s) && isNumber && new(big.Rat).Abs(new(big.Rat).Mul(r, scale)).Cmp(big.NewRat(maxMinor, 1)) <= 0 {
				t.Fatalf("%q at exp %d refused (%v), though of the grammar and within bounds", s, exp, err)
			}
			return
		}
		if !isNumber {
			t.Fatalf("%q at exp %d parsed as %d; big.Rat reads no number", s, exp, v)
		}
		if want := new(big.Rat).Mul(r, scale); !want.IsInt() || want.Num().Cmp(big.NewInt(v)) != 0 {
			t.Fatalf("%q at exp %d parsed as %d, want %s", s, exp, v, want.RatString())
		}
		if v > maxMinor || v < -maxMinor {
			t.Fatalf("%q: %d out of bounds", s, v)
		}
	})
}

// FuzzParseDecimalPadded holds parseDecimalPadded to math/big.Rat: what it accepts is the input's
// exact value in minor units, and it accepts all that parseDecimal accepts.
func FuzzParseDecimalPadded(f *testing.F) {
	for _, s := range []string{"1000.00", "-3.00", "10.500", "1.50", "1.", "0.000000001", "0.04000", "-0.02000"} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, s string, exp int) {
		exp = ((exp % 4) + 4) % 4
		v, err := parseDecimalPadded(s, exp)
		if strict, serr := parseDecimal(s, exp); serr == nil && (err != nil || v != strict) {
			t.Fatalf("%q at exp %d: %d, %v; parseDecimal gives %d", s, exp, v, err, strict)
		}
		if err != nil {
			return
		}
		r, ok := new(big.Rat).SetString(s)
		scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil))
		if want := new(big.Rat).Mul(r, scale); !ok || !want.IsInt() || want.Num().Cmp(big.NewInt(v)) != 0 {
			t.Fatalf("%q at exp %d parsed as %d", s, exp, v)
		}
	})
}
