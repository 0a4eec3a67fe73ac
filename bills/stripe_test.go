package bills

import (
	"strings"
	"testing"
	"time"
)

// A report with its columns in another order than the docs list them, and extra ones (fee, net,
// description with a quoted comma).
const stripeReport = `reporting_category,description,gross,fee,net,currency,created_utc,balance_transaction_id,source_id,payment_metadata[trade_no],charge_id,payment_intent_id
charge,"Order T1, tea",10.00,0.59,9.41,usd,2024-05-01 10:20:30,txn_1,ch_1,T1,ch_1,pi_1
charge,Order T2,1000,36,964,jpy,2024-05-01 11:00:00,txn_2,ch_2,T2,ch_2,pi_2
refund,Refund T1,-2.50,0.00,-2.50,usd,2024-05-01 12:00:00,txn_3,re_3,T1,ch_1,pi_1
fee,Radar,-0.05,0.00,-0.05,usd,2024-05-01 12:30:00,txn_4,,,,
payout,Payout,-100.00,0.00,-100.00,usd,2024-05-01 13:00:00,txn_5,po_5,,,
charge,Order T6,1.234,0.00,1.234,kwd,2024-05-01 14:00:00,txn_6,ch_6,,ch_6,pi_6
charge,Order T8,1000,0,1000,isk,2024-05-01 15:00:00,txn_8,ch_8,T8,ch_8,pi_8
`

func TestStripeReport(t *testing.T) {
	res := readClean(t, NewStripe(strings.NewReader(stripeReport)), 5)
	utc := func(s string) time.Time { t, _ := time.Parse(time.DateTime, s); return t }
	want := []Line{
		{No: 2, Kind: KindPay, TradeNo: "T1", ChannelTxnID: "pi_1", AmountFen: 1000, Currency: "USD", Time: utc("2024-05-01 10:20:30")},
		{No: 3, Kind: KindPay, TradeNo: "T2", ChannelTxnID: "pi_2", AmountFen: 1000, Currency: "JPY", Time: utc("2024-05-01 11:00:00")},
		{No: 4, Kind: KindRefund, TradeNo: "T1", ChannelTxnID: "pi_1", RefundID: "re_3", AmountFen: 250, Currency: "USD", Time: utc("2024-05-01 12:00:00")},
		{No: 7, Kind: KindPay, TradeNo: "", ChannelTxnID: "pi_6", AmountFen: 1234, Currency: "KWD", Time: utc("2024-05-01 14:00:00")},
		// ISK in ISO 4217 minor units (none), not in the hundredths Stripe's API counts it in.
		{No: 8, Kind: KindPay, TradeNo: "T8", ChannelTxnID: "pi_8", AmountFen: 1000, Currency: "ISK", Time: utc("2024-05-01 15:00:00")},
	}
	wantLines(t, res.lines, want)
	if s := res.sum; s.Present || s.Skipped != 2 {
		t.Errorf("summary %+v", s)
	}
}

func TestStripeMalformed(t *testing.T) {
	t.Run("bad rows are counted", func(t *testing.T) {
		report := strings.Join([]string{
			"balance_transaction_id,created_utc,currency,gross,reporting_category,payment_intent_id,payment_metadata[trade_no],source_id",
			`txn_1,2024-05-01 10:00:00,usd,"1,000.00",charge,pi_1,T1,ch_1`, // thousands separator
			`txn_2,2024-05-01 10:00:00,jpy,10.50,charge,pi_2,T2,ch_2`,      // JPY has no decimals
			`txn_3,2024-05-01 10:00:00,usd,2.50,refund,pi_3,T3,re_3`,       // a refund's gross is negative
			`txn_4,2024-05-01 10:00:00,usd,2.50,charge,,T4,ch_4`,           // no payment intent
			`txn_5,2024-05-01 10:00:00,usd,2.50,charge,pi_5`,               // short
			`txn_7,2024-05-01 10:00:00,xyz,2.50,charge,pi_7,T7,ch_7`,       // not an ISO 4217 currency
			`txn_6,2024-05-01 10:00:00,usd,"2.50,charge,pi_6,T6,ch_6`,      // a quote never closed
		}, "\n") + "\n"
		res := readAll(t, NewStripe(strings.NewReader(report)), 100)
		if res.err != nil || len(res.bad) != 7 || len(res.lines) != 0 {
			t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
		}
		for i, want := range []string{`line 2: gross "1,000.00"`, `line 3: gross "10.50" (JPY)`, "line 4: gross", "line 5: payment_intent_id", "line 6: 6 fields", `line 7: currency "xyz"`, "line 8: "} {
			if !strings.HasPrefix(res.bad[i].Error(), want) {
				t.Errorf("bad %d: %q, want %q…", i, res.bad[i], want)
			}
		}
	})
	t.Run("missing column", func(t *testing.T) {
		report := strings.Replace(stripeReport, ",payment_intent_id\n", ",intent\n", 1)
		wantFormat(t, readAll(t, NewStripe(strings.NewReader(report)), 100), "payment_intent_id")
	})
	t.Run("not UTF-8", func(t *testing.T) {
		report := strings.Replace(stripeReport, "Order T2", "Order \xff", 1)
		res := readAll(t, NewStripe(strings.NewReader(report)), 100)
		wantFormat(t, res, "not UTF-8")
	})
	t.Run("empty", func(t *testing.T) {
		wantFormat(t, readAll(t, NewStripe(strings.NewReader("")), 100), "empty")
	})
}

func TestGenericCSV(t *testing.T) {
	bill := "time,kind,trade_no,channel_txn_id,amount_fen,currency,refund_id,note\r\n" +
		"2024-05-01T10:20:30+08:00,PAY,T1,ch_1,1999,cny,,\"a, b\"\r\n" +
		"2024-05-01T12:00:00Z,REFUND,T1,ch_1,500,CNY,rf_1,\r\n" +
		"2024-05-01T12:00:00Z,CHARGE,T1,ch_1,500,CNY,,\r\n" +
		"2024-05-01T12:00:00Z,PAY,T1,ch_1,10.00,CNY,,\r\n" +
		"2024-05-01 12:00:00,PAY,T1,ch_1,1000,CNY,,\r\n" +
		"2024-05-01T12:00:00Z,PAY,,ch_1,1000,CNY,,\r\n"
	res := readAll(t, NewCSV(strings.NewReader(bill)), 100)
	if res.err != nil || len(res.lines) != 2 || len(res.bad) != 4 {
		t.Fatalf("err %v, bad %v, lines %+v", res.err, res.bad, res.lines)
	}
	want := []Line{
		{No: 2, Kind: KindPay, TradeNo: "T1", ChannelTxnID: "ch_1", AmountFen: 1999, Currency: "CNY", Time: cst("2024-05-01 10:20:30")},
		{No: 3, Kind: KindRefund, TradeNo: "T1", ChannelTxnID: "ch_1", RefundID: "rf_1", AmountFen: 500, Currency: "CNY", Time: cst("2024-05-01 20:00:00")},
	}
	wantLines(t, res.lines, want)
	for i, want := range []string{"line 4: kind", "line 5: amount_fen", "line 6: time", "line 7: trade_no"} {
		if !strings.HasPrefix(res.bad[i].Error(), want) {
			t.Errorf("bad %d: %q, want %q…", i, res.bad[i], want)
		}
	}
	wantFormat(t, readAll(t, NewCSV(strings.NewReader("trade_no,kind,amount_fen,currency,time\n")), 10), "channel_txn_id")
}

// Stripe's gross may print zeros past the currency's exponent (ISK as "1000.00"); they change
// no value. Anything else past it is refused, as parseDecimal refuses it.
func TestParseStripeGross(t *testing.T) {
	checkDecimals(t, "parseDecimalPadded", parseDecimalPadded, []decimalCase{
		{"1000.00", 0, 1000, true}, {"-3.00", 0, -3, true}, {"10.500", 2, 1050, true}, {"1.0000", 3, 1000, true},
		{"10.50", 2, 1050, true}, {"1000", 0, 1000, true},
		{"1.50", 0, 0, false}, {"1.2340", 2, 0, false}, {"1.000000000", 0, 0, false}, {"1.", 0, 0, false}, {"1,000.00", 0, 0, false},
	})
}

func TestParseDecimal(t *testing.T) {
	checkDecimals(t, "parseDecimal", parseDecimal, []decimalCase{
		{"0.01", 2, 1, true}, {"88.88", 2, 8888, true}, {"1", 2, 100, true}, {"0.5", 2, 50, true},
		{"-0.04", 2, -4, true}, {"0", 2, 0, true}, {"1000", 0, 1000, true}, {"1.234", 3, 1234, true},
		{"999999999999999", 0, 0, false}, {"100000000000000", 0, 100000000000000, true}, // maxMinor and past it
		{"1,000.00", 2, 0, false}, {"1.234", 2, 0, false}, {"1.", 2, 0, false}, {".5", 2, 0, false},
		{"01.00", 2, 0, false}, {"+1", 2, 0, false}, {" 1", 2, 0, false}, {"1e3", 2, 0, false},
		{"1.5", 0, 0, false}, {"", 2, 0, false}, {"-", 2, 0, false}, {"--1", 2, 0, false},
		{"1000000000000000000000", 2, 0, false}, {"１", 2, 0, false},
	})
}

// decimalCase is a decimal in, read with exp digits after the point: want, or refused (!ok).
type decimalCase struct {
	in   string
	exp  int
	want int64
	ok   bool
}

// checkDecimals reads every case's in with parse, called name in messages.
func checkDecimals(t *testing.T, name string, parse func(string, int) (int64, error), cases []decimalCase) {
	t.Helper()
	for _, c := range cases {
		got, err := parse(c.in, c.exp)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s(%q, %d) = %d, %v; want %d, ok %v", name, c.in, c.exp, got, err, c.want, c.ok)
		}
	}
}
