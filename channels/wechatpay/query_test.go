package wechatpay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// TestWeChatPayQuery: each state of a trade at the fake, asked over HTTP through the SDK and
// read back as the notification of the same trade reads.
func TestWeChatPayQuery(t *testing.T) {
	s := testQuerySandbox(t)

	t.Run("paid", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("WP"), AmountFen: 8888, Status: simulate.FakePaid},
			channels.TradePaid, "SUCCESS", 1)
		ev := a.Events[0]
		channeltest.SameMoney(t, "paid", ev, s.Notified(t, tr, simulate.StatusPaid))
		if ev.NotifyID != channels.QueryNotifyID(tr.TxnID) || ev.Status != "SUCCESS" || !strings.Contains(string(ev.Raw), `"trade_state":"SUCCESS"`) {
			t.Errorf("notify id %q, status %q, raw %q", ev.NotifyID, ev.Status, ev.Raw)
		}
	})
	t.Run("paid in USD", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("WU"), AmountFen: 999, Currency: "USD", Status: simulate.FakePaid},
			channels.TradePaid, "", 1)
		channeltest.SameMoney(t, "paid", a.Events[0], s.Notified(t, tr, simulate.StatusPaid))
	})
	t.Run("refunded", func(t *testing.T) {
		// The order query does not state the refund: the payment alone.
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("WR"), AmountFen: 1250, RefundFen: 250, Status: simulate.FakeRefunded},
			channels.TradeRefunded, "REFUND", 1)
		channeltest.SameMoney(t, "payment", a.Events[0], s.Notified(t, tr, simulate.StatusPaid))
		if a.Events[0].NotifyID != channels.QueryNotifyID(tr.TxnID) {
			t.Errorf("notify id %q", a.Events[0].NotifyID)
		}
	})
	t.Run("closed", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("WC"), AmountFen: 500, Status: simulate.FakeClosed},
			channels.TradeClosed, "CLOSED", 1)
		ev := a.Events[0]
		if ev.Kind != payment.KindClosed || ev.NotifyID != "query:close:"+tr.TradeNo || ev.TradeNo != tr.TradeNo ||
			ev.ChannelTxnID != "" || ev.AmountFen != 500 || ev.Currency != "CNY" {
			t.Errorf("close event %s", channeltest.Brief(ev))
		}
	})
	c := s.Cfg.Channels.WeChatPay
	c.MerchantPrivateKeyFile = channeltest.WriteKeyFile(t, channeltest.OutsiderKey(t))
	other, err := NewQuerier(c, s.Channels["wechatpay"].(*Channel), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.RunSignedQuery(t, channeltest.SignedQuery{Channel: "wechatpay", Prefix: "W", Pending: "NOTPAY", NotFound: "ORDER_NOT_EXIST",
		Missing: "404", Other: other, Refused: "401"})
}

// wechatRequest is what a test server saw of the querier's request.
type wechatRequest struct {
	uri, host, auth, serial string
}

// wechatServer answers every request with status and body, with headers from sign (nil: none).
func wechatServer(t *testing.T, status int, body string, sign func([]byte) http.Header) (*httptest.Server, func() []wechatRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []wechatRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, wechatRequest{r.RequestURI, r.Host, r.Header.Get("Authorization"), r.Header.Get("Wechatpay-Serial")})
		mu.Unlock()
		if sign != nil {
			for k, vs := range sign([]byte(body)) {
				w.Header()[k] = vs
			}
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []wechatRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]wechatRequest(nil), seen...)
	}
}

// wechatQuerierAt is a querier for v sending to base, signing with the sandbox merchant key.
func wechatQuerierAt(t *testing.T, s *channeltest.Sandbox, v *Channel, base string) channels.Querier {
	t.Helper()
	c := s.Cfg.Channels.WeChatPay
	c.APIBaseURL = base
	c.MerchantPrivateKeyFile = channeltest.WriteKeyFile(t, s.MchKey)
	q, err := NewQuerier(c, v, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// wechatOrder is a query answer as WeChat writes it, with edits (nil deletes a field).
func wechatOrder(tradeNo string, edits map[string]any) string {
	o := map[string]any{
		"amount":           map[string]any{"currency": "CNY", "payer_currency": "CNY", "payer_total": 1234, "total": 1234},
		"appid":            wechatTestAppID,
		"attach":           "",
		"bank_type":        "OTHERS",
		"mchid":            wechatTestMchID,
		"out_trade_no":     tradeNo,
		"payer":            map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
		"promotion_detail": []any{},
		"success_time":     "2026-05-01T10:00:00+08:00",
		"trade_state":      "SUCCESS",
		"trade_state_desc": "支付成功",
		"trade_type":       "NATIVE",
		"transaction_id":   "4200001234202605011234567890",
	}
	b, _ := json.Marshal(withEdits(o, edits)) // plain values: cannot fail
	return string(b)
}

// TestWeChatPayQueryResponses: responses the fake never sends, each in front of the querier,
// verified with the platform public key.
func TestWeChatPayQueryResponses(t *testing.T) {
	s := testQuerySandbox(t)
	v := testWeChatPay(t, wechatPubKeyMode)
	signer := wechatSigner(t)
	signed := func(b []byte) http.Header { return wechatSignBody(t, signer, b, time.Now()) }
	const tradeNo = "T20260501-0001"
	order := func(edits map[string]any) string { return wechatOrder(tradeNo, edits) }
	unpaid := func(state string) string {
		return order(map[string]any{"trade_state": state, "transaction_id": nil, "success_time": nil, "payer": nil, "bank_type": nil})
	}
	other := signer
	other.Key = channeltest.OutsiderKey(t)

	tests := map[string]struct {
		status int
		body   string
		sign   func([]byte) http.Header
		want   error               // nil: an answer
		state  channels.TradeState // when want is nil
		events int
	}{
		"SUCCESS":                 {200, order(nil), signed, nil, channels.TradePaid, 1},
		"REFUND":                  {200, order(map[string]any{"trade_state": "REFUND"}), signed, nil, channels.TradeRefunded, 1},
		"NOTPAY":                  {200, unpaid("NOTPAY"), signed, nil, channels.TradeNotPaid, 0},
		"USERPAYING":              {200, unpaid("USERPAYING"), signed, nil, channels.TradeNotPaid, 0},
		"PAYERROR":                {200, unpaid("PAYERROR"), signed, nil, channels.TradeNotPaid, 0},
		"CLOSED":                  {200, unpaid("CLOSED"), signed, nil, channels.TradeClosed, 1},
		"REVOKED":                 {200, unpaid("REVOKED"), signed, nil, channels.TradeClosed, 1},
		"404 ORDER_NOT_EXIST":     {404, `{"code":"ORDER_NOT_EXIST","message":"订单不存在"}`, signed, nil, channels.TradeNotPaid, 0},
		"unknown trade_state":     {200, order(map[string]any{"trade_state": "PAID"}), signed, channels.ErrMalformed, "", 0},
		"another out_trade_no":    {200, wechatOrder("T20260501-0002", nil), signed, channels.ErrMalformed, "", 0},
		"another mchid":           {200, order(map[string]any{"mchid": "1900000002"}), signed, channels.ErrMalformed, "", 0},
		"an appid not ours":       {200, order(map[string]any{"appid": "wx1111111111111111"}), signed, channels.ErrMalformed, "", 0},
		"unpaid, another mchid":   {200, strings.Replace(unpaid("NOTPAY"), wechatTestMchID, "1900000002", 1), signed, channels.ErrMalformed, "", 0},
		"amount missing":          {200, order(map[string]any{"amount": nil}), signed, channels.ErrMalformed, "", 0},
		"negative amount":         {200, order(map[string]any{"amount": map[string]any{"total": -1}}), signed, channels.ErrMalformed, "", 0},
		"amount as a string":      {200, order(map[string]any{"amount": map[string]any{"total": "12.34"}}), signed, channels.ErrMalformed, "", 0},
		"transaction_id missing":  {200, order(map[string]any{"transaction_id": nil}), signed, channels.ErrMalformed, "", 0},
		"transaction_id too long": {200, order(map[string]any{"transaction_id": strings.Repeat("4", 129)}), signed, channels.ErrMalformed, "", 0},
		"bad success_time":        {200, order(map[string]any{"success_time": "2026-05-01 10:00:00"}), signed, channels.ErrMalformed, "", 0},
		"duplicate key":           {200, strings.Replace(order(nil), `{`, `{"trade_state":"NOTPAY",`, 1), signed, channels.ErrMalformed, "", 0},
		"not JSON":                {200, `<html>busy</html>`, signed, channels.ErrMalformed, "", 0},
		"204 without a body":      {204, ``, signed, channels.ErrMalformed, "", 0},
		"unsigned":                {200, order(nil), nil, channels.ErrBadSignature, "", 0},
		"signed by another key":   {200, order(nil), func(b []byte) http.Header { return wechatSignBody(t, other, b, time.Now()) }, channels.ErrBadSignature, "", 0},
		"stale":                   {200, order(nil), func(b []byte) http.Header { return wechatSignBody(t, signer, b, time.Now().Add(-6*time.Minute)) }, channels.ErrBadSignature, "", 0},
		"unknown serial":          {200, order(nil), func(b []byte) http.Header { h := signed(b); h.Set("Wechatpay-Serial", "PUB_KEY_ID_X"); return h }, channels.ErrBadSignature, "", 0},
		"signed, then edited":     {200, order(nil), func(b []byte) http.Header { return signed([]byte(strings.Replace(string(b), "SUCCESS", "NOTPAY", 1))) }, channels.ErrBadSignature, "", 0},
		"unsigned 404":            {404, `{"code":"ORDER_NOT_EXIST","message":"订单不存在"}`, nil, channels.ErrBadSignature, "", 0},
		"404 from a proxy":        {404, `<html>not found</html>`, nil, channels.ErrBadSignature, "", 0},
		"404 another code":        {404, `{"code":"RESOURCE_NOT_EXISTS","message":"?"}`, signed, channels.ErrQueryFailed, "", 0},
		"500":                     {500, `{"code":"SYSTEM_ERROR","message":"系统错误"}`, signed, channels.ErrQueryFailed, "", 0},
		"429":                     {429, `{"code":"FREQUENCY_LIMITED","message":"频率超限"}`, signed, channels.ErrQueryFailed, "", 0},
		"401 unsigned":            {401, `{"code":"SIGN_ERROR","message":"签名错误"}`, nil, channels.ErrQueryFailed, "", 0},
		"too long":                {200, order(map[string]any{"attach": strings.Repeat("x", outbound.ResponseLimit)}), signed, channels.ErrQueryFailed, "", 0},
		"signature-test probe 404": {404, `{"code":"ORDER_NOT_EXIST"}`, func(b []byte) http.Header {
			h := signed(b)
			h.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/AAAA")
			return h
		}, channels.ErrBadSignature, "", 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv, seen := wechatServer(t, tt.status, tt.body, tt.sign)
			a, err := wechatQuerierAt(t, s, v, srv.URL).QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tradeNo})
			reqs := seen()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.uri != "/v3/pay/transactions/out-trade-no/"+tradeNo+"?mchid="+wechatTestMchID ||
				!strings.HasPrefix(r.auth, `WECHATPAY2-SHA256-RSA2048 mchid="`+wechatTestMchID+`"`) || r.serial != wechatTestPubKeyID {
				t.Errorf("request %+v", r)
			}
			if tt.want != nil {
				channeltest.WantOnlyErr(t, err, tt.want, name)
				return
			}
			if err != nil {
				t.Fatalf("QueryTrade: %v", err)
			}
			if a.State != tt.state || len(a.Events) != tt.events {
				t.Fatalf("answer %s with %d events, want %s with %d", a.State, len(a.Events), tt.state, tt.events)
			}
			for _, ev := range a.Events {
				if ev.AmountFen != 1234 || ev.TradeNo != tradeNo || string(ev.Raw) != tt.body {
					t.Errorf("event %s, raw %q", channeltest.Brief(ev), ev.Raw)
				}
				if ev.Kind == payment.KindPaid && (ev.ChannelTxnID != "4200001234202605011234567890" ||
					!ev.PaidAt.Equal(time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC))) {
					t.Errorf("payment %s", channeltest.Brief(ev))
				}
			}
		})
	}
}

// TestWeChatPayQueryModes: the querier trusts what the verifier trusts, in each mode, and tells
// WeChat which key it verifies with.
func TestWeChatPayQueryModes(t *testing.T) {
	s := testQuerySandbox(t)
	k := testWeChatKeys(t)
	pub := wechatSigner(t)
	cert1, cert2 := pub, pub
	cert1.Serial, cert1.Key = k.serial1, k.cert1
	cert2.Serial, cert2.Key = k.serial2, k.cert2
	const tradeNo = "T20260501-0001"

	tests := map[string]struct {
		mode   wechatMode
		signer simulate.WeChatPaySigner
		ok     bool
	}{
		"public key":                        {wechatPubKeyMode, pub, true},
		"certificate":                       {wechatCertMode, cert1, true},
		"second certificate":                {wechatCertMode, cert2, true},
		"public key, certificates only":     {wechatCertMode, pub, false},
		"certificate, public key only":      {wechatPubKeyMode, cert1, false},
		"combined, public key":              {wechatCombinedMode, pub, true},
		"combined, certificate":             {wechatCombinedMode, cert2, true},
		"a certificate's serial, wrong key": {wechatCertMode, simulate.WeChatPaySigner{Serial: k.serial1, Key: k.cert2}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv, seen := wechatServer(t, 200, wechatOrder(tradeNo, nil), func(b []byte) http.Header {
				return wechatSignBody(t, tt.signer, b, time.Now())
			})
			v := testWeChatPay(t, tt.mode)
			a, err := wechatQuerierAt(t, s, v, srv.URL).QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tradeNo})
			switch {
			case tt.ok && (err != nil || a.State != channels.TradePaid):
				t.Errorf("answer %s, error %v; want PAID", a.State, err)
			case !tt.ok:
				channeltest.WantErr(t, err, channels.ErrBadSignature, name)
			}
			wantSerial, _ := v.verifier.GetSerial(context.Background())
			if r := seen(); len(r) != 1 || r[0].serial != wantSerial || wantSerial == "" {
				t.Errorf("requests %+v, want one with Wechatpay-Serial %q", r, wantSerial)
			}
		})
	}
}

// TestWeChatPayQueryTransport: an API that cannot be reached, or a caller that gives up, is a
// failed query that names where it went.
func TestWeChatPayQueryTransport(t *testing.T) {
	s := testQuerySandbox(t)
	base := channeltest.ClosedURL(t)
	err := s.WantTransportFailures(t, "wechatpay", wechatQuerierAt(t, s, s.Channels["wechatpay"].(*Channel), base), "T/1")
	if host := strings.TrimPrefix(base, "http://"); !strings.Contains(fmt.Sprint(err), host) || strings.Contains(fmt.Sprint(err), "api.mch.weixin.qq.com") {
		t.Errorf("error %v should name %s, the address asked", err, host)
	}
}

// TestNewWeChatPayQuerier: missing credentials are told apart from broken ones, and every
// refusal names its key without showing the key.
func TestNewWeChatPayQuerier(t *testing.T) {
	s := testQuerySandbox(t)
	v := s.Channels["wechatpay"].(*Channel)
	good := s.Cfg.Channels.WeChatPay
	good.MerchantPrivateKeyFile = channeltest.WriteKeyFile(t, s.MchKey)
	const secret = "c2VjcmV0LWtleS1tYXRlcmlhbA=="
	bad := channeltest.NotAKeyFile(t, secret)

	build := func(c config.WeChatPay) error { _, err := NewQuerier(c, v, nil); return err }
	channeltest.RunConfigRefusals(t, good, secret, build, map[string]channeltest.ConfigCase[config.WeChatPay]{
		"no merchant_private_key_file": {Edit: func(c *config.WeChatPay) { c.MerchantPrivateKeyFile = "" }, NoCreds: true, Key: "channels.wechatpay.merchant_private_key_file"},
		"no merchant_serial_no":        {Edit: func(c *config.WeChatPay) { c.MerchantSerialNo = "" }, NoCreds: true, Key: "channels.wechatpay.merchant_serial_no"},
		"serial with white space":      {Edit: func(c *config.WeChatPay) { c.MerchantSerialNo += " " }, Key: "channels.wechatpay.merchant_serial_no"},
		"unreadable key file":          {Edit: func(c *config.WeChatPay) { c.MerchantPrivateKeyFile = bad + ".missing" }, Key: "channels.wechatpay.merchant_private_key_file"},
		"not a key":                    {Edit: func(c *config.WeChatPay) { c.MerchantPrivateKeyFile = bad }, Key: "channels.wechatpay.merchant_private_key_file"},
		"a public key": {Edit: func(c *config.WeChatPay) {
			c.MerchantPrivateKeyFile = writePEM(t, simulate.PEMPublicKey(&s.MchKey.PublicKey))
		}, Key: "channels.wechatpay.merchant_private_key_file"},
		"api_base_url with a path": {Edit: func(c *config.WeChatPay) { c.APIBaseURL += "/prefix" }, Key: "channels.wechatpay.api_base_url"},
		"api_base_url not http":    {Edit: func(c *config.WeChatPay) { c.APIBaseURL = "ftp://example.com" }, Key: "channels.wechatpay.api_base_url"},
	})
	q, err := NewQuerier(good, v, nil)
	if err != nil {
		t.Fatalf("the sandbox configuration: %v", err)
	}
	if q.Name() != "wechatpay" {
		t.Errorf("name %q", q.Name())
	}
}

func writePEM(tb testing.TB, b []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "file.pem")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
