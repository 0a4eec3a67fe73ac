package alipay

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
)

// fuzzAlipayQuerier asks through rt, trusting testdata's Alipay key (alipay_key.pem signs).
func fuzzAlipayQuerier(tb testing.TB, rt http.RoundTripper) channels.Querier {
	tb.Helper()
	q, err := NewQuerier(config.Alipay{AppID: testAppID, AppPrivateKeyFile: filepath.Join("testdata", "other_key.pem"),
		GatewayURL: "https://openapi.alipay.test/gateway.do"}, New(testAppID, "", testAlipayPublicKey(tb)), &http.Client{Transport: rt})
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// alipayFuzzNodes are answers as Alipay writes them, one per state the querier knows.
var alipayFuzzNodes = []string{
	`{"code":"10000","msg":"Success","buyer_logon_id":"159****5620","buyer_pay_amount":"88.88","buyer_user_id":"2088102177846875","invoice_amount":"88.88","out_trade_no":"` + channeltest.FuzzTradeNo + `","point_amount":"0.00","receipt_amount":"88.88","send_pay_date":"2026-05-01 10:00:00","total_amount":"88.88","trade_no":"2026050122001400000000000001","trade_status":"TRADE_SUCCESS"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + channeltest.FuzzTradeNo + `","send_pay_date":"2026-05-01 10:00:00","total_amount":"1","trade_no":"2026050122001400000000000001","trade_status":"TRADE_FINISHED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + channeltest.FuzzTradeNo + `","send_pay_date":"2026-05-01 10:00:00","total_amount":"0.50","trade_no":"2026050122001400000000000001","trade_status":"TRADE_CLOSED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + channeltest.FuzzTradeNo + `","total_amount":"0.50","trade_no":"2026050122001400000000000001","trade_status":"TRADE_CLOSED"}`,
	`{"code":"10000","msg":"Success","out_trade_no":"` + channeltest.FuzzTradeNo + `","total_amount":"0.50","trade_status":"WAIT_BUYER_PAY"}`,
	`{"code":"10003","msg":"order success pay inprocess","out_trade_no":"` + channeltest.FuzzTradeNo + `"}`,
	`{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在","buyer_pay_amount":"0.00","out_trade_no":"` + channeltest.FuzzTradeNo + `"}`,
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

// FuzzAlipayQueryResponse feeds whole response bodies: the SDK's decoding and our reading of its
// errors, before any signature holds, and the signed seeds' path beyond.
func FuzzAlipayQueryResponse(f *testing.F) {
	key := channeltest.ReadPrivateKey(f, "alipay_key.pem")
	for i, n := range alipayFuzzNodes {
		f.Add(alipayFuzzSigned(f, key, []byte(n), i%2 == 1))
	}
	f.Add([]byte(`{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id"}}`))
	f.Add([]byte(`{"alipay_trade_query_response":null}`))
	f.Add([]byte(`{"alipay_trade_query_response":"AAAA","sign":"AAAA"}`))
	f.Add([]byte(`{"alipay_trade_query_response":{},"sign":"AAAA","alipay_cert_sn":"x"}`))
	rt := &channeltest.FixedResponse{Status: http.StatusOK}
	q := fuzzAlipayQuerier(f, rt)
	f.Fuzz(func(t *testing.T, body []byte) {
		rt.Body = body
		a, err := q.QueryTrade(t.Context(), channels.TradeQuery{TradeNo: channeltest.FuzzTradeNo})
		channeltest.CheckAnswer(t, "alipay", channeltest.FuzzTradeNo, body, a, err)
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
	key := channeltest.ReadPrivateKey(f, "alipay_key.pem")
	rt := &channeltest.FixedResponse{Status: http.StatusOK}
	q := fuzzAlipayQuerier(f, rt)
	f.Fuzz(func(t *testing.T, node []byte, signFirst bool) {
		rt.Body = alipayFuzzSigned(t, key, node, signFirst)
		a, err := q.QueryTrade(t.Context(), channels.TradeQuery{TradeNo: channeltest.FuzzTradeNo})
		channeltest.CheckAnswer(t, "alipay", channeltest.FuzzTradeNo, rt.Body, a, err)
		// One JSON value, signed as it stands, is never a bad signature (a JSON string is the
		// encrypted form, which the SDK tries to decode before verifying).
		trimmed := bytes.TrimSpace(node)
		if errors.Is(err, channels.ErrBadSignature) && json.Valid(node) && bytes.Equal(trimmed, node) && trimmed[0] != '"' {
			t.Fatalf("a signed node refused as unsigned: %v", err)
		}
	})
}

// TestAlipayQueryFuzzSeeds: the realistic seeds mean what the fuzz targets assume.
func TestAlipayQueryFuzzSeeds(t *testing.T) {
	key := channeltest.ReadPrivateKey(t, "alipay_key.pem")
	rt := &channeltest.FixedResponse{Status: http.StatusOK}
	q := fuzzAlipayQuerier(t, rt)
	want := []channels.TradeState{channels.TradePaid, channels.TradePaid, channels.TradeRefunded, channels.TradeClosed, channels.TradeNotPaid, channels.TradeNotPaid, channels.TradeNotPaid, ""}
	for i, n := range alipayFuzzNodes {
		rt.Body = alipayFuzzSigned(t, key, []byte(n), i%2 == 1)
		a, err := q.QueryTrade(t.Context(), channels.TradeQuery{TradeNo: channeltest.FuzzTradeNo})
		channeltest.CheckAnswer(t, "alipay", channeltest.FuzzTradeNo, rt.Body, a, err)
		if a.State != want[i] || (want[i] == "") != errors.Is(err, channels.ErrQueryFailed) {
			t.Errorf("seed %d: %s, %v; want %s", i, a.State, err, want[i])
		}
	}
}
