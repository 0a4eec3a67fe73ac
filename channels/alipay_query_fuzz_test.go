package channels

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// fixedResponse answers every request with status and body, without a network.
type fixedResponse struct {
	status int
	header http.Header
	body   []byte
}

func (f *fixedResponse) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: f.status, Header: f.header.Clone(), Body: io.NopCloser(bytes.NewReader(f.body)),
		Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

const fuzzTradeNo = "T20260501-0001"

// fuzzAlipayQuerier asks through rt, trusting testdata's Alipay key (alipay_key.pem signs).
func fuzzAlipayQuerier(tb testing.TB, rt http.RoundTripper) Querier {
	tb.Helper()
	q, err := NewAlipayQuerier(config.Alipay{AppID: testAppID, AppPrivateKeyFile: filepath.Join("testdata", "other_key.pem"),
		GatewayURL: "https://openapi.alipay.test/gateway.do"}, NewAlipay(testAppID, "", testAlipayPublicKey(tb)), &http.Client{Transport: rt})
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// alipayFuzzNodes are answers as Alipay writes them, one per state the querier knows.
var alipayFuzzNodes = []string{
	`{"code":"10000","msg":"Success","buyer_logon_id":"159****5620","buyer_pay_amount":"88.88","buyer_user_id":"2088102177846875","invoice_amount":"88.88","out_trade_no":"` + fuzzTradeNo + `","point_amount":"0.00","receipt_amount":"88.88","send_pay_date":"2026-05-01 10:00:00","total_amount":"88.88","trade_no":"2026050122001400000000000001","trade_status":"TRADE_SUCCESS"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + fuzzTradeNo + `","send_pay_date":"2026-05-01 10:00:00","total_amount":"1","trade_no":"2026050122001400000000000001","trade_status":"TRADE_FINISHED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + fuzzTradeNo + `","send_pay_date":"2026-05-01 10:00:00","total_amount":"0.50","trade_no":"2026050122001400000000000001","trade_status":"TRADE_CLOSED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + fuzzTradeNo + `","total_amount":"0.50","trade_no":"2026050122001400000000000001","trade_status":"TRADE_CLOSED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + fuzzTradeNo + `","total_amount":"0.50","trade_status":"WAIT_BUYER_PAY"}`,
	`{"code":"10003","msg":"order success pay inprocess","out_trade_no":"` + fuzzTradeNo + `"}`,
	`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在","buyer_pay_amount":"0.00","out_trade_no":"` + fuzzTradeNo + `"}`,
	`{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`,
}

// alipayFuzzSigned wraps node as a response signed with key.
func alipayFuzzSigned(tb testing.TB, key *rsa.PrivateKey, node []byte, signFirst bool) []byte {
	tb.Helper()
	sum := sha256.Sum256(node)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	sign := `"sign":"` + base64.StdEncoding.EncodeToString(sig) + `"`
	if signFirst {
		return []byte(`{` + sign + `,"alipay_trade_query_response":` + string(node) + `}`)
	}
	return []byte(`{"alipay_trade_query_response":` + string(node) + `,` + sign + `}`)
}

// checkAnswer is what holds for every answer of any querier to a question about asked.
func checkAnswer(t *testing.T, channel, asked string, body []byte, a TradeAnswer, err error) {
	t.Helper()
	if err != nil {
		n := 0
		for _, s := range []error{ErrQueryFailed, ErrBadSignature, ErrMalformed} {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("error %v wraps %d of ErrQueryFailed, ErrBadSignature, ErrMalformed, want 1", err, n)
		}
		if a.State != "" || a.Events != nil {
			t.Fatalf("an answer %+v with error %v", a, err)
		}
		return
	}
	var kinds []payment.Kind
	for _, ev := range a.Events {
		kinds = append(kinds, ev.Kind)
		if _, cerr := checkEvent(ev); cerr != nil {
			t.Fatalf("event fails the width checks: %v", cerr)
		}
		switch {
		case ev.Channel != channel || ev.TradeNo != asked || !bytes.Equal(ev.Raw, body):
			t.Fatalf("event %s for %s: wrong channel, trade or raw body", brief(ev), asked)
		case ev.Kind == payment.KindPaid && ev.NotifyID != QueryNotifyID(ev.ChannelTxnID):
			t.Fatalf("payment notify id %q", ev.NotifyID)
		case ev.Kind == payment.KindClosed && ev.NotifyID != "query:close:"+asked:
			t.Fatalf("close notify id %q", ev.NotifyID)
		case ev.Kind == payment.KindRefund && (ev.NotifyID != "query:refund:"+ev.ChannelTxnID || ev.RefundFen != ev.AmountFen || !ev.RefundIsTotal):
			t.Fatalf("refund %s", brief(ev))
		}
	}
	// Alipay states a full refund's amount; WeChat's order query states none.
	want := map[TradeState]string{TradeNotPaid: "[]", TradePaid: "[PAID]", TradeClosed: "[CLOSED]",
		TradeRefunded: map[string]string{"alipay": "[PAID REFUND]", "wechatpay": "[PAID]"}[channel]}
	if got := fmt.Sprint(kinds); got != want[a.State] {
		t.Fatalf("state %q with events %s", a.State, got)
	}
	if a.Status == "" {
		t.Fatal("an answer without the channel's status")
	}
}

// FuzzAlipayQueryResponse feeds whole response bodies: the SDK's decoding and our reading of its
// errors, before any signature holds, and the signed seeds' path beyond.
func FuzzAlipayQueryResponse(f *testing.F) {
	key := readPrivateKey(f, "alipay_key.pem")
	for i, n := range alipayFuzzNodes {
		f.Add(alipayFuzzSigned(f, key, []byte(n), i%2 == 1))
	}
	f.Add([]byte(`{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id"}}`))
	f.Add([]byte(`{"alipay_trade_query_response":null}`))
	f.Add([]byte(`{"alipay_trade_query_response":"AAAA","sign":"AAAA"}`))
	f.Add([]byte(`{"alipay_trade_query_response":{},"sign":"AAAA","alipay_cert_sn":"x"}`))
	rt := &fixedResponse{status: http.StatusOK}
	q := fuzzAlipayQuerier(f, rt)
	f.Fuzz(func(t *testing.T, body []byte) {
		rt.body = body
		a, err := q.QueryTrade(t.Context(), TradeQuery{TradeNo: fuzzTradeNo})
		checkAnswer(t, "alipay", fuzzTradeNo, body, a, err)
		if err == nil && !bytes.Contains(body, []byte(`"sign"`)) {
			t.Fatalf("an answer from an unsigned body: %+v", a)
		}
	})
}

// FuzzAlipayQueryNode fuzzes what follows a valid signature, which the fuzzer cannot forge: the
// test signs the node it is given.
func FuzzAlipayQueryNode(f *testing.F) {
	for i, n := range alipayFuzzNodes {
		f.Add([]byte(n), i%2 == 0)
	}
	f.Add([]byte(`null`), false)
	f.Add([]byte(`"AAAA"`), false)
	f.Add([]byte(`{"code":"10000","trade_status":"TRADE_SUCCESS","trade_status":"WAIT_BUYER_PAY"}`), true)
	key := readPrivateKey(f, "alipay_key.pem")
	rt := &fixedResponse{status: http.StatusOK}
	q := fuzzAlipayQuerier(f, rt)
	f.Fuzz(func(t *testing.T, node []byte, signFirst bool) {
		rt.body = alipayFuzzSigned(t, key, node, signFirst)
		a, err := q.QueryTrade(t.Context(), TradeQuery{TradeNo: fuzzTradeNo})
		checkAnswer(t, "alipay", fuzzTradeNo, rt.body, a, err)
		// One JSON value, signed as it stands, is never a bad signature (a JSON string is the
		// encrypted form, which the SDK tries to decode before verifying).
		trimmed := bytes.TrimSpace(node)
		if errors.Is(err, ErrBadSignature) && json.Valid(node) && bytes.Equal(trimmed, node) && trimmed[0] != '"' {
			t.Fatalf("a signed node refused as unsigned: %v", err)
		}
	})
}

// TestAlipayQueryFuzzSeeds: the realistic seeds mean what the fuzz targets assume.
func TestAlipayQueryFuzzSeeds(t *testing.T) {
	key := readPrivateKey(t, "alipay_key.pem")
	rt := &fixedResponse{status: http.StatusOK}
	q := fuzzAlipayQuerier(t, rt)
	want := []TradeState{TradePaid, TradePaid, TradeRefunded, TradeClosed, TradeNotPaid, TradeNotPaid, TradeNotPaid, ""}
	for i, n := range alipayFuzzNodes {
		rt.body = alipayFuzzSigned(t, key, []byte(n), i%2 == 1)
		a, err := q.QueryTrade(t.Context(), TradeQuery{TradeNo: fuzzTradeNo})
		checkAnswer(t, "alipay", fuzzTradeNo, rt.body, a, err)
		if a.State != want[i] || (want[i] == "") != errors.Is(err, ErrQueryFailed) {
			t.Errorf("seed %d: %s, %v; want %s", i, a.State, err, want[i])
		}
	}
}
