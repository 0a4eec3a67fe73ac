package simulate

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/smartwalle/alipay/v3"
)

// queryFake is a fake channel over HTTP on fresh sandbox keys, with the keys both sides hold.
type queryFake struct {
	fake *Fake
	url  string
	man  Manifest
	dir  string

	alipayKey    *rsa.PrivateKey // "Alipay"'s, signs answers
	alipayPub    *rsa.PublicKey
	appKey       *rsa.PrivateKey // the merchant's, signs requests
	platformKey  *rsa.PrivateKey // WeChat's, signs answers
	platformPub  *rsa.PublicKey
	merchantKey  *rsa.PrivateKey // the merchant's WeChat API key
	merchantPub  *rsa.PublicKey
	merchantCert string // its serial
}

func startFakeForQueries(t *testing.T) *queryFake {
	t.Helper()
	f, srv, man := newFakeOverHTTP(t)
	dir := f.dir
	r := keyReader{dir: dir}
	q := &queryFake{fake: f, url: srv.URL, man: man, dir: dir,
		alipayKey: r.privateKey(man.Alipay.PrivateKeyFile), appKey: r.privateKey(man.Alipay.AppPrivateKeyFile),
		platformKey: r.privateKey(man.WeChatPay.PrivateKeyFile), merchantKey: r.privateKey(man.WeChatPay.MerchantPrivateKeyFile),
		merchantCert: man.WeChatPay.MerchantSerialNo}
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, k := range []struct {
		dst  **rsa.PublicKey
		name string
	}{{&q.alipayPub, man.Alipay.PublicKeyFile}, {&q.platformPub, man.WeChatPay.PublicKeyFile}, {&q.merchantPub, man.WeChatPay.MerchantPublicKeyFile}} {
		var err error
		if *k.dst, err = loadFakePublicKey(dir, k.name); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

func (q *queryFake) add(t *testing.T, tr FakeTrade) FakeTrade {
	t.Helper()
	tr, err := q.fake.Add(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// alipayForm is an alipay.trade.query request for outTradeNo, signed with key, edited by edit
// before signing.
func (q *queryFake) alipayForm(t *testing.T, key *rsa.PrivateKey, outTradeNo string, edit func(url.Values)) url.Values {
	t.Helper()
	v := url.Values{}
	v.Set("app_id", q.man.Alipay.AppID)
	v.Set("method", "alipay.trade.query")
	v.Set("format", "JSON")
	v.Set("charset", "utf-8")
	v.Set("sign_type", "RSA2")
	v.Set("timestamp", time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02 15:04:05"))
	v.Set("version", "1.0")
	v.Set("biz_content", `{"out_trade_no":"`+outTradeNo+`"}`)
	if edit != nil {
		edit(v)
	}
	var pairs []string
	for k := range v {
		if v.Get(k) != "" {
			pairs = append(pairs, k+"="+v.Get(k))
		}
	}
	sort.Strings(pairs)
	sum := sha256.Sum256([]byte(strings.Join(pairs, "&")))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	v.Set("sign", base64.StdEncoding.EncodeToString(sig))
	return v
}

// readAll is the whole body of resp, the answer to a request that returned err; an error of the
// request or of reading fails t.
func readAll(t *testing.T, resp *http.Response, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// alipayAsk posts form and returns the response's node (raw), the node decoded, and whether
// sign verified over the raw node with the "Alipay" public key.
func (q *queryFake) alipayAsk(t *testing.T, form url.Values) (name string, node map[string]string, signed bool) {
	t.Helper()
	resp, err := http.PostForm(q.url+"/gateway.do", form)
	body := readAll(t, resp, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d %s: Alipay answers 200", resp.StatusCode, body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("response %s: %v", body, err)
	}
	for k, raw := range top {
		if k == "sign" {
			continue
		}
		name = k
		if err := json.Unmarshal(raw, &node); err != nil {
			t.Fatalf("node %s: %v", raw, err)
		}
		var sign string
		if s, ok := top["sign"]; ok {
			if err := json.Unmarshal(s, &sign); err != nil {
				t.Fatal(err)
			}
			sig, err := base64.StdEncoding.DecodeString(sign)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(raw)
			signed = rsa.VerifyPKCS1v15(q.alipayPub, crypto.SHA256, sum[:], sig) == nil
		}
	}
	if len(top) > 2 || name == "" {
		t.Fatalf("response %s: want one node and sign", body)
	}
	return name, node, signed
}

// TestFakeAlipayQuery: what the fake's gateway says about each trade, signed over the node's
// raw bytes with the sandbox Alipay key.
func TestFakeAlipayQuery(t *testing.T) {
	q := startFakeForQueries(t)
	at := time.Date(2026, 5, 1, 2, 3, 4, 0, time.UTC)
	tests := map[string]struct {
		trade FakeTrade
		want  map[string]string
	}{
		"paid": {FakeTrade{AmountFen: 8888, Status: FakePaid},
			map[string]string{"code": "10000", "trade_status": "TRADE_SUCCESS", "total_amount": "88.88", "send_pay_date": "2026-05-01 10:03:04", "receipt_amount": "88.88"}},
		"pending": {FakeTrade{AmountFen: 100, Status: FakePending},
			map[string]string{"code": "10000", "trade_status": "WAIT_BUYER_PAY", "total_amount": "1.00", "send_pay_date": ""}},
		"closed": {FakeTrade{AmountFen: 100, Status: FakeClosed},
			map[string]string{"code": "10000", "trade_status": "TRADE_CLOSED", "total_amount": "1.00", "send_pay_date": ""}},
		"refunded in full": {FakeTrade{AmountFen: 100, Status: FakeRefunded},
			map[string]string{"code": "10000", "trade_status": "TRADE_CLOSED", "send_pay_date": "2026-05-01 10:03:04"}},
		"refunded in full, amount given": {FakeTrade{AmountFen: 100, RefundFen: 100, Status: FakeRefunded},
			map[string]string{"code": "10000", "trade_status": "TRADE_CLOSED", "send_pay_date": "2026-05-01 10:03:04"}},
		"refunded in part": {FakeTrade{AmountFen: 100, RefundFen: 40, Status: FakeRefunded},
			map[string]string{"code": "10000", "trade_status": "TRADE_SUCCESS", "send_pay_date": "2026-05-01 10:03:04"}},
	}
	i := 0
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			i++
			tt.trade.Channel, tt.trade.TradeNo, tt.trade.PaidAt = "alipay", "TA"+strings.Repeat("0", i), at
			tr := q.add(t, tt.trade)
			node, got, signed := q.alipayAsk(t, q.alipayForm(t, q.appKey, tr.TradeNo, nil))
			if node != "alipay_trade_query_response" || !signed {
				t.Fatalf("node %q signed=%v", node, signed)
			}
			tt.want["out_trade_no"], tt.want["trade_no"] = tr.TradeNo, tr.TxnID
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if n := q.fake.Asked("alipay", tr.TradeNo); n != 1 {
				t.Errorf("asked %d times, want 1", n)
			}
		})
	}

	t.Run("unknown trade", func(t *testing.T) {
		node, got, signed := q.alipayAsk(t, q.alipayForm(t, q.appKey, "TA-unknown", nil))
		if node != "alipay_trade_query_response" || !signed || got["code"] != "40004" || got["sub_code"] != "ACQ.TRADE_NOT_EXIST" ||
			got["out_trade_no"] != "TA-unknown" {
			t.Errorf("node %q signed=%v %v", node, signed, got)
		}
		if n := q.fake.Asked("alipay", "TA-unknown"); n != 1 {
			t.Errorf("asked %d times, want 1", n)
		}
	})

	other := testenv.NewRSAKey(t)
	refusals := map[string]struct {
		form    url.Values
		subCode string
	}{
		"signed with another key": {q.alipayForm(t, other, "TA-r1", nil), "isv.invalid-signature"},
		"signed, then edited": {func() url.Values {
			v := q.alipayForm(t, q.appKey, "TA-r2", nil)
			v.Set("biz_content", `{"out_trade_no":"TA-r3"}`)
			return v
		}(), "isv.invalid-signature"},
		"sign_type left out of the signature": {func() url.Values {
			v := q.alipayForm(t, q.appKey, "TA-r4", func(v url.Values) { v.Del("sign_type") })
			v.Set("sign_type", "RSA2")
			return v
		}(), "isv.invalid-signature"},
		"another app_id":  {q.alipayForm(t, q.appKey, "TA-r5", func(v url.Values) { v.Set("app_id", "2021000000000001") }), "isv.invalid-app-id"},
		"RSA":             {q.alipayForm(t, q.appKey, "TA-r6", func(v url.Values) { v.Set("sign_type", "RSA") }), "isv.invalid-signature-type"},
		"old timestamp":   {q.alipayForm(t, q.appKey, "TA-r7", func(v url.Values) { v.Set("timestamp", "2020-01-01 00:00:00") }), "isv.invalid-timestamp"},
		"no out_trade_no": {q.alipayForm(t, q.appKey, "", func(v url.Values) { v.Set("biz_content", `{"trade_no":"2026"}`) }), "isv.missing-out-trade-no"},
		"charset gbk":     {q.alipayForm(t, q.appKey, "TA-r8", func(v url.Values) { v.Set("charset", "gbk") }), "isv.invalid-charset"},
		"no sign":         {func() url.Values { v := q.alipayForm(t, q.appKey, "TA-r9", nil); v.Del("sign"); return v }(), "isv.invalid-signature"},
		"sign not base64": {func() url.Values { v := q.alipayForm(t, q.appKey, "TA-r9", nil); v.Set("sign", "***"); return v }(), "isv.invalid-signature"},
	}
	for name, tt := range refusals {
		t.Run(name, func(t *testing.T) {
			node, got, signed := q.alipayAsk(t, tt.form)
			if node != "alipay_trade_query_response" || !signed || got["code"] != "40002" || got["sub_code"] != tt.subCode {
				t.Errorf("node %q signed=%v %v, want a signed 40002 %s", node, signed, got, tt.subCode)
			}
			var biz struct {
				OutTradeNo string `json:"out_trade_no"`
			}
			_ = json.Unmarshal([]byte(tt.form.Get("biz_content")), &biz)
			if n := q.fake.Asked("alipay", biz.OutTradeNo); n != 0 {
				t.Errorf("a refused request looked the trade up (%d)", n)
			}
		})
	}
	t.Run("another method", func(t *testing.T) {
		node, got, signed := q.alipayAsk(t, q.alipayForm(t, q.appKey, "TA-m", func(v url.Values) { v.Set("method", "alipay.trade.refund") }))
		if node != "error_response" || signed || got["sub_code"] != "isv.invalid-method" {
			t.Errorf("node %q signed=%v %v, want an unsigned error_response", node, signed, got)
		}
	})
}

// TestFakeAlipayCorrupt: corrupted answers fail verification, on this fake only, until turned off.
func TestFakeAlipayCorrupt(t *testing.T) {
	q, other := startFakeForQueries(t), startFakeForQueries(t)
	q.add(t, FakeTrade{Channel: "alipay", TradeNo: "TC1", AmountFen: 100, Status: FakePaid})
	other.add(t, FakeTrade{Channel: "alipay", TradeNo: "TC1", AmountFen: 100, Status: FakePaid})
	signed := func(q *queryFake) bool {
		_, got, ok := q.alipayAsk(t, q.alipayForm(t, q.appKey, "TC1", nil))
		if got["trade_status"] != "TRADE_SUCCESS" {
			t.Fatalf("node %v", got)
		}
		return ok
	}
	q.fake.Break("alipay", true)
	if signed(q) {
		t.Error("a corrupted answer verified")
	}
	if !signed(other) {
		t.Error("another fake's answer was corrupted too")
	}
	q.fake.Break("alipay", false)
	if !signed(q) {
		t.Error("still corrupted after turning it off")
	}
}

// TestFakeAlipayWithSDK: the smartwalle/alipay client, in its ordinary public-key set-up, reads the
// fake's answers: the request signature it makes is the one the fake checks, and the response
// signature it checks is the one the fake makes.
func TestFakeAlipayWithSDK(t *testing.T) {
	q := startFakeForQueries(t)
	tr := q.add(t, FakeTrade{Channel: "alipay", TradeNo: "TS1", AmountFen: 1999, Status: FakePaid})
	c, err := alipay.New(q.man.Alipay.AppID, string(PEMPrivateKey(q.appKey)), false,
		alipay.WithSandboxGateway(q.url+"/gateway.do"), alipay.WithTimeLocation(time.FixedZone("CST", 8*3600)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayPublicKey(string(PEMPublicKey(q.alipayPub))); err != nil {
		t.Fatal(err)
	}
	rsp, err := c.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: tr.TradeNo})
	if err != nil {
		t.Fatal(err)
	}
	if rsp.Code != alipay.CodeSuccess || rsp.TradeStatus != alipay.TradeStatusSuccess || rsp.TradeNo != tr.TxnID || rsp.TotalAmount != "19.99" {
		t.Errorf("answer %+v", rsp)
	}
	rsp, err = c.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "TS-unknown"})
	if err != nil || rsp.Code != alipay.CodeBusinessFailed || rsp.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Errorf("unknown trade: %+v, %v", rsp, err)
	}
	q.fake.Break("alipay", true)
	if _, err := c.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: tr.TradeNo}); err == nil {
		t.Error("the SDK accepted a corrupted signature")
	}
}
