package simulate

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
)

// wechatAsk GETs uri, signed as a merchant with key and serial at ts, and returns the status,
// the body and whether the response's Wechatpay-* signature verified with the platform key.
func (q *queryFake) wechatAsk(t *testing.T, uri string, key *rsa.PrivateKey, serial string, ts time.Time) (int, map[string]any, bool) {
	t.Helper()
	stamp, nonce := strconv.FormatInt(ts.Unix(), 10), wechatNonce(32)
	sum := sha256.Sum256([]byte("GET\n" + uri + "\n" + stamp + "\n" + nonce + "\n\n"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, q.url+uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", `WECHATPAY2-SHA256-RSA2048 mchid="`+q.man.WeChatPay.MchID+`",nonce_str="`+nonce+
		`",timestamp="`+stamp+`",serial_no="`+serial+`",signature="`+base64.StdEncoding.EncodeToString(sig)+`"`)
	resp, err := http.DefaultClient.Do(req)
	body := readAll(t, resp, err)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("HTTP %d %s: %v", resp.StatusCode, body, err)
	}
	h := resp.Header
	rsig, err := base64.StdEncoding.DecodeString(h.Get("Wechatpay-Signature"))
	if err != nil {
		t.Fatal(err)
	}
	rsum := sha256.Sum256([]byte(h.Get("Wechatpay-Timestamp") + "\n" + h.Get("Wechatpay-Nonce") + "\n" + string(body) + "\n"))
	signed := h.Get("Wechatpay-Serial") == q.man.WeChatPay.PublicKeyID &&
		rsa.VerifyPKCS1v15(q.platformPub, crypto.SHA256, rsum[:], rsig) == nil
	return resp.StatusCode, got, signed
}

func wechatQueryURI(tradeNo, mchID string) string {
	return "/v3/pay/transactions/out-trade-no/" + url.PathEscape(tradeNo) + "?mchid=" + mchID
}

// TestFakeWeChatPayQuery: what the fake says about each trade, signed with the platform key as
// every WeChat response is, errors included.
func TestFakeWeChatPayQuery(t *testing.T) {
	q := startFakeForQueries(t)
	mch := q.man.WeChatPay.MchID
	at := time.Date(2026, 5, 1, 2, 3, 4, 0, time.UTC)
	tests := map[string]struct {
		trade FakeTrade
		state string
		paid  bool
	}{
		"paid":     {FakeTrade{TradeNo: "TW1", AmountFen: 8888, Status: FakePaid}, "SUCCESS", true},
		"refunded": {FakeTrade{TradeNo: "TW2", AmountFen: 8888, RefundFen: 88, Status: FakeRefunded}, "REFUND", true},
		"closed":   {FakeTrade{TradeNo: "TW3", AmountFen: 100, Status: FakeClosed}, "CLOSED", false},
		"pending":  {FakeTrade{TradeNo: "TW4", AmountFen: 100, Status: FakePending}, "NOTPAY", false},
		"in USD":   {FakeTrade{TradeNo: "TW5", AmountFen: 100, Currency: "USD", Status: FakePaid}, "SUCCESS", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.trade.Channel, tt.trade.PaidAt = "wechatpay", at
			tr := q.add(t, tt.trade)
			status, got, signed := q.wechatAsk(t, wechatQueryURI(tr.TradeNo, mch), q.merchantKey, q.merchantCert, time.Now())
			if status != http.StatusOK || !signed {
				t.Fatalf("HTTP %d, signed=%v", status, signed)
			}
			amount, _ := got["amount"].(map[string]any)
			if got["trade_state"] != tt.state || got["out_trade_no"] != tr.TradeNo || got["mchid"] != mch ||
				got["appid"] != q.man.WeChatPay.AppID || amount["total"] != float64(tr.AmountFen) || amount["currency"] != tr.Currency {
				t.Errorf("order %v", got)
			}
			txn, hasTxn := got["transaction_id"]
			if tt.paid != hasTxn || tt.paid && (txn != tr.TxnID || got["success_time"] != "2026-05-01T10:03:04+08:00") {
				t.Errorf("transaction_id %v, success_time %v (paid=%v)", txn, got["success_time"], tt.paid)
			}
			if n := q.fake.Asked("wechatpay", tr.TradeNo); n != 1 {
				t.Errorf("asked %d times, want 1", n)
			}
		})
	}

	other := testenv.NewRSAKey(t)
	refusals := map[string]struct {
		uri    string
		key    *rsa.PrivateKey
		serial string
		ts     time.Time
		status int
		code   string
	}{
		"unknown trade":           {wechatQueryURI("TW-unknown", mch), q.merchantKey, q.merchantCert, time.Now(), 404, "ORDER_NOT_EXIST"},
		"signed with another key": {wechatQueryURI("TW-r1", mch), other, q.merchantCert, time.Now(), 401, "SIGN_ERROR"},
		"another serial":          {wechatQueryURI("TW-r2", mch), q.merchantKey, "0123", time.Now(), 401, "SIGN_ERROR"},
		"old timestamp":           {wechatQueryURI("TW-r3", mch), q.merchantKey, q.merchantCert, time.Now().Add(-6 * time.Minute), 401, "SIGN_ERROR"},
		"another mchid":           {wechatQueryURI("TW-r4", "1900000002"), q.merchantKey, q.merchantCert, time.Now(), 400, "PARAM_ERROR"},
	}
	for name, tt := range refusals {
		t.Run(name, func(t *testing.T) {
			status, got, signed := q.wechatAsk(t, tt.uri, tt.key, tt.serial, tt.ts)
			if status != tt.status || got["code"] != tt.code || !signed {
				t.Errorf("HTTP %d %v signed=%v, want a signed %d %s", status, got, signed, tt.status, tt.code)
			}
		})
	}
	if n := q.fake.Asked("wechatpay", "TW-r1") + q.fake.Asked("wechatpay", "TW-r2") + q.fake.Asked("wechatpay", "TW-r3"); n != 0 {
		t.Errorf("refused requests looked trades up %d times", n)
	}

	t.Run("signature over another URI", func(t *testing.T) {
		// The fake checks what was sent: a signature made for one trade does not ask about another.
		stamp, nonce := strconv.FormatInt(time.Now().Unix(), 10), wechatNonce(32)
		sum := sha256.Sum256([]byte("GET\n" + wechatQueryURI("TW1", mch) + "\n" + stamp + "\n" + nonce + "\n\n"))
		sig, _ := rsa.SignPKCS1v15(rand.Reader, q.merchantKey, crypto.SHA256, sum[:])
		req, _ := http.NewRequest(http.MethodGet, q.url+wechatQueryURI("TW2", mch), nil)
		req.Header.Set("Authorization", `WECHATPAY2-SHA256-RSA2048 mchid="`+mch+`",nonce_str="`+nonce+`",timestamp="`+stamp+
			`",serial_no="`+q.merchantCert+`",signature="`+base64.StdEncoding.EncodeToString(sig)+`"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("HTTP %d, want 401", resp.StatusCode)
		}
	})
}

// rewriteHost sends every request to host, as a gateway pointed at the fake does.
type rewriteHost struct{ base *url.URL }

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.base.Scheme, r.base.Host, ""
	return http.DefaultTransport.RoundTrip(req)
}

// TestFakeWeChatPayWithSDK: the official SDK, with its ready-made option for public-key
// mode, reads the fake's answers with its own signer and response validator; a corrupted
// answer is refused by the same validator.
func TestFakeWeChatPayWithSDK(t *testing.T) {
	q := startFakeForQueries(t)
	tr := q.add(t, FakeTrade{Channel: "wechatpay", TradeNo: "TS1", AmountFen: 1999, Status: FakePaid})
	base, _ := url.Parse(q.url)
	client, err := core.NewClient(context.Background(),
		option.WithWechatPayPublicKeyAuthCipher(q.man.WeChatPay.MchID, q.merchantCert, q.merchantKey, q.man.WeChatPay.PublicKeyID, q.platformPub),
		option.WithHTTPClient(&http.Client{Transport: rewriteHost{base}, Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	svc := native.NativeApiService{Client: client}
	ask := func(tradeNo string) (*string, error) {
		txn, _, err := svc.QueryOrderByOutTradeNo(context.Background(), native.QueryOrderByOutTradeNoRequest{
			OutTradeNo: core.String(tradeNo), Mchid: core.String(q.man.WeChatPay.MchID)})
		if err != nil {
			return nil, err
		}
		return txn.TransactionId, nil
	}
	if txn, err := ask(tr.TradeNo); err != nil || txn == nil || *txn != tr.TxnID {
		t.Fatalf("transaction_id %v, %v; want %s", txn, err, tr.TxnID)
	}
	if _, err := ask("TS-unknown"); !core.IsAPIError(err, "ORDER_NOT_EXIST") {
		t.Errorf("unknown trade: %v", err)
	}
	q.fake.Break("wechatpay", true)
	if _, err := ask(tr.TradeNo); err == nil {
		t.Error("the SDK accepted a corrupted signature")
	}
	q.fake.Break("wechatpay", false)
	if _, err := ask(tr.TradeNo); err != nil {
		t.Errorf("after turning corruption off: %v", err)
	}
}
