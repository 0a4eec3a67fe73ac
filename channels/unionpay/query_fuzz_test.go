package unionpay

import (
	"encoding/pem"
	"errors"
	"net/url"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// unionPayQuerySeeds are answers about T1 in UnionPay's shape, unsigned.
var unionPayQuerySeeds = []url.Values{
	{"respCode": {"00"}, "origRespCode": {"00"}, "merId": {testUnionPayMerID}, "orderId": {"T1"}, "txnType": {"01"},
		"queryId": {"112233445566778899001"}, "txnAmt": {"100"}, "currencyCode": {"156"}, "txnTime": {"20240501120005"}},
	{"respCode": {"00"}, "origRespCode": {"A6"}, "merId": {testUnionPayMerID}, "orderId": {"T1"},
		"queryId": {"1"}, "txnAmt": {"000"}, "currencyCode": {"840"}, "txnTime": {"20240230120005"}, "reserved": {"{a=1&b=2}"}},
	{"respCode": {"00"}, "origRespCode": {"05"}, "merId": {testUnionPayMerID}, "orderId": {"T1"}},
	{"respCode": {"00"}, "origRespCode": {"01"}, "merId": {testUnionPayMerID}, "orderId": {"T1"}},
	{"respCode": {"34"}, "merId": {testUnionPayMerID}, "orderId": {"T1"}},
	{"respCode": {"11"}},
	{"respCode": {"00"}, "origRespCode": {"00"}, "merId": {testUnionPayMerID}, "orderId": {"T2"}, "queryId": {"1"}, "txnAmt": {"1"},
		"currencyCode": {"156"}, "txnTime": {"20240501120005"}},
}

func unionPayQueryForm(fields url.Values) url.Values {
	form := url.Values{"version": {"5.1.0"}, "encoding": {"UTF-8"}, "signMethod": {"01"}}
	for k, vs := range fields {
		form[k] = vs
	}
	return form
}

// FuzzUnionPayQueryResponse drives the whole reading of a response: parsing, the verifier's
// signature check, the mapping. Seeds are signed by the test chain so the fuzzer starts past the
// signature.
func FuzzUnionPayQueryResponse(f *testing.F) {
	pki := testUnionPayPKI(f)
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pki.sign.Raw}))
	q := &unionPayQuerier{v: testUnionPay(f, pki.config())}
	for i, fields := range unionPayQuerySeeds {
		form := unionPayQueryForm(fields)
		form.Set("signPubKeyCert", certPEM)
		if err := simulate.SignUnionPay(form, pki.signKey); err != nil {
			f.Fatal(err)
		}
		body := simulate.UnionPayResponseBody(form)
		if a, err := q.answer("T1", body, pki.now); i == 0 && (err != nil || a.State != channels.TradePaid) {
			f.Fatalf("the first seed does not verify as paid: %v", err) // the fuzzer would start short of the mapping
		}
		f.Add(body)
	}
	for _, s := range []string{"", "{}", "a", "a=1&", "version=5.1.0&signMethod=01&signature=AAAA&respCode=00", "{version=5.1.0&signMethod=01}"} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		answer, err := q.answer("T1", body, pki.now)
		if err != nil {
			if !errors.Is(err, channels.ErrMalformed) && !errors.Is(err, channels.ErrBadSignature) && !errors.Is(err, channels.ErrQueryFailed) {
				t.Fatalf("error %v wraps no query sentinel", err)
			}
			return
		}
		checkUnionPayAnswer(t, answer)
	})
}

// FuzzUnionPayQueryAnswer drives the parsing and mapping directly, which the signature shields
// from FuzzUnionPayQueryResponse.
func FuzzUnionPayQueryAnswer(f *testing.F) {
	for _, fields := range unionPayQuerySeeds {
		f.Add(simulate.UnionPayResponseBody(unionPayQueryForm(fields)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := parseUnionPayResponse(body)
		if channeltest.Refused(t, err, "parseUnionPayResponse") {
			return
		}
		for k := range params {
			if k == "" {
				t.Fatal("an empty field name was accepted")
			}
		}
		answer, err := unionPayQueryAnswer(testUnionPayMerID, "T1", params, body)
		if err != nil {
			if !errors.Is(err, channels.ErrMalformed) && !errors.Is(err, channels.ErrQueryFailed) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrQueryFailed", err)
			}
			return
		}
		if params["merId"] != testUnionPayMerID && answer.State == channels.TradePaid || params["orderId"] != "T1" && params["respCode"] == "00" {
			t.Fatalf("answered %s for merId %q orderId %q", answer.State, params["merId"], params["orderId"])
		}
		checkUnionPayAnswer(t, answer)
		if answer.State == channels.TradePaid && (answer.Events[0].ChannelTxnID != params["queryId"] || !(params["origRespCode"] == "00" || params["origRespCode"] == "A6")) {
			t.Fatalf("paid %+v from queryId %q origRespCode %q", channeltest.EventNoRaw(answer.Events[0]), params["queryId"], params["origRespCode"])
		}
	})
}

// checkUnionPayAnswer: a UnionPay query answers paid (one payment) or not paid (nothing).
func checkUnionPayAnswer(t *testing.T, a channels.TradeAnswer) {
	t.Helper()
	channeltest.CheckAnswerInvariants(t, a, "T1")
	switch {
	case a.State == channels.TradePaid && len(a.Events) == 1 && a.Events[0].Kind == payment.KindPaid:
	case a.State == channels.TradeNotPaid:
	default:
		t.Fatalf("answer %s with %d events", a.State, len(a.Events))
	}
}
