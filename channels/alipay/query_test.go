package alipay

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// TestAlipayQuery: each state of a trade at the fake, asked over HTTP and read back as the
// notification of the same trade reads.
func TestAlipayQuery(t *testing.T) {
	s := testQuerySandbox(t)

	t.Run("paid", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "alipay", TradeNo: channeltest.NewTradeNo("AP"), AmountFen: 8888, Status: simulate.FakePaid},
			channels.TradePaid, "TRADE_SUCCESS", 1)
		ev := a.Events[0]
		channeltest.SameMoney(t, "paid", ev, s.Notified(t, tr, simulate.StatusPaid))
		if ev.NotifyID != channels.QueryNotifyID(tr.TxnID) || ev.Status != "TRADE_SUCCESS" || !bytes.Contains(ev.Raw, []byte(`"alipay_trade_query_response"`)) {
			t.Errorf("notify id %q, status %q, raw %q", ev.NotifyID, ev.Status, ev.Raw)
		}
	})
	t.Run("refunded in full", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "alipay", TradeNo: channeltest.NewTradeNo("AR"), AmountFen: 1250, Status: simulate.FakeRefunded},
			channels.TradeRefunded, "TRADE_CLOSED", 2)
		channeltest.SameMoney(t, "payment", a.Events[0], s.Notified(t, tr, simulate.StatusPaid))
		channeltest.SameMoney(t, "refund", a.Events[1], s.Notified(t, tr, simulate.StatusRefund))
		// The answer names no refund: a running total under the payment.
		if r := a.Events[1]; r.RefundID != "" || !r.RefundIsTotal || r.NotifyID != "query:refund:"+tr.TxnID {
			t.Errorf("refund id %q total %v notify id %q, want a running total notified as query:refund:<txn>", r.RefundID, r.RefundIsTotal, r.NotifyID)
		}
		if a.Events[0].NotifyID != channels.QueryNotifyID(tr.TxnID) {
			t.Errorf("payment notify id %q", a.Events[0].NotifyID)
		}
	})
	t.Run("partly refunded", func(t *testing.T) {
		// Alipay keeps a partly refunded trade TRADE_SUCCESS: the query sees the payment only.
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "alipay", TradeNo: channeltest.NewTradeNo("AQ"), AmountFen: 1000, RefundFen: 300, Status: simulate.FakeRefunded},
			channels.TradePaid, "", 1)
		channeltest.SameMoney(t, "payment", a.Events[0], s.Notified(t, tr, simulate.StatusPaid))
	})
	t.Run("closed", func(t *testing.T) {
		tr, a := s.AskNew(t, simulate.FakeTrade{Channel: "alipay", TradeNo: channeltest.NewTradeNo("AC"), AmountFen: 500, Status: simulate.FakeClosed},
			channels.TradeClosed, "TRADE_CLOSED", 1)
		ev := a.Events[0]
		if ev.Kind != payment.KindClosed || ev.NotifyID != "query:close:"+tr.TradeNo || ev.TradeNo != tr.TradeNo ||
			ev.ChannelTxnID != tr.TxnID || ev.AmountFen != 500 {
			t.Errorf("close event %s", channeltest.Brief(ev))
		}
	})
	// The fake refuses the request (isv.invalid-signature, signed): Alipay could not be asked.
	c := s.Cfg.Channels.Alipay
	c.AppPrivateKeyFile = channeltest.WriteKeyFile(t, channeltest.OutsiderKey(t))
	other, err := NewQuerier(c, s.Channels["alipay"].(*Channel), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.RunSignedQuery(t, channeltest.SignedQuery{Channel: "alipay", Prefix: "A", Pending: "WAIT_BUYER_PAY", NotFound: "ACQ.TRADE_NOT_EXIST",
		Missing: "not-found", Other: other, Refused: "isv.invalid-signature"})
}

func pemPKCS1(key *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// alipaySigned is a response as Alipay writes it: node signed with key, sign after the node, or
// before it when signFirst.
func alipaySigned(tb testing.TB, key *rsa.PrivateKey, node string, signFirst bool) string {
	tb.Helper()
	sum := sha256.Sum256([]byte(node))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	sign := `"sign":"` + base64.StdEncoding.EncodeToString(sig) + `"`
	if signFirst {
		return `{` + sign + `,"alipay_trade_query_response":` + node + `}`
	}
	return `{"alipay_trade_query_response":` + node + `,` + sign + `}`
}

// alipayServer answers every request with status and body, and counts the requests.
func alipayServer(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// alipayQuerierAt is the sandbox's Alipay querier sending to url.
func alipayQuerierAt(t *testing.T, s *channeltest.Sandbox, url string) channels.Querier {
	t.Helper()
	c := s.Cfg.Channels.Alipay
	c.GatewayURL = url
	c.AppPrivateKeyFile = channeltest.WriteKeyFile(t, s.AppKey)
	q, err := NewQuerier(c, s.Channels["alipay"].(*Channel), &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestAlipayQueryResponses: responses the fake never sends, each in front of the querier.
func TestAlipayQueryResponses(t *testing.T) {
	s := testQuerySandbox(t)
	key := s.Signers["alipay"].(simulate.AlipaySigner).Key // the sandbox "Alipay" key
	const tradeNo = "T20260501-0001"
	paid := `{"code":"10000","msg":"Success","buyer_pay_amount":"12.34","out_trade_no":"` + tradeNo + `",` +
		`"send_pay_date":"2026-05-01 10:00:00","total_amount":"12.34","trade_no":"2026050122001400000000000001","trade_status":"%s"}`
	node := func(status string) string { return fmt.Sprintf(paid, status) }

	tests := map[string]struct {
		status int
		body   string
		want   error               // nil: an answer
		state  channels.TradeState // when want is nil
	}{
		"sign before the node":           {200, alipaySigned(t, key, node("TRADE_SUCCESS"), true), nil, channels.TradePaid},
		"TRADE_FINISHED":                 {200, alipaySigned(t, key, node("TRADE_FINISHED"), false), nil, channels.TradePaid},
		"10003 paying":                   {200, alipaySigned(t, key, `{"code":"10003","msg":"order success pay inprocess","out_trade_no":"`+tradeNo+`"}`, false), nil, channels.TradeNotPaid},
		"node with spaces":               {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), ",", " , "), false), nil, channels.TradePaid},
		"another out_trade_no":           {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), tradeNo, "T20260501-0002"), false), channels.ErrMalformed, ""},
		"out_trade_no missing":           {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), `"out_trade_no":"`+tradeNo+`",`, ""), false), channels.ErrMalformed, ""},
		"unknown trade_status":           {200, alipaySigned(t, key, node("TRADE_PAID"), false), channels.ErrMalformed, ""},
		"amount with three decimals":     {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), `"total_amount":"12.34"`, `"total_amount":"12.345"`), false), channels.ErrMalformed, ""},
		"amount as a number":             {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), `"total_amount":"12.34"`, `"total_amount":12.34`), false), channels.ErrMalformed, ""},
		"bad send_pay_date":              {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), "2026-05-01 10:00:00", "2026-05-01T10:00:00Z"), false), channels.ErrMalformed, ""},
		"refunded, total_amount missing": {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_CLOSED"), `,"total_amount":"12.34"`, ""), false), channels.ErrMalformed, ""},
		"trade_no missing":               {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), `,"trade_no":"2026050122001400000000000001"`, ""), false), channels.ErrMalformed, ""},
		"trade_no too long":              {200, alipaySigned(t, key, strings.ReplaceAll(node("TRADE_SUCCESS"), "2026050122001400000000000001", strings.Repeat("9", 129)), false), channels.ErrMalformed, ""},
		"duplicate key in the node":      {200, alipaySigned(t, key, strings.Replace(node("TRADE_SUCCESS"), `{`, `{"trade_status":"WAIT_BUYER_PAY",`, 1), false), channels.ErrMalformed, ""},
		"node twice": {200, `{"alipay_trade_query_response":` + node("WAIT_BUYER_PAY") + `,` +
			strings.TrimPrefix(alipaySigned(t, key, node("TRADE_SUCCESS"), false), `{`), channels.ErrMalformed, ""},
		"signed null":            {200, alipaySigned(t, key, `null`, false), channels.ErrMalformed, ""},
		"service unavailable":    {200, alipaySigned(t, key, `{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error"}`, false), channels.ErrQueryFailed, ""},
		"other business failure": {200, alipaySigned(t, key, `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR"}`, false), channels.ErrQueryFailed, ""},
		"signed by another key":  {200, alipaySigned(t, channeltest.OutsiderKey(t), node("TRADE_SUCCESS"), false), channels.ErrBadSignature, ""},
		"sign not base64":        {200, `{"alipay_trade_query_response":` + node("TRADE_SUCCESS") + `,"sign":"***"}`, channels.ErrBadSignature, ""},
		"unsigned node":          {200, `{"alipay_trade_query_response":` + node("TRADE_SUCCESS") + `}`, channels.ErrBadSignature, ""},
		"unsigned error_response": {200, `{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id"}}`,
			channels.ErrBadSignature, ""},
		"unsigned not found": {200, `{"alipay_trade_query_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST"}}`,
			channels.ErrBadSignature, ""},
		// The SDK would download an unknown certificate in production mode; this querier never does.
		"unknown alipay_cert_sn": {200, strings.Replace(alipaySigned(t, channeltest.OutsiderKey(t), node("TRADE_SUCCESS"), false), `{`, `{"alipay_cert_sn":"0123456789abcdef",`, 1),
			channels.ErrBadSignature, ""},
		"signed, then edited":             {200, strings.Replace(alipaySigned(t, key, node("WAIT_BUYER_PAY"), false), "WAIT_BUYER_PAY", "TRADE_SUCCESS", 1), channels.ErrBadSignature, ""},
		"not JSON":                        {200, `<html>busy</html>`, channels.ErrMalformed, ""},
		"neither node nor error_response": {200, `{"sign":"AAAA"}`, channels.ErrMalformed, ""},
		"HTTP 502":                        {502, alipaySigned(t, key, node("TRADE_SUCCESS"), false), channels.ErrQueryFailed, ""},
		"HTTP 404":                        {404, `not found`, channels.ErrQueryFailed, ""},
		"too long":                        {200, alipaySigned(t, key, strings.Replace(node("TRADE_SUCCESS"), `"msg":"Success"`, `"msg":"`+strings.Repeat("x", outbound.ResponseLimit)+`"`, 1), false), channels.ErrQueryFailed, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv, n := alipayServer(t, tt.status, tt.body)
			a, err := alipayQuerierAt(t, s, srv.URL+"/gateway.do").QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tradeNo})
			if got := n.Load(); got != 1 {
				t.Errorf("%d requests, want exactly 1 (no certificate download, no retry)", got)
			}
			if tt.want != nil {
				channeltest.WantOnlyErr(t, err, tt.want, name)
				return
			}
			if err != nil {
				t.Fatalf("QueryTrade: %v", err)
			}
			if a.State != tt.state {
				t.Errorf("state %s, want %s", a.State, tt.state)
			}
			for _, ev := range a.Events {
				if ev.AmountFen != 1234 || ev.ChannelTxnID != "2026050122001400000000000001" || !bytes.Equal(ev.Raw, []byte(tt.body)) {
					t.Errorf("event %s, raw %q", channeltest.Brief(ev), ev.Raw)
				}
				if want := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC); !ev.PaidAt.Equal(want) {
					t.Errorf("paid at %s, want %s (Beijing time)", ev.PaidAt, want)
				}
			}
		})
	}
}

// TestAlipayQueryTransport: a gateway that cannot be reached, or a caller that gives up, is a
// failed query that says so.
func TestAlipayQueryTransport(t *testing.T) {
	s := testQuerySandbox(t)
	s.WantTransportFailures(t, "alipay", alipayQuerierAt(t, s, channeltest.ClosedURL(t)+"/gateway.do"), "T 1")
}

// TestNewAlipayQuerier: missing credentials are told apart from broken ones, and every refusal
// names its key without showing the key.
func TestNewAlipayQuerier(t *testing.T) {
	s := testQuerySandbox(t)
	v := s.Channels["alipay"].(*Channel)
	good := s.Cfg.Channels.Alipay
	good.AppPrivateKeyFile = channeltest.WriteKeyFile(t, s.AppKey)
	const secret = "c2VjcmV0LWtleS1tYXRlcmlhbA" // must never be echoed
	bad := channeltest.NotAKeyFile(t, secret)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}

	build := func(c config.Alipay) error { _, err := NewQuerier(c, v, nil); return err }
	channeltest.RunConfigRefusals(t, good, secret, build, map[string]channeltest.ConfigCase[config.Alipay]{
		"no app_private_key_file": {Edit: func(c *config.Alipay) { c.AppPrivateKeyFile = "" }, NoCreds: true, Key: "channels.alipay.app_private_key_file"},
		"unreadable key file":     {Edit: func(c *config.Alipay) { c.AppPrivateKeyFile = bad + ".missing" }, Key: "channels.alipay.app_private_key_file"},
		"not a key":               {Edit: func(c *config.Alipay) { c.AppPrivateKeyFile = bad }, Key: "channels.alipay.app_private_key_file"},
		"1024-bit key":            {Edit: func(c *config.Alipay) { c.AppPrivateKeyFile = channeltest.WriteKeyFile(t, small) }, Key: "channels.alipay.app_private_key_file"},
		"no gateway_url":          {Edit: func(c *config.Alipay) { c.GatewayURL = "" }, Key: "channels.alipay.gateway_url"},
		"relative gateway_url":    {Edit: func(c *config.Alipay) { c.GatewayURL = "/gateway.do" }, Key: "channels.alipay.gateway_url"},
		"no app_id":               {Edit: func(c *config.Alipay) { c.AppID = "" }, Key: "channels.alipay.app_id"},
	})
	if _, err := NewQuerier(good, v, nil); err != nil {
		t.Errorf("the sandbox configuration: %v", err)
	}
	// A PKCS#1 key file works as well as PKCS#8.
	pkcs1 := filepath.Join(t.TempDir(), "pkcs1.pem")
	if err := os.WriteFile(pkcs1, pemPKCS1(s.AppKey), 0o600); err != nil {
		t.Fatal(err)
	}
	c := good
	c.AppPrivateKeyFile = pkcs1
	q, err := NewQuerier(c, v, nil)
	if err != nil {
		t.Fatalf("PKCS#1 key: %v", err)
	}
	tr := s.Add(t, simulate.FakeTrade{Channel: "alipay", TradeNo: channeltest.NewTradeNo("A1"), AmountFen: 100, Status: simulate.FakePaid})
	if a, err := q.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tr.TradeNo}); err != nil || a.State != channels.TradePaid {
		t.Errorf("PKCS#1 key: %v %v", a.State, err)
	}
}
