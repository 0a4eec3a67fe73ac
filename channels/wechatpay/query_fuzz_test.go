package wechatpay

import (
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
)

// wechatFuzzOrders are answers as WeChat writes them, one per trade_state, and its 404.
var wechatFuzzOrders = []string{
	wechatOrder(channeltest.FuzzTradeNo, nil),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "REFUND", "trade_state_desc": "转入退款"}),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "NOTPAY", "transaction_id": nil, "success_time": nil, "payer": nil}),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "USERPAYING", "transaction_id": nil, "success_time": nil}),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "PAYERROR", "transaction_id": nil, "success_time": nil}),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "CLOSED", "transaction_id": nil, "success_time": nil, "payer": nil}),
	wechatOrder(channeltest.FuzzTradeNo, map[string]any{"trade_state": "REVOKED"}),
	`{"code":"ORDER_NOT_EXIST","message":"订单不存在"}`,
}

// FuzzWeChatPayQueryResponse fuzzes what follows a valid response signature, which the fuzzer
// cannot forge: the test signs the body it is given, as a 200 or a 404.
func FuzzWeChatPayQueryResponse(f *testing.F) {
	for i, o := range wechatFuzzOrders {
		f.Add([]byte(o), i == len(wechatFuzzOrders)-1)
	}
	f.Add([]byte(`{"code":"ORDER_NOT_EXIST","code":"SYSTEM_ERROR"}`), true)
	f.Add([]byte(`{"mchid":"`+wechatTestMchID+`","appid":"`+wechatTestAppID+`","out_trade_no":"`+channeltest.FuzzTradeNo+`","trade_state":"SUCCESS","amount":{"total":1e30}}`), false)
	signer := wechatSigner(f)
	rt := &channeltest.FixedResponse{}
	q := fuzzWeChatQuerier(f, rt)
	f.Fuzz(func(t *testing.T, body []byte, notFound bool) {
		rt.Status, rt.Body, rt.Header = http.StatusOK, body, wechatSignBody(t, signer, body, time.Now())
		if notFound {
			rt.Status = http.StatusNotFound
		}
		a, err := q.QueryTrade(t.Context(), channels.TradeQuery{TradeNo: channeltest.FuzzTradeNo})
		channeltest.CheckAnswer(t, "wechatpay", channeltest.FuzzTradeNo, body, a, err)
		switch {
		case errors.Is(err, channels.ErrBadSignature):
			t.Fatalf("a signed response refused as unsigned: %v", err)
		case notFound && err == nil && a.State != channels.TradeNotPaid:
			t.Fatalf("a 404 answered %s", a.State)
		}
	})
}

// fuzzWeChatQuerier asks through rt, trusting the test platform public key.
func fuzzWeChatQuerier(tb testing.TB, rt http.RoundTripper) channels.Querier {
	tb.Helper()
	q, err := NewQuerier(config.WeChatPay{MerchantPrivateKeyFile: filepath.Join("testdata", "other_key.pem"),
		MerchantSerialNo: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", APIBaseURL: "https://api.mch.weixin.test"},
		testWeChatPay(tb, wechatPubKeyMode), &http.Client{Transport: rt})
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// TestWeChatPayQueryFuzzSeeds: the realistic seeds mean what the fuzz target assumes.
func TestWeChatPayQueryFuzzSeeds(t *testing.T) {
	signer := wechatSigner(t)
	rt := &channeltest.FixedResponse{}
	q := fuzzWeChatQuerier(t, rt)
	want := []channels.TradeState{channels.TradePaid, channels.TradeRefunded, channels.TradeNotPaid, channels.TradeNotPaid, channels.TradeNotPaid, channels.TradeClosed, channels.TradeClosed, channels.TradeNotPaid}
	for i, o := range wechatFuzzOrders {
		rt.Status, rt.Body, rt.Header = http.StatusOK, []byte(o), wechatSignBody(t, signer, []byte(o), time.Now())
		if i == len(wechatFuzzOrders)-1 {
			rt.Status = http.StatusNotFound
		}
		a, err := q.QueryTrade(t.Context(), channels.TradeQuery{TradeNo: channeltest.FuzzTradeNo})
		channeltest.CheckAnswer(t, "wechatpay", channeltest.FuzzTradeNo, []byte(o), a, err)
		if err != nil || a.State != want[i] {
			t.Errorf("seed %d: %s, %v; want %s", i, a.State, err, want[i])
		}
	}
}
