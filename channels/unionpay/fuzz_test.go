package unionpay

import (
	"errors"
	"net/url"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

// FuzzUnionPayVerify feeds whole notification bodies. What verifies must be a seed's event:
// mutations may only rewrite how the signed fields are encoded.
func FuzzUnionPayVerify(f *testing.F) {
	signed := channeltest.SeedForms(f, readUnionPayVectors(f),
		"",
		"&&",
		"a=1&a=2",
		"=x",
		"version=5.1.0&signMethod=01",
		"version=5.1.0&signMethod=01&signature=AAAA",
		"version=5.1.0&signMethod=01&signature=AAAA&signPubKeyCert=-----BEGIN+CERTIFICATE-----%0AMIIB%0A-----END+CERTIFICATE-----",
		"version=5.0.0&signMethod=01&certId=1",
		"encoding=GBK&version=5.1.0&signMethod=01",
		"respMsg=%FF&version=5.1.0&signMethod=01",
	)
	pki := testUnionPayPKI(f)
	u := testUnionPay(f, pki.config())
	seeds := channeltest.VerifiedSeeds(f, func(i int) (payment.Event, error) { return u.Verify(signed[i], nil, pki.now) }, len(signed))

	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := u.Verify(body, nil, pki.now)
		switch {
		case err != nil && !channeltest.IsSentinel(err):
			t.Fatalf("Verify error %v wraps no sentinel", err)
		case err == nil && (ev.TradeNo == "" || ev.NotifyID == "" || ev.ChannelTxnID == "" || ev.AmountFen < 0 || ev.Kind == ""):
			t.Fatalf("Verify accepted an incomplete event %+v", ev)
		case err == nil:
			channeltest.SameAsASeed(t, ev, seeds)
		}
	})
}

// FuzzUnionPayEvent drives the field mapping directly, which the signature shields from
// FuzzUnionPayVerify.
func FuzzUnionPayEvent(f *testing.F) {
	// The vectors without signature and certificate: the mapping reads neither, and the fuzzer
	// spends its time minimising long inputs.
	for _, v := range readUnionPayVectors(f) {
		form, err := url.ParseQuery(v.Body)
		if err != nil {
			f.Fatal(err)
		}
		form.Del("signature")
		form.Del("signPubKeyCert")
		f.Add([]byte(form.Encode()))
	}
	for _, s := range []string{
		"orderId=T1&queryId=1&txnType=01&respCode=00&txnAmt=1&currencyCode=156&txnTime=20240501120005",
		"orderId=T1&queryId=1&txnType=04&respCode=00&txnAmt=000&currencyCode=840&txnTime=20240230120005",
		"orderId=R1&queryId=2&origQryId=1&txnType=04&respCode=00&txnAmt=100&currencyCode=156&txnTime=20240501120005",
		"orderId=T1&queryId=1&txnType=31&respCode=A6&txnAmt=999999999999&currencyCode=392&txnTime=2024",
		"orderId=T+1&queryId=&txnType=&respCode=0&txnAmt=-1&currencyCode=&txnTime=",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := channels.ParseForm("unionpay", body)
		if err != nil {
			return
		}
		_ = unionPaySignedString(params, true)
		ev, err := unionPayEvent(params, body)
		switch {
		case err != nil && !channeltest.IsSentinel(err):
			t.Fatalf("unionPayEvent error %v wraps no sentinel", err)
		case err != nil:
			return
		case !payment.ValidTradeNo(ev.TradeNo) || ev.ChannelTxnID == "" || ev.Kind == "" || ev.Currency == "":
			t.Fatalf("unionPayEvent accepted an incomplete event %+v", ev)
		case ev.AmountFen < 0 || ev.AmountFen > channels.MaxFen:
			t.Fatalf("amount %d outside [0, %d]", ev.AmountFen, channels.MaxFen)
		case ev.NotifyID != params["queryId"]+":"+params["txnType"]+":"+params["respCode"]:
			t.Fatalf("NotifyID %q not queryId:txnType:respCode", ev.NotifyID)
		case ev.PaidAt.IsZero():
			t.Fatalf("PaidAt zero for txnTime %q", params["txnTime"])
		case ev.Kind == payment.KindRefund && (ev.RefundID != params["queryId"] || ev.ChannelTxnID != params["origQryId"] || ev.RefundFen != ev.AmountFen):
			t.Fatalf("refund %q of %q, want its queryId of origQryId", ev.RefundID, ev.ChannelTxnID)
		}
		if _, err := channels.CheckEvent(ev); err != nil && !errors.Is(err, channels.ErrMalformed) {
			t.Fatalf("checkEvent error %v is not ErrMalformed", err)
		}
	})
}
