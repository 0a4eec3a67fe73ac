package alipay

import (
	"bytes"
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

const (
	testAppID    = "2021000000000001"
	testSellerID = "2088000000000002"
)

// readAlipayVectors is testdata/alipay_vectors.txt, made by make_alipay_vectors.sh with
// openssl, not by this package: each vector's signed string and body.
func readAlipayVectors(tb testing.TB) map[string]channeltest.FormVector {
	return channeltest.ReadFormVectors(tb, "alipay_vectors.txt")
}

// testAlipayPublicKey is the key as the Alipay console shows it: bare base64.
func testAlipayPublicKey(tb testing.TB) *rsa.PublicKey {
	tb.Helper()
	key, err := channels.ParseRSAPublicKey(channeltest.ReadTestFile(tb, "alipay_pub.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// param is one form parameter; a slice of them keeps the body order chosen by the test.
type param struct{ k, v string }

// signAlipay plays Alipay: it signs params the way the protocol notes describe, written apart from
// alipaySignedString on purpose, and returns the form body with sign and (unless signType is "")
// sign_type appended. hash and signType are separate so a test can mislabel a signature.
func signAlipay(tb testing.TB, key *rsa.PrivateKey, hash crypto.Hash, signType string, params []param) string {
	tb.Helper()
	var pairs []param
	for _, p := range params {
		if p.v != "" {
			pairs = append(pairs, p)
		}
	}
	slices.SortFunc(pairs, func(a, b param) int { return cmp.Compare(a.k, b.k) })
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.k + "=" + p.v
	}
	sign := signString(tb, key, hash, strings.Join(parts, "&"))

	params = append(slices.Clone(params), param{"sign", sign})
	if signType != "" {
		params = append(params, param{"sign_type", signType})
	}
	return formBody(params)
}

func signString(tb testing.TB, key *rsa.PrivateKey, hash crypto.Hash, s string) string {
	tb.Helper()
	var digest []byte
	switch hash {
	case crypto.SHA256:
		sum := sha256.Sum256([]byte(s))
		digest = sum[:]
	case crypto.SHA1:
		sum := sha1.Sum([]byte(s))
		digest = sum[:]
	default:
		tb.Fatalf("unexpected hash %v", hash)
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, hash, digest)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func formBody(params []param) string {
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = url.QueryEscape(p.k) + "=" + url.QueryEscape(p.v)
	}
	return strings.Join(parts, "&")
}

// paidParams is a plain TRADE_SUCCESS notification; with edits applied: a value of "-" drops the
// key, any other value replaces it or, for a new key, is appended.
func paidParams(edits ...param) []param {
	params := []param{
		{"notify_time", "2024-05-01 12:00:06"},
		{"notify_type", "trade_status_sync"},
		{"notify_id", "2024050100222120000099999999999999"},
		{"app_id", testAppID},
		{"charset", "utf-8"},
		{"version", "1.0"},
		{"trade_no", "2024050122001400000000000009"},
		{"out_trade_no", "T20240501-0009"},
		{"seller_id", testSellerID},
		{"trade_status", "TRADE_SUCCESS"},
		{"total_amount", "12.30"},
		{"gmt_payment", "2024-05-01 12:00:05"},
	}
	for _, e := range edits {
		i := slices.IndexFunc(params, func(p param) bool { return p.k == e.k })
		switch {
		case e.v == "-" && i >= 0:
			params = slices.Delete(params, i, i+1)
		case i >= 0:
			params[i].v = e.v
		default:
			params = append(params, e)
		}
	}
	return params
}

func TestAlipayVectors(t *testing.T) {
	tests := map[string]payment.Event{
		"rsa2_paid": {
			NotifyID: "2024050100222120000011111111111111", TradeNo: "T20240501-0001",
			ChannelTxnID: "2024050122001400000000000001", Kind: payment.KindPaid, Status: "TRADE_SUCCESS",
			AmountFen: 8888, PaidAt: time.Date(2024, 5, 1, 12, 0, 5, 0, bills.ChinaTime), Subject: "测试商品 Order #1 & co",
		},
		"rsa_sha1_finished": {
			NotifyID: "2024050300222080000022222222222222", TradeNo: "T20240501_0002",
			ChannelTxnID: "2024050122001400000000000002", Kind: payment.KindPaid, Status: "TRADE_FINISHED",
			AmountFen: 100, PaidAt: time.Date(2024, 5, 1, 23, 59, 59, 0, bills.ChinaTime),
		},
		"rsa2_partial_refund": {
			NotifyID: "2024050200222100000033333333333333", TradeNo: "T20240501-0001",
			ChannelTxnID: "2024050122001400000000000001", Kind: payment.KindRefund, Status: "TRADE_SUCCESS",
			AmountFen: 8888, PaidAt: time.Date(2024, 5, 1, 12, 0, 5, 0, bills.ChinaTime),
			RefundID: "R20240502-0001", RefundFen: 1000, RefundIsTotal: true,
		},
		// Paid, then refunded in full: Alipay closes the trade. A refund, not an unpaid close.
		"rsa2_closed_full_refund": {
			NotifyID: "2024050300222090000066666666666666", TradeNo: "T20240501-0005",
			ChannelTxnID: "2024050122001400000000000005", Kind: payment.KindRefund, Status: "TRADE_CLOSED",
			AmountFen: 2000, PaidAt: time.Date(2024, 5, 1, 12, 0, 5, 0, bills.ChinaTime),
			RefundID: "", RefundFen: 2000, RefundIsTotal: true,
		},
		// Signed by openssl over the GBK bytes iconv made.
		"rsa2_gbk_paid": {
			NotifyID: "2024050100222121000077777777777777", TradeNo: "T20240501-0006",
			ChannelTxnID: "2024050122001400000000000006", Kind: payment.KindPaid, Status: "TRADE_SUCCESS",
			AmountFen: 6660, PaidAt: time.Date(2024, 5, 1, 12, 10, 5, 0, bills.ChinaTime), Subject: "测试商品：龙井茶叶 250克",
		},
		"rsa2_closed": {
			NotifyID: "2024050100222123000044444444444444", TradeNo: "T20240501-0003",
			ChannelTxnID: "2024050122001400000000000003", Kind: payment.KindClosed, Status: "TRADE_CLOSED",
			AmountFen: 50,
		},
		"rsa2_wait_buyer_pay": {
			NotifyID: "2024050100222120100055555555555555", TradeNo: "T20240501-0004",
			ChannelTxnID: "2024050122001400000000000004", Kind: payment.KindPending, Status: "WAIT_BUYER_PAY",
			AmountFen: 10000,
		},
	}
	vectors := readAlipayVectors(t)
	if len(vectors) != len(tests) {
		t.Fatalf("alipay_vectors.txt has %d vectors, the test expects %d", len(vectors), len(tests))
	}
	// The wait_buyer_pay vector carries no seller_id: it is only checked when configured.
	noSeller := New(testAppID, "", testAlipayPublicKey(t))
	withSeller := New(testAppID, testSellerID, testAlipayPublicKey(t))

	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			v, ok := vectors[name]
			if !ok {
				t.Fatalf("no vector %q", name)
			}
			params, charset, err := parseAlipayForm([]byte(v.Body))
			if err != nil {
				t.Fatal(err)
			}
			if params, err = alipayUTF8(params, charset); err != nil { // the file shows it in UTF-8
				t.Fatal(err)
			}
			if got := alipaySignedString(params); got != v.Signed {
				t.Errorf("signed string\n got %s\nwant %s", got, v.Signed)
			}

			a := withSeller
			if name == "rsa2_wait_buyer_pay" {
				a = noSeller
			}
			got, err := a.Verify([]byte(v.Body), nil, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			want.Channel, want.Currency, want.Raw = "alipay", "CNY", []byte(v.Body)
			channeltest.AssertEvent(t, got, want)
		})
	}
}

func TestAlipayVerify(t *testing.T) {
	key := channeltest.ReadPrivateKey(t, "alipay_key.pem")
	otherKey := channeltest.ReadPrivateKey(t, "other_key.pem")
	vectors := readAlipayVectors(t)
	rsa2 := vectors["rsa2_paid"].Body
	sha1Body := vectors["rsa_sha1_finished"].Body
	sign := func(params []param) string { return signAlipay(t, key, crypto.SHA256, "RSA2", params) }
	signedOver := func(s string) string { // a body whose sign covers exactly s
		return formBody(append(paidParams(), param{"sign", signString(t, key, crypto.SHA256, s)}, param{"sign_type", "RSA2"}))
	}
	plain := paidParams()
	var plainSigned []string
	for _, p := range plain {
		plainSigned = append(plainSigned, p.k+"="+p.v)
	}
	slices.Sort(plainSigned)

	tests := map[string]struct {
		body     string
		sellerID string // checked when not empty
		wantErr  error  // nil = verifies
	}{
		"valid RSA2 vector":     {body: rsa2, sellerID: testSellerID},
		"valid RSA SHA1 vector": {body: sha1Body, sellerID: testSellerID},
		"valid test-signed":     {body: sign(plain)},
		"valid with plus for space": {
			body: strings.ReplaceAll(sign(plain), "%20", "+"),
		},

		"wrong key": {body: signAlipay(t, otherKey, crypto.SHA256, "RSA2", plain), wantErr: channels.ErrBadSignature},
		"tampered total_amount": {
			body: strings.Replace(rsa2, "total_amount=88.88", "total_amount=88.89", 1), wantErr: channels.ErrBadSignature,
		},
		"field added after signing": {body: rsa2 + "&voucher_detail_list=%5B%5D", wantErr: channels.ErrBadSignature},
		"field removed after signing": {
			body: strings.Replace(rsa2, "&point_amount=0.00", "", 1), wantErr: channels.ErrBadSignature,
		},
		// Empty values are outside the signed string, so adding one cannot break a signature.
		"empty field added after signing": {body: rsa2 + "&extra=", sellerID: testSellerID},
		"extra signed fields": {
			body: sign(paidParams(
				param{"fund_bill_list", `[{"amount":"12.30","fundChannel":"ALIPAYACCOUNT"}]`},
				param{"voucher_detail_list", `[{"id":"2024","amount":"1.00"}]`},
				param{"subject", "测试 & = %"},
			)),
		},
		"empty value left out of signed string": {
			body: sign(paidParams(param{"passback_params", ""}, param{"body", ""})),
		},
		"empty value signed as k= is refused": {
			body:    signedOver(strings.Join(slices.Insert(slices.Clone(plainSigned), 0, "body="), "&")),
			wantErr: channels.ErrBadSignature,
		},
		"signed string of the protocol verifies": {body: signedOver(strings.Join(plainSigned, "&"))},
		"sign_type inside the signed string is refused": {
			body:    signedOver(strings.Join(append(slices.Clone(plainSigned), "sign_type=RSA2"), "&")),
			wantErr: channels.ErrBadSignature,
		},

		"RSA label on RSA2 signature": {body: signAlipay(t, key, crypto.SHA256, "RSA", plain), wantErr: channels.ErrBadSignature},
		"RSA2 label on RSA signature": {body: signAlipay(t, key, crypto.SHA1, "RSA2", plain), wantErr: channels.ErrBadSignature},
		"unknown sign_type":           {body: signAlipay(t, key, crypto.SHA256, "RSA3", plain), wantErr: channels.ErrUnsupported},
		"lower-case sign_type":        {body: signAlipay(t, key, crypto.SHA256, "rsa2", plain), wantErr: channels.ErrUnsupported},
		"missing sign_type":           {body: signAlipay(t, key, crypto.SHA256, "", plain), wantErr: channels.ErrUnsupported},
		"missing sign":                {body: formBody(append(paidParams(), param{"sign_type", "RSA2"})), wantErr: channels.ErrBadSignature},
		"empty sign":                  {body: formBody(append(paidParams(), param{"sign", ""}, param{"sign_type", "RSA2"})), wantErr: channels.ErrBadSignature},
		"sign not base64": {
			body: formBody(append(paidParams(), param{"sign", "not*base64"}, param{"sign_type", "RSA2"})), wantErr: channels.ErrBadSignature,
		},
		"sign truncated": {
			body: strings.Replace(rsa2, "sign=", "sign=AAAA", 1), wantErr: channels.ErrBadSignature,
		},

		"duplicate key":          {body: rsa2 + "&out_trade_no=T20240501-0001", wantErr: channels.ErrMalformed},
		"duplicate key in front": {body: "total_amount=0.01&" + rsa2, wantErr: channels.ErrMalformed},
		"duplicate sign":         {body: rsa2 + "&sign=AAAA", wantErr: channels.ErrMalformed},
		"bad percent-encoding":   {body: rsa2 + "&x=%zz", wantErr: channels.ErrMalformed},
		"semicolon separator":    {body: strings.Replace(rsa2, "&", ";", 1), wantErr: channels.ErrMalformed},
		"parameter without name": {body: rsa2 + "&=x", wantErr: channels.ErrMalformed},
		"invalid UTF-8 value":    {body: sign(paidParams(param{"subject", "\xff\xfe"})), wantErr: channels.ErrMalformed},
		"invalid UTF-8 key":      {body: sign(paidParams(param{"k\xff", "v"})), wantErr: channels.ErrMalformed},
		"empty body":             {body: "", wantErr: channels.ErrMalformed},
		"only separators":        {body: "&&", wantErr: channels.ErrBadSignature},

		"charset GBK":         {body: sign(paidParams(param{"charset", "GBK"}))},
		"charset gb2312":      {body: sign(paidParams(param{"charset", "gb2312"}))},
		"charset Big5":        {body: sign(paidParams(param{"charset", "Big5"})), wantErr: channels.ErrUnsupported},
		"charset GB18030":     {body: sign(paidParams(param{"charset", "GB18030"})), wantErr: channels.ErrUnsupported},
		"charset UTF-8 upper": {body: sign(paidParams(param{"charset", "UTF-8"}))},
		"charset absent":      {body: sign(paidParams(param{"charset", "-"}))},

		"bad app_id":           {body: sign(paidParams(param{"app_id", "2021000000000002"})), wantErr: channels.ErrNotOurs},
		"missing app_id":       {body: sign(paidParams(param{"app_id", "-"})), wantErr: channels.ErrNotOurs},
		"app_id prefix":        {body: sign(paidParams(param{"app_id", testAppID[:10]})), wantErr: channels.ErrNotOurs},
		"bad app_id, bad sign": {body: signAlipay(t, otherKey, crypto.SHA256, "RSA2", paidParams(param{"app_id", "x"})), wantErr: channels.ErrBadSignature},
		"bad seller_id when configured": {
			body: sign(paidParams(param{"seller_id", "2088000000000003"})), sellerID: testSellerID, wantErr: channels.ErrNotOurs,
		},
		"missing seller_id when configured": {
			body: sign(paidParams(param{"seller_id", "-"})), sellerID: testSellerID, wantErr: channels.ErrNotOurs,
		},
		"bad seller_id ignored when not configured": {body: sign(paidParams(param{"seller_id", "2088000000000003"}))},

		"missing notify_id":       {body: sign(paidParams(param{"notify_id", "-"})), wantErr: channels.ErrMalformed},
		"missing trade_no":        {body: sign(paidParams(param{"trade_no", "-"})), wantErr: channels.ErrMalformed},
		"missing out_trade_no":    {body: sign(paidParams(param{"out_trade_no", "-"})), wantErr: channels.ErrMalformed},
		"out_trade_no with slash": {body: sign(paidParams(param{"out_trade_no", "T/1"})), wantErr: channels.ErrMalformed},
		"out_trade_no 32 chars":   {body: sign(paidParams(param{"out_trade_no", strings.Repeat("a", 32)}))},
		"out_trade_no 33 chars":   {body: sign(paidParams(param{"out_trade_no", strings.Repeat("a", 33)})), wantErr: channels.ErrMalformed},
		"notify_id 128 bytes":     {body: sign(paidParams(param{"notify_id", strings.Repeat("1", 128)}))},
		"notify_id 129 bytes":     {body: sign(paidParams(param{"notify_id", strings.Repeat("1", 129)})), wantErr: channels.ErrMalformed},
		"trade_no 128 bytes":      {body: sign(paidParams(param{"trade_no", strings.Repeat("2", 128)}))},
		"trade_no 129 bytes":      {body: sign(paidParams(param{"trade_no", strings.Repeat("2", 129)})), wantErr: channels.ErrMalformed},
		"out_biz_no 129 bytes": {
			body: sign(paidParams(param{"refund_fee", "1.00"}, param{"out_biz_no", strings.Repeat("R", 129)})), wantErr: channels.ErrMalformed,
		},
		"missing total_amount":  {body: sign(paidParams(param{"total_amount", "-"})), wantErr: channels.ErrMalformed},
		"total_amount exponent": {body: sign(paidParams(param{"total_amount", "1e2"})), wantErr: channels.ErrMalformed},
		"total_amount negative": {body: sign(paidParams(param{"total_amount", "-1.00"})), wantErr: channels.ErrMalformed},
		"bad gmt_payment":       {body: sign(paidParams(param{"gmt_payment", "2024-05-01T12:00:05Z"})), wantErr: channels.ErrMalformed},
		"missing gmt_payment":   {body: sign(paidParams(param{"gmt_payment", "-"}))},
		"unknown trade_status":  {body: sign(paidParams(param{"trade_status", "TRADE_PAID"})), wantErr: channels.ErrMalformed},
		"missing trade_status":  {body: sign(paidParams(param{"trade_status", "-"})), wantErr: channels.ErrMalformed},
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := New(testAppID, tt.sellerID, testAlipayPublicKey(t))
			ev, err := a.Verify([]byte(tt.body), nil, time.Now())
			if !channeltest.WantVerify(t, tt.body, ev, err, tt.wantErr) {
				return
			}
			// The reason must never carry the signature.
			if vals, perr := url.ParseQuery(tt.body); perr == nil {
				if s := vals.Get("sign"); len(s) >= 8 && strings.Contains(err.Error(), s[:8]) {
					t.Errorf("error %q quotes the signature", err)
				}
			}
		})
	}
}

func TestAlipayKind(t *testing.T) {
	key := channeltest.ReadPrivateKey(t, "alipay_key.pem")
	a := New(testAppID, testSellerID, testAlipayPublicKey(t))
	const txn = "2024050122001400000000000009" // paidParams' trade_no
	closed := param{"trade_status", "TRADE_CLOSED"}
	tests := map[string]struct {
		edits     []param
		want      payment.Kind
		refundID  string
		refundFen int64 // the running total refund_fee states
	}{
		"TRADE_SUCCESS":                 {edits: []param{{"trade_status", "TRADE_SUCCESS"}}, want: payment.KindPaid},
		"TRADE_FINISHED":                {edits: []param{{"trade_status", "TRADE_FINISHED"}}, want: payment.KindPaid},
		"TRADE_CLOSED unpaid":           {edits: []param{closed, {"gmt_payment", "-"}}, want: payment.KindClosed},
		"WAIT_BUYER_PAY":                {edits: []param{{"trade_status", "WAIT_BUYER_PAY"}, {"gmt_payment", "-"}}, want: payment.KindPending},
		"TRADE_SUCCESS gmt_refund only": {edits: []param{{"gmt_refund", "2024-05-02 10:00:00"}}, want: payment.KindPaid},
		"TRADE_SUCCESS zero refund":     {edits: []param{{"refund_fee", "0.00"}, {"gmt_refund", "2024-05-02 10:00:00"}}, want: payment.KindPaid},
		"TRADE_SUCCESS empty refund":    {edits: []param{{"refund_fee", ""}, {"gmt_refund", ""}}, want: payment.KindPaid},
		"WAIT_BUYER_PAY odd refund_fee": {edits: []param{{"trade_status", "WAIT_BUYER_PAY"}, {"refund_fee", "1"}}, want: payment.KindPending},
		"TRADE_CLOSED zero refund":      {edits: []param{closed, {"refund_fee", "0.00"}}, want: payment.KindClosed},

		"partial refund with out_biz_no": {
			edits: []param{{"refund_fee", "1.00"}, {"gmt_refund", "2024-05-02 10:00:00.123"}, {"out_biz_no", "R-7"}},
			want:  payment.KindRefund, refundID: "R-7", refundFen: 100,
		},
		"partial refund without out_biz_no": {
			edits: []param{{"refund_fee", "1.00"}, {"gmt_refund", "2024-05-02 10:00:00.123"}},
			want:  payment.KindRefund, refundID: "", refundFen: 100,
		},
		"partial refund, refund_fee alone": {
			edits: []param{{"refund_fee", "1.00"}}, want: payment.KindRefund, refundID: "", refundFen: 100,
		},
		"TRADE_FINISHED with refund": {
			edits: []param{{"trade_status", "TRADE_FINISHED"}, {"refund_fee", "2.50"}, {"out_biz_no", "R-8"}},
			want:  payment.KindRefund, refundID: "R-8", refundFen: 250,
		},
		"TRADE_CLOSED after a full refund": {
			edits: []param{closed, {"refund_fee", "12.30"}, {"gmt_refund", "2024-05-03 09:00:00"}, {"out_biz_no", "R-9"}},
			want:  payment.KindRefund, refundID: "R-9", refundFen: 1230,
		},
		"TRADE_CLOSED with refund_fee only": {
			edits: []param{closed, {"refund_fee", "12.30"}}, want: payment.KindRefund, refundID: "", refundFen: 1230,
		},
		"TRADE_CLOSED with gmt_refund only: the whole total_amount": {
			edits: []param{closed, {"gmt_refund", "2024-05-03 09:00:00"}},
			want:  payment.KindRefund, refundID: "", refundFen: 1230,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			body := signAlipay(t, key, crypto.SHA256, "RSA2", paidParams(tt.edits...))
			ev, err := a.Verify([]byte(body), nil, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tt.want {
				t.Errorf("Kind = %s, want %s", ev.Kind, tt.want)
			}
			if ev.AmountFen != 1230 || ev.ChannelTxnID != txn {
				t.Errorf("AmountFen, ChannelTxnID = %d, %s; want 1230 (total_amount, whatever the kind), the payment's trade_no", ev.AmountFen, ev.ChannelTxnID)
			}
			if ev.RefundID != tt.refundID || ev.RefundFen != tt.refundFen || ev.RefundIsTotal != (tt.want == payment.KindRefund) {
				t.Errorf("refund = %q %d total=%v, want %q %d", ev.RefundID, ev.RefundFen, ev.RefundIsTotal, tt.refundID, tt.refundFen)
			}
		})
	}
	// A refund_fee that does not parse is refused, whatever the trade_status it comes with.
	for _, status := range []string{"TRADE_SUCCESS", "TRADE_CLOSED"} {
		body := signAlipay(t, key, crypto.SHA256, "RSA2", paidParams(param{"trade_status", status}, param{"refund_fee", "1e2"}))
		if _, err := a.Verify([]byte(body), nil, time.Time{}); !errors.Is(err, channels.ErrMalformed) {
			t.Errorf("%s with refund_fee 1e2: err = %v, want ErrMalformed", status, err)
		}
	}
}

// TestAlipayCharset: Alipay signs the values in the charset it names. The signature must be
// checked over those bytes as sent, and the event must carry them as UTF-8.
func TestAlipayCharset(t *testing.T) {
	key := channeltest.ReadPrivateKey(t, "alipay_key.pem")
	a := New(testAppID, "", testAlipayPublicKey(t))
	const subject = "测试商品：龙井茶叶 250克 ￥"
	gbk := func(s string) string {
		b, err := simplifiedchinese.GBK.NewEncoder().String(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := map[string]struct {
		charset string
		sent    string // the subject's bytes in the body
		signed  string // the subject's bytes in the signed string
		wantErr error
	}{
		"GBK":                        {charset: "GBK", sent: gbk(subject), signed: gbk(subject)},
		"gbk lower case":             {charset: "gbk", sent: gbk(subject), signed: gbk(subject)},
		"gb2312":                     {charset: "gb2312", sent: gbk(subject), signed: gbk(subject)},
		"utf-8":                      {charset: "utf-8", sent: subject, signed: subject},
		"GBK sent, UTF-8 signed":     {charset: "GBK", sent: gbk(subject), signed: subject, wantErr: channels.ErrBadSignature},
		"GBK bytes labelled utf-8":   {charset: "utf-8", sent: gbk(subject), signed: gbk(subject), wantErr: channels.ErrMalformed},
		"UTF-8 bytes labelled GBK":   {charset: "GBK", sent: subject, signed: subject}, // verifies; the subject is mojibake
		"GBK, unknown charset label": {charset: "x-gbk", sent: gbk(subject), signed: gbk(subject), wantErr: channels.ErrUnsupported},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			params := paidParams(param{"charset", tt.charset}, param{"subject", tt.signed})
			body := signAlipay(t, key, crypto.SHA256, "RSA2", params)
			body = strings.Replace(body, "subject="+url.QueryEscape(tt.signed), "subject="+url.QueryEscape(tt.sent), 1)
			ev, err := a.Verify([]byte(body), nil, time.Time{})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if name == "UTF-8 bytes labelled GBK" {
				if ev.Subject == subject || !utf8.ValidString(ev.Subject) {
					t.Errorf("Subject = %q: want the UTF-8 bytes read as GBK, still valid UTF-8", ev.Subject)
				}
				return
			}
			if ev.Subject != subject || ev.TradeNo != "T20240501-0009" || ev.Kind != payment.KindPaid {
				t.Errorf("event: subject %q, trade_no %q, kind %s; want %q intact", ev.Subject, ev.TradeNo, ev.Kind, subject)
			}
		})
	}
}

func TestAlipayPaidAt(t *testing.T) {
	key := channeltest.ReadPrivateKey(t, "alipay_key.pem")
	a := New(testAppID, "", testAlipayPublicKey(t))
	body := signAlipay(t, key, crypto.SHA256, "RSA2", paidParams(param{"gmt_payment", "2024-05-01 08:00:05"}))
	ev, err := a.Verify([]byte(body), nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2024, 5, 1, 0, 0, 5, 0, time.UTC); !ev.PaidAt.Equal(want) {
		t.Errorf("PaidAt = %v, want %v (UTC+8)", ev.PaidAt.UTC(), want)
	}
}

func TestAlipayReply(t *testing.T) {
	a := New(testAppID, "", testAlipayPublicKey(t))
	tests := map[string]struct {
		reply      payment.Reply
		wantStatus int
		wantBody   []byte
	}{
		"success": {payment.ReplySuccess, 200, []byte{'s', 'u', 'c', 'c', 'e', 's', 's'}},
		"refuse":  {payment.ReplyRefuse, 400, []byte{'f', 'a', 'i', 'l'}},
		"retry":   {payment.ReplyRetry, 503, []byte{'f', 'a', 'i', 'l'}},
		"unknown": {payment.Reply(42), 503, []byte{'f', 'a', 'i', 'l'}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := a.Reply(tt.reply)
			if got.Status != tt.wantStatus || !bytes.Equal(got.Body, tt.wantBody) {
				t.Errorf("Reply = %d %q, want %d %q", got.Status, got.Body, tt.wantStatus, tt.wantBody)
			}
			if got.ContentType != "text/plain; charset=utf-8" {
				t.Errorf("ContentType = %q", got.ContentType)
			}
		})
	}
	// A caller writing into one reply's body must not change the next.
	a.Reply(payment.ReplySuccess).Body[0] = 'X'
	if got := a.Reply(payment.ReplySuccess).Body; string(got) != "success" {
		t.Errorf("replies share their body: %q", got)
	}
}

func TestAlipayName(t *testing.T) {
	if got := New(testAppID, "", testAlipayPublicKey(t)).Name(); got != "alipay" {
		t.Errorf("Name = %q", got)
	}
}

func TestParseRSAPublicKey(t *testing.T) {
	want := &channeltest.ReadPrivateKey(t, "alipay_key.pem").PublicKey
	bare := strings.TrimSpace(channeltest.ReadTestFile(t, "alipay_pub.txt"))
	var wrapped strings.Builder
	for s := bare; s != ""; {
		n := min(64, len(s))
		wrapped.WriteString("  " + s[:n] + "\r\n")
		s = s[n:]
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1DER := x509.MarshalPKCS1PublicKey(want)

	tests := map[string]struct {
		in string
		ok bool
	}{
		"PEM PKIX":            {channeltest.ReadTestFile(t, "alipay_pub.pem"), true},
		"PEM PKCS1":           {channeltest.ReadTestFile(t, "alipay_pub_pkcs1.pem"), true},
		"bare base64":         {bare, true},
		"bare base64 wrapped": {"\n" + wrapped.String(), true},
		"bare base64 newline": {bare + "\n", true},

		"empty":                {"", false},
		"garbage":              {"this is not a key", false},
		"base64 of garbage":    {base64.StdEncoding.EncodeToString([]byte("garbage")), false},
		"truncated base64":     {bare[:len(bare)-10], false},
		"bare base64 of PKCS1": {base64.StdEncoding.EncodeToString(pkcs1DER), false},
		"EC key":               {base64.StdEncoding.EncodeToString(ecDER), false},
		"PEM private key":      {channeltest.ReadTestFile(t, "alipay_key.pem"), false},
		"PEM broken":           {"-----BEGIN PUBLIC KEY-----\n" + bare, false},
		"PEM then junk":        {channeltest.ReadTestFile(t, "alipay_pub.pem") + "junk", false},
		"PEM EC key": {
			string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})), false,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := channels.ParseRSAPublicKey(tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(want) {
				t.Error("parsed a different key")
			}
		})
	}
}

func TestParseYuan(t *testing.T) {
	tests := map[string]struct {
		want int64
		ok   bool
	}{
		"88.88":        {8888, true},
		"0.01":         {1, true},
		"1":            {100, true},
		"1.5":          {150, true},
		"0.5":          {50, true},
		"100.00":       {10000, true},
		"0":            {0, true},
		"0.00":         {0, true},
		"1000000000":   {100_000_000_000, true}, // the cap itself
		"999999999.99": {99_999_999_999, true},

		"-1":                   {0, false},
		"+1":                   {0, false},
		"1.234":                {0, false},
		"1e2":                  {0, false},
		"":                     {0, false},
		" 1":                   {0, false},
		"1 ":                   {0, false},
		"1.":                   {0, false}, // decided: a point needs digits on both sides
		".5":                   {0, false},
		".":                    {0, false},
		"01":                   {0, false}, // decided: no leading zeros, Alipay never writes them
		"00.5":                 {0, false},
		"1,00":                 {0, false},
		"1.2.3":                {0, false},
		"1.-1":                 {0, false},
		"١":                    {0, false}, // a non-ASCII digit
		"0x10":                 {0, false},
		"NaN":                  {0, false},
		"1000000000.01":        {0, false},
		"99999999999999999999": {0, false},
		"9223372036854775807":  {0, false},
	}
	for in, tt := range tests {
		t.Run(in, func(t *testing.T) {
			got, err := ParseYuan(in)
			if !tt.ok {
				if !errors.Is(err, channels.ErrMalformed) {
					t.Fatalf("ParseYuan(%q) = %d, %v; want ErrMalformed", in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseYuan(%q) = %d, %v; want %d", in, got, err, tt.want)
			}
		})
	}
}
