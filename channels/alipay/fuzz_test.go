package alipay

import (
	"errors"
	"math/big"
	"regexp"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

// FuzzAlipayVerify feeds whole notification bodies. What verifies must be a seed's event:
// mutations may only rewrite how the signed parameters are encoded.
func FuzzAlipayVerify(f *testing.F) {
	signed := channeltest.SeedForms(f, readAlipayVectors(f),
		"",
		"&&",
		"a=b",
		"a=%zz",
		"a=1&a=2",
		"a=1;b=2",
		"=x",
		"sign=&sign_type=RSA2",
		"sign=AAAA&sign_type=RSA",
		"charset=gbk&sign=AAAA&sign_type=RSA2",
		"charset=gbk&subject=%B2%E2%CA%D4%FF&notify_id=1&trade_no=2&out_trade_no=T1&total_amount=1.00&trade_status=TRADE_SUCCESS",
		"charset=big5&sign=AAAA&sign_type=RSA2",
		"notify_id=1&trade_no=2&out_trade_no=T1&total_amount=1.00&trade_status=TRADE_CLOSED&gmt_refund=2024-05-02+10%3A00%3A00",
		"notify_id=1&trade_no=2&out_trade_no=T1&total_amount=1.00&trade_status=TRADE_CLOSED&refund_fee=0.50&out_biz_no=R1",
		"subject=%FF&sign=AAAA&sign_type=RSA2",
		"notify_id=1&trade_no=2&out_trade_no=T1&total_amount=1.00&trade_status=TRADE_SUCCESS&gmt_payment=2024-05-01+12%3A00%3A05",
		"notify_id=1&trade_no=2&out_trade_no=T1&total_amount=1e2&trade_status=TRADE_SUCCESS&refund_fee=1",
	)
	a := New(testAppID, "", testAlipayPublicKey(f))
	seeds := channeltest.VerifiedSeeds(f, func(i int) (payment.Event, error) { return a.Verify(signed[i], nil, time.Time{}) }, len(signed))

	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := a.Verify(body, nil, time.Time{})
		switch {
		case err != nil && !channeltest.IsSentinel(err):
			t.Fatalf("Verify error %v wraps no sentinel", err)
		case err == nil && (ev.TradeNo == "" || ev.NotifyID == "" || ev.AmountFen < 0):
			t.Fatalf("Verify accepted an incomplete event %+v", ev)
		case err == nil:
			channeltest.SameAsASeed(t, ev, seeds)
		}

		// The signature shields the field checks from the fuzzer; exercise them on their own.
		params, charset, err := parseAlipayForm(body)
		if err != nil {
			if !channeltest.IsSentinel(err) {
				t.Fatalf("parseAlipayForm error %v wraps no sentinel", err)
			}
			return
		}
		_ = alipaySignedString(params)
		if params, err = alipayUTF8(params, charset); err != nil {
			if !channeltest.IsSentinel(err) {
				t.Fatalf("alipayUTF8 error %v wraps no sentinel", err)
			}
			return
		}
		if ev, err = alipayEvent(params, body); err == nil {
			ev, err = channels.CheckEvent(ev)
		}
		switch {
		case err != nil && !channeltest.IsSentinel(err):
			t.Fatalf("alipayEvent error %v wraps no sentinel", err)
		case err == nil && (ev.TradeNo == "" || ev.NotifyID == "" || ev.ChannelTxnID == "" || ev.AmountFen < 0 || ev.Kind == ""):
			t.Fatalf("alipayEvent accepted an incomplete event %+v", ev)
		case err == nil && !utf8.ValidString(ev.Subject):
			t.Fatalf("alipayEvent let a subject through that is not UTF-8: %q", ev.Subject)
		case err == nil && ev.Kind == payment.KindRefund && (ev.RefundFen <= 0 || !ev.RefundIsTotal || ev.RefundID != params["out_biz_no"]):
			t.Fatalf("alipayEvent made a refund that is not the running total under out_biz_no: %+v", ev)
		}
	})
}

// FuzzParseYuan holds ParseYuan to math/big.Rat: what it accepts is the input's exact value in
// fen, and every input of its documented grammar up to channels.MaxFen is accepted.
func FuzzParseYuan(f *testing.F) {
	for _, s := range []string{
		"88.88", "0.01", "1", "1.5", "100.00", "0", "1000000000", "1000000000.01",
		"-1", "+1", "1.234", "1e2", "", " 1", "1.", ".5", "01", "99999999999999999999", "1/2", "0x10",
	} {
		f.Add(s)
	}
	grammar := regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$`)
	f.Fuzz(func(t *testing.T, s string) {
		fen, err := ParseYuan(s)
		r, isNumber := new(big.Rat).SetString(s)
		if err != nil {
			if !errors.Is(err, channels.ErrMalformed) {
				t.Fatalf("ParseYuan(%q) error %v does not wrap ErrMalformed", s, err)
			}
			if grammar.MatchString(s) && isNumber && new(big.Rat).Mul(r, big.NewRat(100, 1)).Cmp(big.NewRat(channels.MaxFen, 1)) <= 0 {
				t.Fatalf("ParseYuan(%q) refused (%v), though of the grammar and within bounds", s, err)
			}
			return
		}
		if !isNumber {
			t.Fatalf("ParseYuan(%q) = %d; big.Rat reads no number", s, fen)
		}
		if want := new(big.Rat).Mul(r, big.NewRat(100, 1)); !want.IsInt() || want.Num().Cmp(big.NewInt(fen)) != 0 {
			t.Fatalf("ParseYuan(%q) = %d, want %s", s, fen, want.RatString())
		}
		if fen < 0 || fen > channels.MaxFen {
			t.Fatalf("ParseYuan(%q) = %d, outside [0, %d]", s, fen, channels.MaxFen)
		}
	})
}
