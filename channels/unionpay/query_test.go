package unionpay

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"

	"github.com/paygw/paygw/bills"
)

// unionPayQueryEnv is the fake channel over HTTP with fresh sandbox keys, and the gateway's
// UnionPay configuration and notification verifier for them.
type unionPayQueryEnv struct {
	*channeltest.FakeEnv
	cfg      config.UnionPay
	verifier *Channel
	signer   simulate.UnionPaySigner
}

func newUnionPayQueryEnv(t *testing.T) *unionPayQueryEnv {
	t.Helper()
	e := &unionPayQueryEnv{FakeEnv: channeltest.NewFakeEnv(t, "unionpay")}
	e.cfg = channeltest.LoadConfig(t, e.Man, "PAYGW_CHANNELS__UNIONPAY__QUERY_URL="+e.Srv.URL+"/gateway/api/queryTrans.do").Channels.UnionPay
	var err error
	if e.verifier, err = FromConfig(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.signer = channeltest.LoadSigners(t, e.Dir)["unionpay"].(simulate.UnionPaySigner)
	return e
}

func (e *unionPayQueryEnv) querier(t *testing.T, c config.UnionPay) channels.Querier {
	t.Helper()
	q, err := NewQuerier(c, e.verifier, e.Srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// notified is what the verifier makes of the trade's own payment notification.
func (e *unionPayQueryEnv) notified(t *testing.T, tr simulate.FakeTrade) payment.Event {
	t.Helper()
	return channeltest.SignVerified(t, e.signer, e.verifier,
		simulate.Payment{TradeNo: tr.TradeNo, AmountFen: tr.AmountFen, Currency: tr.Currency, TxnID: tr.TxnID, Time: tr.PaidAt}, e.Now)
}

// txnTime is how the order was sent to UnionPay: the attempt's channel_ref.
func (e *unionPayQueryEnv) txnTime(tr simulate.FakeTrade) string {
	return tr.PaidAt.In(bills.ChinaTime).Format(unionPayTimeLayout)
}

func TestUnionPayQuerierAgainstFake(t *testing.T) {
	e := newUnionPayQueryEnv(t)
	q := e.querier(t, e.cfg)

	paid := e.Add(t, simulate.FakeTrade{TradeNo: "T-paid-1", AmountFen: 1250, Status: simulate.FakePaid})
	usd := e.Add(t, simulate.FakeTrade{TradeNo: "T-usd-1", AmountFen: 99, Currency: "USD", Status: simulate.FakePaid, TxnID: "123456789012345678901"})
	refunded := e.Add(t, simulate.FakeTrade{TradeNo: "T-refunded-1", AmountFen: 1000, Status: simulate.FakeRefunded, RefundFen: 300})
	pending := e.Add(t, simulate.FakeTrade{TradeNo: "T-pending-1", AmountFen: 500, Status: simulate.FakePending})
	closed := e.Add(t, simulate.FakeTrade{TradeNo: "T-closed-1", AmountFen: 700, Status: simulate.FakeClosed})

	tests := map[string]struct {
		trade  simulate.FakeTrade
		q      channels.TradeQuery
		state  channels.TradeState
		status string
		paid   bool // one payment, as the notification carries it
	}{
		"paid":          {paid, channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: e.txnTime(paid)}, channels.TradePaid, "origRespCode=00", true},
		"paid, USD":     {usd, channels.TradeQuery{TradeNo: usd.TradeNo, ChannelRef: e.txnTime(usd)}, channels.TradePaid, "origRespCode=00", true},
		"paid, no ref":  {paid, channels.TradeQuery{TradeNo: paid.TradeNo, OrderTime: paid.PaidAt}, channels.TradePaid, "origRespCode=00", true},
		"refunded":      {refunded, channels.TradeQuery{TradeNo: refunded.TradeNo, ChannelRef: e.txnTime(refunded)}, channels.TradePaid, "origRespCode=00", true},
		"pending":       {pending, channels.TradeQuery{TradeNo: pending.TradeNo, ChannelRef: e.txnTime(pending)}, channels.TradeNotPaid, "origRespCode=05", false},
		"failed":        {closed, channels.TradeQuery{TradeNo: closed.TradeNo, ChannelRef: e.txnTime(closed)}, channels.TradeNotPaid, "origRespCode=01 failed", false},
		"no such order": {simulate.FakeTrade{TradeNo: "T-unknown-1"}, channels.TradeQuery{TradeNo: "T-unknown-1", ChannelRef: "20260101120000"}, channels.TradeNotPaid, "respCode=34 no such transaction", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, n := e.Ask(t, q, tt.q)
			if got.State != tt.state || got.Status != tt.status {
				t.Fatalf("%s %q, want %s %q", got.State, got.Status, tt.state, tt.status)
			}
			if n != 1 {
				t.Errorf("the fake was asked %d times, want 1", n)
			}
			if !tt.paid {
				if len(got.Events) != 0 {
					t.Errorf("events %+v, want none", got.Events)
				}
				return
			}
			if len(got.Events) != 1 {
				t.Fatalf("events %+v, want one payment", got.Events)
			}
			ev := got.Events[0]
			channeltest.SameAsNotified(t, ev, e.notified(t, tt.trade))
			if ev.NotifyID != channels.QueryNotifyID(ev.ChannelTxnID) || len(ev.Raw) == 0 {
				t.Errorf("NotifyID %q (want %q), Raw %d bytes", ev.NotifyID, channels.QueryNotifyID(ev.ChannelTxnID), len(ev.Raw))
			}
		})
	}
}

func TestUnionPayQuerierFailures(t *testing.T) {
	e := newUnionPayQueryEnv(t)
	ctx := context.Background()
	paid := e.Add(t, simulate.FakeTrade{TradeNo: "T-paid-2", AmountFen: 100, Status: simulate.FakePaid})
	asked := channels.TradeQuery{TradeNo: paid.TradeNo, ChannelRef: e.txnTime(paid)}

	t.Run("bad signature", func(t *testing.T) {
		e.Fake.Break("unionpay", true)
		defer e.Fake.Break("unionpay", false)
		for _, tq := range []channels.TradeQuery{asked, {TradeNo: "T-unknown-2", ChannelRef: "20260101120000"}} {
			if _, err := e.querier(t, e.cfg).QueryTrade(ctx, tq); !errors.Is(err, channels.ErrBadSignature) {
				t.Errorf("%s: %v, want ErrBadSignature", tq.TradeNo, err)
			}
		}
	})
	t.Run("another merchant certificate", func(t *testing.T) {
		// The fake refuses a request signed by a certificate that is not the merchant's: a
		// verified respCode 11, which is a failed query, not an answer.
		c := e.cfg
		c.SignCertFile, c.SignCertPassword = writeMerchantPFX(t, pkcs12.Modern, newTestMerchantCert(t), "secret"), "secret"
		_, err := e.querier(t, c).QueryTrade(ctx, asked)
		if !errors.Is(err, channels.ErrQueryFailed) || !strings.Contains(err.Error(), "respCode 11") {
			t.Errorf("%v, want ErrQueryFailed with respCode 11", err)
		}
	})
	t.Run("legacy PKCS#12", func(t *testing.T) {
		// The same merchant key and certificate, in the RC2/3DES encoding older tools write.
		pfx, err := os.ReadFile(e.cfg.SignCertFile)
		if err != nil {
			t.Fatal(err)
		}
		key, cert, err := pkcs12.Decode(pfx, e.cfg.SignCertPassword)
		if err != nil {
			t.Fatal(err)
		}
		c := e.cfg
		c.SignCertFile = writeMerchantPFX(t, pkcs12.LegacyRC2, testMerchantCert{key.(*rsa.PrivateKey), cert}, c.SignCertPassword)
		got, err := e.querier(t, c).QueryTrade(ctx, asked)
		if err != nil || got.State != channels.TradePaid {
			t.Errorf("%+v, %v; want paid", got, err)
		}
	})
	t.Run("HTTP 500", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "down", http.StatusInternalServerError)
		}))
		defer srv.Close()
		c := e.cfg
		c.QueryURL = srv.URL
		if _, err := e.querier(t, c).QueryTrade(ctx, asked); !errors.Is(err, channels.ErrQueryFailed) || !strings.Contains(err.Error(), "HTTP 500") {
			t.Errorf("%v, want ErrQueryFailed with HTTP 500", err)
		}
	})
	t.Run("transport", func(t *testing.T) {
		c := e.cfg
		c.QueryURL = channeltest.ClosedURL(t)
		channeltest.WantUnreachable(t, e.querier(t, c), asked)
	})
	t.Run("context canceled", func(t *testing.T) {
		channeltest.WantCanceled(t, e.querier(t, e.cfg), asked)
	})
	t.Run("no txnTime", func(t *testing.T) {
		for _, tq := range []channels.TradeQuery{{TradeNo: paid.TradeNo}, {TradeNo: paid.TradeNo, ChannelRef: "2026-01-01"}, {TradeNo: paid.TradeNo, ChannelRef: "20261301000000"}} {
			if _, err := e.querier(t, e.cfg).QueryTrade(ctx, tq); !errors.Is(err, channels.ErrQueryFailed) {
				t.Errorf("%+v: %v, want ErrQueryFailed", tq, err)
			}
		}
	})
}

// TestUnionPayQuerierRequest: the form sent is the one ACP 5.1.0 specifies, signed by the
// merchant certificate certId names, with the txnTime the attempt recorded (else the order's
// time in Beijing).
func TestUnionPayQuerierRequest(t *testing.T) {
	e := newUnionPayQueryEnv(t)
	merchant := channeltest.ReadCertFile(t, filepath.Join(e.Dir, e.Man.UnionPay.MerchantCertFile))
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, _ = url.ParseQuery(string(body))
		_, _ = w.Write(e.signedAnswer(t, url.Values{"respCode": {"34"}, "merId": {e.Man.UnionPay.MerID}}))
	}))
	defer srv.Close()
	c := e.cfg
	c.QueryURL = srv.URL
	q := e.querier(t, c)

	orderTime := time.Date(2026, 3, 4, 23, 30, 5, 0, time.UTC) // 07:30:05 the next day in Beijing
	for ref, want := range map[string]string{"20260101120000": "20260101120000", "": "20260305073005"} {
		if _, err := q.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: "T-req-1", ChannelRef: ref, OrderTime: orderTime}); err != nil {
			t.Fatal(err)
		}
		wantFields := map[string]string{"version": "5.1.0", "encoding": "UTF-8", "signMethod": "01", "txnType": "00",
			"txnSubType": "00", "bizType": "000201", "accessType": "0", "merId": e.Man.UnionPay.MerID, "orderId": "T-req-1",
			"txnTime": want, "certId": merchant.SerialNumber.String()}
		for k, v := range wantFields {
			if got.Get(k) != v {
				t.Errorf("ref %q: %s = %q, want %q", ref, k, got.Get(k), v)
			}
		}
		if len(got) != len(wantFields)+1 {
			t.Errorf("ref %q: %d fields, want %d and signature", ref, len(got), len(wantFields))
		}
		params := map[string]string{}
		for k := range got {
			params[k] = got.Get(k)
		}
		if err := unionPayVerifyWith(merchant, params); err != nil {
			t.Errorf("ref %q: request signature: %v", ref, err)
		}
	}
}

// TestUnionPayQuerierAnswers: verified answers that are not about this order are refused.
func TestUnionPayQuerierAnswers(t *testing.T) {
	e := newUnionPayQueryEnv(t)
	asked := channels.TradeQuery{TradeNo: "T-ans-1", ChannelRef: "20260101120000"}
	good := url.Values{"respCode": {"00"}, "origRespCode": {"00"}, "merId": {e.Man.UnionPay.MerID}, "orderId": {asked.TradeNo},
		"txnType": {"01"}, "queryId": {"112233445566778899001"}, "txnAmt": {"100"}, "currencyCode": {"156"}, "txnTime": {asked.ChannelRef}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vs := range good {
			f[key] = vs
		}
		if v == "" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return f
	}
	tests := map[string]struct {
		answer url.Values
		want   error
	}{
		"paid":                 {good, nil},
		"another order":        {with("orderId", "T-ans-2"), channels.ErrMalformed},
		"orderId missing":      {with("orderId", ""), channels.ErrMalformed},
		"another merchant":     {with("merId", "777290058110097"), channels.ErrMalformed},
		"merId missing":        {with("merId", ""), channels.ErrMalformed},
		"refusal for another":  {url.Values{"respCode": {"34"}, "orderId": {"T-ans-2"}}, channels.ErrMalformed},
		"query refused":        {with("respCode", "12"), channels.ErrQueryFailed},
		"no origRespCode":      {with("origRespCode", ""), channels.ErrMalformed},
		"no queryId":           {with("queryId", ""), channels.ErrMalformed},
		"amount not digits":    {with("txnAmt", "1.00"), channels.ErrMalformed},
		"unknown currency":     {with("currencyCode", "392"), channels.ErrMalformed},
		"bad txnTime":          {with("txnTime", "2026"), channels.ErrMalformed},
		"a refund, not a sale": {with("txnType", "04"), channels.ErrMalformed},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(e.signedAnswer(t, tt.answer))
			}))
			defer srv.Close()
			c := e.cfg
			c.QueryURL = srv.URL
			got, err := e.querier(t, c).QueryTrade(context.Background(), asked)
			if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
				t.Fatalf("%v, want %v", err, tt.want)
			}
			if tt.want == nil && (got.State != channels.TradePaid || got.Events[0].AmountFen != 100 || got.Events[0].ChannelTxnID != "112233445566778899001") {
				t.Fatalf("%+v, want paid 100 of queryId 112233445566778899001", got)
			}
		})
	}
}

func TestNewUnionPayQuerier(t *testing.T) {
	e := newUnionPayQueryEnv(t)
	missing := e.cfg
	missing.SignCertFile = ""
	if _, err := NewQuerier(missing, e.verifier, nil); !errors.Is(err, channels.ErrNoCredentials) || !strings.Contains(err.Error(), "channels.unionpay.sign_cert_file") {
		t.Errorf("no sign_cert_file: %v, want ErrNoCredentials naming channels.unionpay.sign_cert_file", err)
	}
	wrong := e.cfg
	wrong.SignCertPassword = "not-the-password"
	_, err := NewQuerier(wrong, e.verifier, nil)
	if err == nil || errors.Is(err, channels.ErrNoCredentials) || !strings.Contains(err.Error(), "sign_cert_password") {
		t.Errorf("wrong password: %v, want an error naming sign_cert_password", err)
	}
	if err != nil && (strings.Contains(err.Error(), wrong.SignCertPassword) || strings.Contains(err.Error(), e.cfg.SignCertPassword)) {
		t.Errorf("error %q carries a password", err)
	}
	notPFX := e.cfg
	notPFX.SignCertFile = filepath.Join(e.Dir, e.Man.UnionPay.MerchantCertFile) // a PEM certificate
	if _, err := NewQuerier(notPFX, e.verifier, nil); err == nil || !strings.Contains(err.Error(), "sign_cert_file") {
		t.Errorf("a PEM file: %v, want an error naming sign_cert_file", err)
	}
	badURL := e.cfg
	badURL.QueryURL = "gateway.95516.com"
	if _, err := NewQuerier(badURL, e.verifier, nil); err == nil || !strings.Contains(err.Error(), "channels.unionpay.query_url") {
		t.Errorf("bad URL: %v, want an error naming channels.unionpay.query_url", err)
	}
	if _, err := NewQuerier(e.cfg, nil, nil); err == nil {
		t.Error("no verifier: accepted")
	}
	// The key's certificate is found wherever the file puts it.
	mc := newTestMerchantCert(t)
	ca := newTestMerchantCert(t).cert
	pfx, err := pkcs12.Modern.Encode(mc.key, ca, []*x509.Certificate{mc.cert}, "pw")
	if err != nil {
		t.Fatal(err)
	}
	key, cert, err := DecodePFX(pfx, "pw")
	if err != nil || !key.Equal(mc.key) || !cert.Equal(mc.cert) {
		t.Errorf("chain first: %v; want the key's own certificate", err)
	}
}

func TestParseUnionPayResponse(t *testing.T) {
	const head = "version=5.1.0&signMethod=01&"
	ok := map[string]map[string]string{
		head + "a=1&b=x+y%2B/=":         {"a": "1", "b": "x+y%2B/="},
		"{" + head + "a=1}":             {"a": "1"},
		head + "r={k=1&j=2}&s=[1&2]&t=": {"r": "{k=1&j=2}", "s": "[1&2]", "t": ""},
		head + "c=-----BEGIN CERTIFICATE-----\r\nMIIB+/==\r\n-----END CERTIFICATE-----": {"c": "-----BEGIN CERTIFICATE-----\r\nMIIB+/==\r\n-----END CERTIFICATE-----"},
	}
	for body, want := range ok {
		got, err := parseUnionPayResponse([]byte(body))
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q: %s = %q, want %q", body, k, got[k], v)
			}
		}
		if len(got) != len(want)+2 {
			t.Errorf("%q: %d fields, want %d", body, len(got), len(want)+2)
		}
	}
	for _, body := range []string{"", "{}", head + "a", head + "a=1&", head + "=1", head + "a=1&a=2", head + "a&b=1",
		"version=5.0.0&signMethod=01", "version=5.1.0&signMethod=11", head + "encoding=GBK", head + "a=\xff"} {
		if _, err := parseUnionPayResponse([]byte(body)); !errors.Is(err, channels.ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", body, err)
		}
	}
}

// signedAnswer is fields as UnionPay would answer them: the common fields added, signed with the
// sandbox signing certificate, written unencoded.
func (e *unionPayQueryEnv) signedAnswer(t *testing.T, fields url.Values) []byte {
	t.Helper()
	form := url.Values{"version": {"5.1.0"}, "encoding": {"UTF-8"}, "signMethod": {"01"}, "signPubKeyCert": {string(e.signer.CertPEM)}}
	for k, vs := range fields {
		form[k] = vs
	}
	if err := simulate.SignUnionPay(form, e.signer.Key); err != nil {
		t.Fatal(err)
	}
	return simulate.UnionPayResponseBody(form)
}

type testMerchantCert struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
}

func newTestMerchantCert(t *testing.T) testMerchantCert {
	t.Helper()
	key := testenv.NewRSAKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "test merchant"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	return testMerchantCert{key, channeltest.IssueCert(t, tmpl, nil, &key.PublicKey, key)}
}

func writeMerchantPFX(t *testing.T, enc *pkcs12.Encoder, mc testMerchantCert, password string) string {
	t.Helper()
	pfx, err := enc.Encode(mc.key, mc.cert, nil, password)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "merchant.pfx")
	if err := os.WriteFile(path, pfx, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// unionPayVerifyWith checks params' signature against cert's key, the ACP 5.1.0 way.
func unionPayVerifyWith(cert *x509.Certificate, params map[string]string) error {
	sig, err := base64.StdEncoding.DecodeString(params["signature"])
	if err != nil {
		return err
	}
	digest := sha256.Sum256([]byte(unionPayDigestHex(params, true)))
	return rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, digest[:], sig)
}
