package wechatpay

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

const (
	wechatTestMchID    = "1900000001"
	wechatTestAppID    = "wx0000000000000000"
	wechatTestAPIv3Key = "0123456789abcdefghijABCDEFGHIJ01" // 32 bytes
	wechatTestPubKeyID = "PUB_KEY_ID_0119000000012025010100000000"
)

// wechatKeys is the key material every WeChat test shares; RSA-2048 generation is slow enough
// to do once.
type wechatKeys struct {
	pub, cert1, cert2, other *rsa.PrivateKey
	c1, c2                   *x509.Certificate
	serial1, serial2         string
}

var (
	wechatKeysOnce sync.Once
	wechatKeysVal  wechatKeys
)

func testWeChatKeys(tb testing.TB) wechatKeys {
	tb.Helper()
	wechatKeysOnce.Do(func() {
		k := &wechatKeysVal
		k.pub, k.cert1, k.cert2, k.other = testenv.NewRSAKey(tb), testenv.NewRSAKey(tb), testenv.NewRSAKey(tb), testenv.NewRSAKey(tb)
		// 20-byte serials as WeChat's certificates carry; the second has a leading 0x0A so that
		// the upper-case hex has a leading zero digit to lose if someone formats it as a number.
		s1, _ := new(big.Int).SetString("5157F09EFDC096DE15EBE81A47057A7232F1B8E1", 16)
		s2, _ := new(big.Int).SetString("0A1B2C3D4E5F60718293A4B5C6D7E8F901234567", 16)
		k.c1 = wechatSelfSigned(tb, k.cert1, s1, "old platform certificate")
		k.c2 = wechatSelfSigned(tb, k.cert2, s2, "new platform certificate")
		k.serial1, k.serial2 = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "0A1B2C3D4E5F60718293A4B5C6D7E8F901234567"
	})
	if wechatKeysVal.pub == nil {
		tb.Fatal("key generation failed earlier")
	}
	return wechatKeysVal
}

func wechatSelfSigned(tb testing.TB, key crypto.Signer, serial *big.Int, cn string) *x509.Certificate {
	tb.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Tenpay.com"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	return channeltest.IssueCert(tb, tmpl, nil, key.Public(), key)
}

type wechatMode int

const (
	wechatPubKeyMode wechatMode = iota
	wechatCertMode
	wechatCombinedMode
)

func testWeChatPay(tb testing.TB, mode wechatMode) *Channel {
	tb.Helper()
	k := testWeChatKeys(tb)
	c := Config{MchID: wechatTestMchID, AppID: wechatTestAppID, APIv3Key: wechatTestAPIv3Key}
	if mode != wechatCertMode {
		c.PublicKeyID, c.PublicKey = wechatTestPubKeyID, &k.pub.PublicKey
	}
	if mode != wechatPubKeyMode {
		c.Certificates = []*x509.Certificate{k.c1, k.c2}
	}
	w, err := New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// wechatSigner is the simulator playing WeChat with the public-key-mode key.
func wechatSigner(tb testing.TB) simulate.WeChatPaySigner {
	k := testWeChatKeys(tb)
	return simulate.WeChatPaySigner{MchID: wechatTestMchID, AppID: wechatTestAppID, APIv3Key: wechatTestAPIv3Key,
		Serial: wechatTestPubKeyID, Key: k.pub}
}

func wechatSign(tb testing.TB, s simulate.WeChatPaySigner, p simulate.Payment) (body []byte, header http.Header) {
	tb.Helper()
	m, err := s.Sign(p)
	if err != nil {
		tb.Fatal(err)
	}
	return m.Body, m.Header
}

// wechatCustomBody builds a notification around an arbitrary plain resource, encrypted with the
// signer's APIv3 key; edit may change the envelope before it is serialized.
func wechatCustomBody(tb testing.TB, s simulate.WeChatPaySigner, eventType string, plain any, edit func(env map[string]any)) []byte {
	tb.Helper()
	pt, ok := plain.([]byte)
	if !ok {
		var err error
		if pt, err = json.Marshal(plain); err != nil {
			tb.Fatal(err)
		}
	}
	ct, nonce, err := s.EncryptResource(pt, "transaction")
	if err != nil {
		tb.Fatal(err)
	}
	env := map[string]any{
		"id": "EV-2025010112000000001", "create_time": "2025-01-01T12:00:00+08:00",
		"resource_type": "encrypt-resource", "event_type": eventType, "summary": "支付成功",
		"resource": map[string]any{
			"original_type": "transaction", "algorithm": "AEAD_AES_256_GCM",
			"ciphertext": ct, "associated_data": "transaction", "nonce": nonce,
		},
	}
	if edit != nil {
		edit(env)
	}
	body, err := json.Marshal(env)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

func wechatSignBody(tb testing.TB, s simulate.WeChatPaySigner, body []byte, ts time.Time) http.Header {
	tb.Helper()
	h, err := s.SignBody(body, ts)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// wechatPlainTxn is a transaction resource; edits replace or (with nil) delete fields.
func wechatPlainTxn(edits map[string]any) map[string]any {
	m := map[string]any{
		"appid": wechatTestAppID, "mchid": wechatTestMchID, "out_trade_no": "T20250101000001",
		"transaction_id": "4200000000202501010000000001", "trade_type": "NATIVE", "trade_state": "SUCCESS",
		"success_time": "2025-01-01T12:00:05+08:00",
		"amount":       map[string]any{"total": 8888, "payer_total": 8888, "currency": "CNY", "payer_currency": "CNY"},
	}
	return withEdits(m, edits)
}

// wechatPlainRefund is a refund resource with refund_status status; edits replace or (with nil)
// delete fields.
func wechatPlainRefund(status string, edits map[string]any) map[string]any {
	m := map[string]any{
		"mchid": wechatTestMchID, "out_trade_no": "T20250101000001", "transaction_id": "4200000000202501010000000001",
		"out_refund_no": "R20250101000001", "refund_id": "50000000000000000000000001", "refund_status": status,
		"amount": map[string]any{"total": 100, "refund": 100, "payer_total": 100, "payer_refund": 100},
	}
	return withEdits(m, edits)
}

// withEdits is m with edits applied: each field replaced, or deleted where its value is nil.
func withEdits(m, edits map[string]any) map[string]any {
	for k, v := range edits {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// isWeChatSentinel reports whether err is one of the refusals the HTTP layer maps.
func isWeChatSentinel(err error) bool {
	for _, s := range []error{channels.ErrMalformed, channels.ErrBadSignature, channels.ErrNotOurs, channels.ErrUnsupported, channels.ErrStale} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func TestWeChatPayVerify(t *testing.T) {
	k := testWeChatKeys(t)
	now := time.Now()
	pay := simulate.Payment{TradeNo: "T20250101000001", AmountFen: 8888, Time: now}
	base := wechatSigner(t)
	withKey := func(key *rsa.PrivateKey, serial string) simulate.WeChatPaySigner {
		s := base
		s.Key, s.Serial = key, serial
		return s
	}
	signed := func(s simulate.WeChatPaySigner, p simulate.Payment) func(t *testing.T) ([]byte, http.Header) {
		return func(t *testing.T) ([]byte, http.Header) { return wechatSign(t, s, p) }
	}
	custom := func(eventType string, plain any, edit func(map[string]any)) func(t *testing.T) ([]byte, http.Header) {
		return func(t *testing.T) ([]byte, http.Header) {
			body := wechatCustomBody(t, base, eventType, plain, edit)
			return body, wechatSignBody(t, base, body, now)
		}
	}
	editHeader := func(p simulate.Payment, edit func(h http.Header)) func(t *testing.T) ([]byte, http.Header) {
		return func(t *testing.T) ([]byte, http.Header) {
			body, h := wechatSign(t, base, p)
			edit(h)
			return body, h
		}
	}
	at := func(d time.Duration) simulate.Payment { p := pay; p.Time = now.Add(d); return p }
	status := func(s string) simulate.Payment { p := pay; p.Status = s; return p }
	noRefund := func(t *testing.T, ev payment.Event) {
		if ev.RefundID != "" || ev.RefundFen != 0 || ev.RefundIsTotal {
			t.Errorf("refund fields on a refund that moved no money: %q %d", ev.RefundID, ev.RefundFen)
		}
	}

	tests := map[string]struct {
		mode     wechatMode
		msg      func(t *testing.T) ([]byte, http.Header)
		wantErr  error
		wantKind payment.Kind
		check    func(t *testing.T, ev payment.Event)
	}{
		"valid public key":           {msg: signed(base, pay), wantKind: payment.KindPaid},
		"valid certificate old":      {mode: wechatCertMode, msg: signed(withKey(k.cert1, k.serial1), pay), wantKind: payment.KindPaid},
		"valid certificate new":      {mode: wechatCertMode, msg: signed(withKey(k.cert2, k.serial2), pay), wantKind: payment.KindPaid},
		"valid combined public key":  {mode: wechatCombinedMode, msg: signed(base, pay), wantKind: payment.KindPaid},
		"valid combined certificate": {mode: wechatCombinedMode, msg: signed(withKey(k.cert2, k.serial2), pay), wantKind: payment.KindPaid},
		"valid 290 s old":            {msg: signed(base, at(-290*time.Second)), wantKind: payment.KindPaid},
		"valid without signature type": {msg: editHeader(pay, func(h http.Header) { h.Del("Wechatpay-Signature-Type") }),
			wantKind: payment.KindPaid},

		"tampered body": {msg: func(t *testing.T) ([]byte, http.Header) {
			body, h := wechatSign(t, base, pay)
			return bytes.Replace(body, []byte(`"summary":"`), []byte(`"summary":"X`), 1), h
		}, wantErr: channels.ErrBadSignature},
		"tampered nonce header": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Nonce", "x"+h.Get("Wechatpay-Nonce")) }),
			wantErr: channels.ErrBadSignature},
		"wrong key":                  {msg: signed(withKey(k.other, wechatTestPubKeyID), pay), wantErr: channels.ErrBadSignature},
		"certificate key swapped":    {mode: wechatCertMode, msg: signed(withKey(k.cert1, k.serial2), pay), wantErr: channels.ErrBadSignature},
		"public key id in cert mode": {mode: wechatCertMode, msg: signed(base, pay), wantErr: channels.ErrBadSignature},
		"certificate in pubkey mode": {msg: signed(withKey(k.cert1, k.serial1), pay), wantErr: channels.ErrBadSignature},
		"unknown serial":             {msg: signed(withKey(k.pub, "PUB_KEY_ID_0119000000019999"), pay), wantErr: channels.ErrBadSignature},
		"serial in lower case":       {mode: wechatCertMode, msg: signed(withKey(k.cert1, strings.ToLower(k.serial1)), pay), wantErr: channels.ErrBadSignature},
		"probe with garbage signature": {msg: editHeader(pay, func(h http.Header) {
			h.Set("Wechatpay-Signature", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 256)))
		}), wantErr: channels.ErrBadSignature},
		// WeChat's own verification probes: refused, and told apart from a key problem.
		"SIGNTEST probe": {msg: editHeader(pay, func(h http.Header) {
			h.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+h.Get("Wechatpay-Signature"))
		}), wantErr: channels.ErrProbe},
		"SIGNTEST probe, bare": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/") }),
			wantErr: channels.ErrProbe},
		"signature not base64": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Signature", "not base64!") }),
			wantErr: channels.ErrBadSignature},

		"stale 301 s old":        {msg: signed(base, at(-301*time.Second)), wantErr: channels.ErrStale},
		"stale 301 s ahead":      {msg: signed(base, at(301*time.Second)), wantErr: channels.ErrStale},
		"stale exactly 300 s":    {msg: signed(base, at(-300*time.Second)), wantErr: channels.ErrStale},
		"replayed old signature": {msg: signed(base, at(-10*time.Minute)), wantErr: channels.ErrStale},

		"unsupported signature type": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SM2-WITH-SM3") }),
			wantErr: channels.ErrUnsupported},
		"missing timestamp": {msg: editHeader(pay, func(h http.Header) { h.Del("Wechatpay-Timestamp") }), wantErr: channels.ErrMalformed},
		"missing nonce":     {msg: editHeader(pay, func(h http.Header) { h.Del("Wechatpay-Nonce") }), wantErr: channels.ErrMalformed},
		"missing signature": {msg: editHeader(pay, func(h http.Header) { h.Del("Wechatpay-Signature") }), wantErr: channels.ErrMalformed},
		"missing serial":    {msg: editHeader(pay, func(h http.Header) { h.Del("Wechatpay-Serial") }), wantErr: channels.ErrMalformed},
		"repeated signature": {msg: editHeader(pay, func(h http.Header) { h.Add("Wechatpay-Signature", h.Get("Wechatpay-Signature")) }),
			wantErr: channels.ErrMalformed},
		"timestamp not decimal": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Timestamp", "1e9") }), wantErr: channels.ErrMalformed},
		"timestamp with plus": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Timestamp", "+"+h.Get("Wechatpay-Timestamp")) }),
			wantErr: channels.ErrMalformed},
		"timestamp with leading zero": {msg: editHeader(pay, func(h http.Header) { h.Set("Wechatpay-Timestamp", "0"+h.Get("Wechatpay-Timestamp")) }),
			wantErr: channels.ErrMalformed},

		"wrong mchid": {msg: func(t *testing.T) ([]byte, http.Header) {
			s := base
			s.MchID = "1900000002"
			return wechatSign(t, s, pay)
		}, wantErr: channels.ErrNotOurs},
		"wrong appid": {msg: func(t *testing.T) ([]byte, http.Header) {
			s := base
			s.AppID = "wx0000000000000001"
			return wechatSign(t, s, pay)
		}, wantErr: channels.ErrNotOurs},
		"refund of another merchant": {msg: func(t *testing.T) ([]byte, http.Header) {
			s := base
			s.MchID = "1900000002"
			return wechatSign(t, s, status(simulate.StatusRefund))
		}, wantErr: channels.ErrNotOurs},
		// The signature holds, so this is no forgery: most likely our api_v3_key is stale. It is
		// refused as malformed (WeChat retries anyway) and the reason says which key to check.
		"wrong APIv3 key": {msg: func(t *testing.T) ([]byte, http.Header) {
			s := base
			s.APIv3Key = strings.Repeat("k", 32)
			return wechatSign(t, s, pay)
		}, wantErr: channels.ErrMalformed},
		"nonce of 11 bytes": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) {
			res := env["resource"].(map[string]any)
			res["nonce"] = res["nonce"].(string)[:11]
		}), wantErr: channels.ErrMalformed},
		"nonce of 13 bytes": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) {
			res := env["resource"].(map[string]any)
			res["nonce"] = res["nonce"].(string) + "A"
		}), wantErr: channels.ErrMalformed},
		"other algorithm": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) {
			env["resource"].(map[string]any)["algorithm"] = "AEAD_SM4_GCM"
		}), wantErr: channels.ErrUnsupported},
		"no resource": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) { delete(env, "resource") }),
			wantErr: channels.ErrMalformed},
		"no id": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) { delete(env, "id") }),
			wantErr: channels.ErrMalformed},
		"body not JSON": {msg: func(t *testing.T) ([]byte, http.Header) {
			body := []byte("mchid=1900000001")
			return body, wechatSignBody(t, base, body, now)
		}, wantErr: channels.ErrMalformed},
		"empty body": {msg: func(t *testing.T) ([]byte, http.Header) { return nil, wechatSignBody(t, base, nil, now) },
			wantErr: channels.ErrMalformed},
		"plaintext not JSON":     {msg: custom("TRANSACTION.SUCCESS", []byte("not json"), nil), wantErr: channels.ErrMalformed},
		"negative total":         {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"total": -1}}), nil), wantErr: channels.ErrMalformed},
		"fractional total":       {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"total": 1.5}}), nil), wantErr: channels.ErrMalformed},
		"total missing":          {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"currency": "CNY"}}), nil), wantErr: channels.ErrMalformed},
		"bad currency":           {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"total": 1, "currency": "yuan"}}), nil), wantErr: channels.ErrMalformed},
		"transaction_id missing": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"transaction_id": nil}), nil), wantErr: channels.ErrMalformed},
		"out_trade_no invalid":   {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"out_trade_no": "T 1"}), nil), wantErr: channels.ErrMalformed},
		"appid missing":          {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"appid": nil}), nil), wantErr: channels.ErrNotOurs},
		"success_time invalid":   {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"success_time": "2025-01-01 12:00:05"}), nil), wantErr: channels.ErrMalformed},

		"refund": {msg: signed(base, simulate.Payment{TradeNo: "T20250101000001", AmountFen: 8888, RefundFen: 1000,
			RefundID: "50300000012025010100000001", Status: simulate.StatusRefund, Time: now}),
			wantKind: payment.KindRefund, check: func(t *testing.T, ev payment.Event) {
				if ev.AmountFen != 1000 || ev.Status != "REFUND.SUCCESS:SUCCESS" || ev.Currency != "CNY" {
					t.Errorf("refund event %+v: want 1000 fen, REFUND.SUCCESS:SUCCESS, CNY", ev)
				}
				if ev.RefundID != "50300000012025010100000001" || ev.RefundFen != 1000 || ev.RefundIsTotal {
					t.Errorf("refund %q %d total=%v: want refund_id, amount.refund, this refund alone", ev.RefundID, ev.RefundFen, ev.RefundIsTotal)
				}
			}},
		"refund abnormal: no money moved": {msg: custom("REFUND.ABNORMAL", wechatPlainRefund("ABNORMAL", nil), nil),
			wantKind: payment.KindOther, check: noRefund},
		"refund closed: no money moved": {msg: custom("REFUND.CLOSED", wechatPlainRefund("CLOSED", nil), nil),
			wantKind: payment.KindOther, check: noRefund},
		"refund closed without amount": {msg: custom("REFUND.CLOSED", wechatPlainRefund("CLOSED", map[string]any{"amount": nil}), nil),
			wantKind: payment.KindOther, check: noRefund},
		"refund without refund_id": {msg: custom("REFUND.SUCCESS", wechatPlainRefund("SUCCESS", map[string]any{"refund_id": nil}), nil),
			wantErr: channels.ErrMalformed},
		"refund_id 129 bytes": {msg: custom("REFUND.SUCCESS", wechatPlainRefund("SUCCESS", map[string]any{"refund_id": strings.Repeat("5", 129)}), nil),
			wantErr: channels.ErrMalformed},
		"refund_id 128 bytes": {msg: custom("REFUND.SUCCESS", wechatPlainRefund("SUCCESS", map[string]any{"refund_id": strings.Repeat("5", 128)}), nil),
			wantKind: payment.KindRefund},
		"transaction_id 128 bytes": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"transaction_id": strings.Repeat("4", 128)}), nil),
			wantKind: payment.KindPaid},
		"transaction_id 129 bytes": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"transaction_id": strings.Repeat("4", 129)}), nil),
			wantErr: channels.ErrMalformed},
		"id 129 bytes": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(nil), func(env map[string]any) { env["id"] = strings.Repeat("E", 129) }),
			wantErr: channels.ErrMalformed},
		"out_trade_no 33 chars": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"out_trade_no": strings.Repeat("T", 33)}), nil),
			wantErr: channels.ErrMalformed},
		"refund without refund amount": {msg: custom("REFUND.SUCCESS", map[string]any{
			"mchid": wechatTestMchID, "out_trade_no": "T20250101000001", "transaction_id": "4200000000202501010000000001",
			"refund_id": "50000000000000000000000001", "amount": map[string]any{"total": 100},
		}, nil), wantErr: channels.ErrMalformed},
		// WeChat notifies only SUCCESS; another trade_state would be no payment.
		"not paid": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"trade_state": "NOTPAY"}), nil), wantKind: payment.KindPending},
		"closed":   {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"trade_state": "CLOSED"}), nil), wantKind: payment.KindPending},
		"other event": {msg: custom("TRANSACTION.REVOKED", map[string]any{"mchid": wechatTestMchID, "out_trade_no": "T20250101000001",
			"transaction_id": "4200000000202501010000000001"}, nil),
			wantKind: payment.KindOther},
		"other event without out_trade_no": {msg: custom("PROFITSHARING.FINISH", map[string]any{"mchid": wechatTestMchID}, nil),
			wantErr: channels.ErrMalformed},
		"currency in lower case": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"total": 5, "currency": "usd"}}), nil),
			wantKind: payment.KindPaid, check: func(t *testing.T, ev payment.Event) {
				if ev.Currency != "USD" || ev.AmountFen != 5 {
					t.Errorf("Currency, AmountFen = %q, %d; want USD, 5", ev.Currency, ev.AmountFen)
				}
			}},
		"currency empty": {msg: custom("TRANSACTION.SUCCESS", wechatPlainTxn(map[string]any{"amount": map[string]any{"total": 5}}), nil),
			wantKind: payment.KindPaid, check: func(t *testing.T, ev payment.Event) {
				if ev.Currency != "CNY" {
					t.Errorf("Currency = %q, want CNY", ev.Currency)
				}
			}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w := testWeChatPay(t, tt.mode)
			body, header := tt.msg(t)
			sig := header.Get("Wechatpay-Signature")
			ev, err := w.Verify(body, header, now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
				}
				if errors.Is(err, channels.ErrProbe) != (tt.wantErr == channels.ErrProbe) || errors.Is(err, channels.ErrProbe) && !errors.Is(err, channels.ErrBadSignature) {
					t.Errorf("Verify error = %v: a probe is a bad signature, and only a probe is a probe", err)
				}
				t.Log(err)
				if len(sig) > 8 && strings.Contains(err.Error(), sig) {
					t.Errorf("error %q quotes the signature", err)
				}
				if n := header.Get("Wechatpay-Nonce"); strings.Contains(err.Error(), wechatTestAPIv3Key) || n != "" && strings.Contains(err.Error(), n) {
					t.Errorf("error %q quotes the APIv3 key or the nonce", err)
				}
				if len(err.Error()) > 200 {
					t.Errorf("error is %d bytes long: %q", len(err.Error()), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if ev.Kind != tt.wantKind {
				t.Errorf("Kind = %s, want %s", ev.Kind, tt.wantKind)
			}
			if ev.Channel != "wechatpay" || ev.TradeNo != "T20250101000001" || ev.NotifyID == "" || ev.ChannelTxnID == "" {
				t.Errorf("event %+v: want channel, trade_no, notify id and txn id", ev)
			}
			if !bytes.Equal(ev.Raw, body) {
				t.Errorf("Raw is not the body")
			}
			if tt.check != nil {
				tt.check(t, ev)
			}
		})
	}
}

// TestWeChatPayAppIDs: several appids (official account, mini program, app) share one mchid;
// app_id and app_ids are one list.
func TestWeChatPayAppIDs(t *testing.T) {
	k := testWeChatKeys(t)
	now := time.Now()
	tests := map[string]struct {
		appID   string
		appIDs  []string
		sender  string
		wantErr error
	}{
		"app_id":                   {appID: "wxA", sender: "wxA"},
		"first of app_ids":         {appIDs: []string{"wxA", "wxB"}, sender: "wxA"},
		"second of app_ids":        {appIDs: []string{"wxA", "wxB"}, sender: "wxB"},
		"app_ids beside app_id":    {appID: "wxA", appIDs: []string{"wxB"}, sender: "wxB"},
		"app_id beside app_ids":    {appID: "wxA", appIDs: []string{"wxB"}, sender: "wxA"},
		"unlisted":                 {appID: "wxA", appIDs: []string{"wxB"}, sender: "wxC", wantErr: channels.ErrNotOurs},
		"prefix of a listed appid": {appIDs: []string{"wxAB"}, sender: "wxA", wantErr: channels.ErrNotOurs},
		"listed appid, case":       {appIDs: []string{"wxa"}, sender: "wxA", wantErr: channels.ErrNotOurs},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w, err := New(Config{MchID: wechatTestMchID, AppID: tt.appID, AppIDs: tt.appIDs,
				APIv3Key: wechatTestAPIv3Key, PublicKeyID: wechatTestPubKeyID, PublicKey: &k.pub.PublicKey})
			if err != nil {
				t.Fatal(err)
			}
			s := wechatSigner(t)
			s.AppID = tt.sender
			body, header := wechatSign(t, s, simulate.Payment{TradeNo: "T20250101000001", AmountFen: 8888, Time: now})
			ev, err := w.Verify(body, header, now)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && ev.Kind != payment.KindPaid {
				t.Errorf("Kind = %s", ev.Kind)
			}
		})
	}
}

// TestWeChatPayEvent pins every field of a paid event from the simulator.
func TestWeChatPayEvent(t *testing.T) {
	now := time.Now()
	p := simulate.Payment{TradeNo: "T20250101000001", AmountFen: 8888, TxnID: "4200000000202501010000000001",
		NotifyID: "EV-2025010112000000001", Time: now}
	body, header := wechatSign(t, wechatSigner(t), p)
	ev, err := testWeChatPay(t, wechatPubKeyMode).Verify(body, header, now)
	if err != nil {
		t.Fatal(err)
	}
	channeltest.AssertEvent(t, ev, payment.Event{
		Channel: "wechatpay", NotifyID: "EV-2025010112000000001", TradeNo: "T20250101000001",
		ChannelTxnID: "4200000000202501010000000001", Kind: payment.KindPaid, Status: "TRANSACTION.SUCCESS:SUCCESS",
		AmountFen: 8888, Currency: "CNY", PaidAt: now.Truncate(time.Second), Raw: body,
	})
	// Raw is a copy: the caller's buffer may be reused.
	body[0] = 'X'
	if ev.Raw[0] != '{' {
		t.Error("Raw shares the caller's buffer")
	}
}

func TestWeChatPayPaidAt(t *testing.T) {
	s := wechatSigner(t)
	body := wechatCustomBody(t, s, "TRANSACTION.SUCCESS", wechatPlainTxn(nil), nil)
	ev, err := testWeChatPay(t, wechatPubKeyMode).eventFromBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 1, 1, 4, 0, 5, 0, time.UTC); !ev.PaidAt.Equal(want) {
		t.Errorf("PaidAt = %v, want %v", ev.PaidAt.UTC(), want)
	}
}

// TestWeChatPayClock: the window is now's alone (in production the request's arrival on the wall
// clock); the wall clock itself plays no part, so a message verifies at its own time.
func TestWeChatPayClock(t *testing.T) {
	w := testWeChatPay(t, wechatPubKeyMode)
	wall := time.Now()
	tests := map[string]struct {
		signedAt, now time.Time
		wantErr       error
	}{
		"in both windows":           {wall, wall, nil},
		"outside ours":              {wall, wall.Add(5 * time.Minute), channels.ErrStale},
		"an hour ago, at that time": {wall.Add(-time.Hour), wall.Add(-time.Hour), nil},
		"an hour ago, now":          {wall.Add(-time.Hour), wall, channels.ErrStale},
		"ours slightly behind wall": {wall, wall.Add(-2 * time.Minute), nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			body, header := wechatSign(t, wechatSigner(t), simulate.Payment{TradeNo: "T1", AmountFen: 1, Time: tt.signedAt})
			_, err := w.Verify(body, header, tt.now)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewWeChatPay(t *testing.T) {
	k := testWeChatKeys(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecCert := wechatSelfSigned(t, ecKey, big.NewInt(77), "ec")
	smallCert := wechatSelfSigned(t, small, big.NewInt(78), "small")
	dupSerial := wechatSelfSigned(t, k.cert2, k.c1.SerialNumber, "same serial")
	pubIDAsCert := wechatSelfSigned(t, k.cert2, big.NewInt(0x42), "serial 42")

	valid := Config{MchID: wechatTestMchID, AppID: wechatTestAppID, APIv3Key: wechatTestAPIv3Key,
		PublicKeyID: wechatTestPubKeyID, PublicKey: &k.pub.PublicKey}
	edit := func(f func(c *Config)) Config { c := valid; f(&c); return c }

	tests := map[string]struct {
		config  Config
		wantKey string // the configuration key the error must name; "" = valid
	}{
		"public key": {valid, ""},
		"certificates only": {edit(func(c *Config) {
			c.PublicKeyID, c.PublicKey, c.Certificates = "", nil, []*x509.Certificate{k.c1}
		}), ""},
		"combined":            {edit(func(c *Config) { c.Certificates = []*x509.Certificate{k.c1, k.c2} }), ""},
		"no mch_id":           {edit(func(c *Config) { c.MchID = "" }), "channels.wechatpay.mch_id"},
		"no app_id":           {edit(func(c *Config) { c.AppID = "" }), "channels.wechatpay.app_id or app_ids"},
		"app_ids alone":       {edit(func(c *Config) { c.AppID, c.AppIDs = "", []string{"wxA", "wxB"} }), ""},
		"app_id and app_ids":  {edit(func(c *Config) { c.AppIDs = []string{"wxA", wechatTestAppID} }), ""},
		"app_ids empty entry": {edit(func(c *Config) { c.AppIDs = []string{"wxA", ""} }), "channels.wechatpay.app_ids[1]"},
		"app_ids blank entry": {edit(func(c *Config) { c.AppIDs = []string{" wxA"} }), "channels.wechatpay.app_ids[0]"},
		"app_id blank":        {edit(func(c *Config) { c.AppID = "wxA " }), "channels.wechatpay.app_id"},
		"short api key":       {edit(func(c *Config) { c.APIv3Key = wechatTestAPIv3Key[:31] }), "channels.wechatpay.api_v3_key"},
		"long api key":        {edit(func(c *Config) { c.APIv3Key = wechatTestAPIv3Key + "x" }), "channels.wechatpay.api_v3_key"},
		"no platform key":     {edit(func(c *Config) { c.PublicKeyID, c.PublicKey = "", nil }), "channels.wechatpay.platform_"},
		"key id only":         {edit(func(c *Config) { c.PublicKey = nil }), "channels.wechatpay.platform_public_key_file"},
		"key only":            {edit(func(c *Config) { c.PublicKeyID = "" }), "channels.wechatpay.platform_public_key_id"},
		"small public key":    {edit(func(c *Config) { c.PublicKey = &small.PublicKey }), "channels.wechatpay.platform_public_key_file"},
		"nil certificate":     {edit(func(c *Config) { c.Certificates = []*x509.Certificate{k.c1, nil} }), "channels.wechatpay.platform_certificate_files[1]"},
		"ECDSA certificate":   {edit(func(c *Config) { c.Certificates = []*x509.Certificate{ecCert} }), "channels.wechatpay.platform_certificate_files[0]"},
		"small certificate":   {edit(func(c *Config) { c.Certificates = []*x509.Certificate{smallCert} }), "channels.wechatpay.platform_certificate_files[0]"},
		"duplicate serial":    {edit(func(c *Config) { c.Certificates = []*x509.Certificate{k.c1, dupSerial} }), "channels.wechatpay.platform_certificate_files[1]"},
		"serial equals key id": {edit(func(c *Config) {
			c.PublicKeyID, c.Certificates = "42", []*x509.Certificate{pubIDAsCert}
		}), "channels.wechatpay.platform_certificate_files[0]"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w, err := New(tt.config)
			if tt.wantKey == "" {
				if err != nil || w == nil {
					t.Fatalf("NewWeChatPay: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("NewWeChatPay accepted the config, want an error naming %s", tt.wantKey)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("error %q does not name %s", err, tt.wantKey)
			}
			if tt.config.APIv3Key != "" && strings.Contains(err.Error(), tt.config.APIv3Key) {
				t.Errorf("error %q shows the APIv3 key", err)
			}
		})
	}
}

// TestWeChatPayCertificateSerial: the serial WeChat sends is the upper-case hex of the
// certificate's serial number bytes, as the SDK's certificate map keys it: a leading zero nibble
// stays, where big.Int's Text(16) would drop it.
func TestWeChatPayCertificateSerial(t *testing.T) {
	k := testWeChatKeys(t)
	c := Config{MchID: wechatTestMchID, AppID: wechatTestAppID, APIv3Key: wechatTestAPIv3Key,
		Certificates: []*x509.Certificate{k.c2}}
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = "0A1B2C3D4E5F60718293A4B5C6D7E8F901234567"
	if len(w.serials) != 1 || !w.serials[want] {
		t.Errorf("serials = %v, want only %s", w.serials, want)
	}
}

func TestWeChatPayReply(t *testing.T) {
	w := testWeChatPay(t, wechatPubKeyMode)
	tests := map[string]struct {
		reply           payment.Reply
		wantStatus      int
		wantContentType string
		wantBody        string
	}{
		"success": {payment.ReplySuccess, 200, "", ""},
		"refuse":  {payment.ReplyRefuse, 400, "application/json", `{"code":"FAIL","message":"verification failed"}`},
		"retry":   {payment.ReplyRetry, 500, "application/json", `{"code":"FAIL","message":"temporarily unavailable, retry"}`},
		"unknown": {payment.Reply(42), 500, "application/json", `{"code":"FAIL","message":"temporarily unavailable, retry"}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := w.Reply(tt.reply)
			if got.Status != tt.wantStatus || got.ContentType != tt.wantContentType || string(got.Body) != tt.wantBody {
				t.Errorf("Reply = %d %q %q, want %d %q %q", got.Status, got.ContentType, got.Body, tt.wantStatus, tt.wantContentType, tt.wantBody)
			}
			if tt.wantBody != "" && !json.Valid(got.Body) {
				t.Errorf("body %q is not JSON", got.Body)
			}
		})
	}
	w.Reply(payment.ReplyRefuse).Body[0] = 'X'
	if got := w.Reply(payment.ReplyRefuse).Body; got[0] != '{' {
		t.Errorf("replies share their body: %q", got)
	}
}

func TestWeChatPayName(t *testing.T) {
	if got := testWeChatPay(t, wechatPubKeyMode).Name(); got != "wechatpay" {
		t.Errorf("Name = %q", got)
	}
}
