package unionpay

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
)

const testUnionPayMerID = "777290058110048"

// readUnionPayVectors is testdata/unionpay_vectors.txt, made by make_unionpay_vectors.sh with
// openssl, not by this package: each vector's hex SHA-256 of the signed string (Signed), and
// the signed body.
func readUnionPayVectors(tb testing.TB) map[string]channeltest.FormVector {
	return channeltest.ReadFormVectors(tb, "unionpay_vectors.txt")
}

// unionPayPKI is the openssl-made test chain in testdata (root -> intermediate -> signing cert).
type unionPayPKI struct {
	root, mid, sign          *x509.Certificate
	rootKey, midKey, signKey *rsa.PrivateKey
	other                    *rsa.PrivateKey // a key of no chain
	now                      time.Time       // inside every certificate's validity
}

func readCert(tb testing.TB, name string) *x509.Certificate {
	tb.Helper()
	block, _ := pem.Decode([]byte(channeltest.ReadTestFile(tb, name)))
	if block == nil {
		tb.Fatalf("%s: no PEM block", name)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return c
}

func testUnionPayPKI(tb testing.TB) unionPayPKI {
	tb.Helper()
	p := unionPayPKI{
		root:    readCert(tb, "unionpay_root.pem"),
		mid:     readCert(tb, "unionpay_intermediate.pem"),
		sign:    readCert(tb, "unionpay_sign.pem"),
		rootKey: channeltest.ReadPrivateKey(tb, "unionpay_root_key.pem"),
		midKey:  channeltest.ReadPrivateKey(tb, "unionpay_intermediate_key.pem"),
		signKey: channeltest.ReadPrivateKey(tb, "unionpay_sign_key.pem"),
		other:   channeltest.ReadPrivateKey(tb, "other_key.pem"),
	}
	p.now = p.sign.NotBefore.Add(24 * time.Hour)
	return p
}

func (p unionPayPKI) config() Config {
	return Config{MerID: testUnionPayMerID, Roots: []*x509.Certificate{p.root}, Intermediates: []*x509.Certificate{p.mid}}
}

// verify is what a verifier of c makes of body at at: a zero c is p.config(), a zero at is p.now.
func (p unionPayPKI) verify(tb testing.TB, c Config, body []byte, at time.Time) (payment.Event, error) {
	tb.Helper()
	if c.MerID == "" {
		c = p.config()
	}
	if at.IsZero() {
		at = p.now
	}
	return testUnionPay(tb, c).Verify(body, http.Header{}, at)
}

func testUnionPay(tb testing.TB, c Config) *Channel {
	tb.Helper()
	u, err := New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

func caTemplate(cn string, from, to time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject: pkix.Name{CommonName: cn}, NotBefore: from, NotAfter: to,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
}

func leafTemplate(cn string, from, to time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:   pkix.Name{Country: []string{"CN"}, OrganizationalUnit: []string{"Enterprises"}, CommonName: cn},
		NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
	}
}

func pemOf(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// unionPayFields are the unsigned fields of a consume notice; edits replace or add fields (an
// empty value stays, as an empty field).
func unionPayFields(edits ...param) map[string]string {
	f := map[string]string{
		"version": "5.1.0", "encoding": "UTF-8", "signMethod": "01", "bizType": "000201", "accessType": "0",
		"merId": testUnionPayMerID, "orderId": "T20240501001", "txnTime": "20240501120005",
		"txnType": "01", "txnSubType": "01", "txnAmt": "8888", "settleAmt": "8888", "currencyCode": "156",
		"settleCurrencyCode": "156", "queryId": "652405011200050012345", "respCode": "00",
		"respMsg": "成功[0000000]", "traceNo": "123456", "traceTime": "0501120005", "settleDate": "0501",
	}
	for _, e := range edits {
		f[e.k] = e.v
	}
	return f
}

// signUnionPay plays UnionPay: it signs fields (plus signPubKeyCert = certPEM) the way the SDK
// does, written apart from unionPaySignedString on purpose. double=false signs the plain string
// with SHA256withRSA instead, the mistake the double hash must catch.
func signUnionPay(tb testing.TB, key *rsa.PrivateKey, certPEM string, fields map[string]string, double bool) string {
	tb.Helper()
	fields = maps.Clone(fields)
	fields["signPubKeyCert"] = certPEM
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, k+"="+fields[k])
	}
	msg := []byte(strings.Join(parts, "&"))
	if double {
		sum := sha256.Sum256(msg)
		msg = []byte(hex.EncodeToString(sum[:]))
	}
	digest := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		tb.Fatal(err)
	}
	v := url.Values{}
	for k, x := range fields {
		v.Set(k, x)
	}
	v.Set("signature", base64.StdEncoding.EncodeToString(sig))
	return v.Encode()
}

func TestUnionPayVectors(t *testing.T) {
	pki := testUnionPayPKI(t)
	u := testUnionPay(t, pki.config())
	want := map[string]struct {
		kind   payment.Kind
		amount int64
		trade  string
		notify string
	}{
		"paid":        {payment.KindPaid, 8888, "T20240501001", "652405011200050012345:01:00"},
		"paid_a6":     {payment.KindPaid, 100, "T20240501002", "652405011200050012346:01:A6"},
		"refund":      {payment.KindRefund, 1000, "T20240501001", "652405021200050099999:04:00"},
		"cancel":      {payment.KindRefund, 8888, "T20240501001", "652405011300050077777:31:00"},
		"empty_value": {payment.KindPaid, 1, "T20240501003", "652405011200050012347:01:00"},
		"crlf_cert":   {payment.KindPaid, 2500, "T20240501004", "652405011200050012348:01:00"},
	}
	vectors := readUnionPayVectors(t)
	if len(vectors) != len(want) {
		t.Fatalf("%d vectors, want %d", len(vectors), len(want))
	}
	for name, v := range vectors {
		t.Run(name, func(t *testing.T) {
			params, err := parseUnionPayForm([]byte(v.Body))
			if err != nil {
				t.Fatal(err)
			}
			// The first hash, built by sort/paste + openssl dgst in the script.
			if got := unionPayDigestHex(params, true); got != v.Signed {
				t.Fatalf("digest hex = %s, openssl says %s", got, v.Signed)
			}
			ev, err := u.Verify([]byte(v.Body), nil, pki.now)
			if err != nil {
				t.Fatal(err)
			}
			w := want[name]
			if ev.Kind != w.kind || ev.AmountFen != w.amount || ev.TradeNo != w.trade || ev.NotifyID != w.notify {
				t.Fatalf("event %+v, want %+v", ev, w)
			}
			if w.kind == payment.KindRefund && (ev.ChannelTxnID != "652405011200050012345" || ev.RefundID != strings.Split(w.notify, ":")[0] ||
				ev.RefundFen != w.amount || ev.RefundIsTotal) {
				t.Fatalf("refund %q of %q, %d (total=%v): want its own queryId, of the consume", ev.RefundID, ev.ChannelTxnID, ev.RefundFen, ev.RefundIsTotal)
			}
		})
	}
}

func TestUnionPayVerify(t *testing.T) {
	pki := testUnionPayPKI(t)
	vectors := readUnionPayVectors(t)
	now := pki.now
	signPEM := pemOf(pki.sign)
	valid := func(edits ...param) string {
		return signUnionPay(t, pki.signKey, signPEM, unionPayFields(edits...), true)
	}

	// Certificates by hand: another chain, validity windows, names, key types.
	otherRoot := channeltest.IssueCert(t, caTemplate("other root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)), nil, &pki.other.PublicKey, pki.other)
	otherMid := channeltest.IssueCert(t, caTemplate("paygw test UnionPay intermediate", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)), otherRoot, &pki.other.PublicKey, pki.other)
	otherLeaf := channeltest.IssueCert(t, leafTemplate(testSigningCN, now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), otherMid, &pki.signKey.PublicKey, pki.other)
	expired := channeltest.IssueCert(t, leafTemplate(testSigningCN, now.AddDate(-2, 0, 0), now.Add(-time.Second)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	notYet := channeltest.IssueCert(t, leafTemplate(testSigningCN, now.Add(time.Hour), now.AddDate(1, 0, 0)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	wrongName := channeltest.IssueCert(t, leafTemplate("041@Z12@中国银联股份有限公司分公司@00000002", now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	bareName := channeltest.IssueCert(t, leafTemplate(SignerName, now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	testEnv := channeltest.IssueCert(t, leafTemplate("041@Z12@00040000:SIGN@00000062", now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	twoCNs := leafTemplate("", now.AddDate(0, -1, 0), now.AddDate(1, 0, 0))
	twoCNs.Subject.ExtraNames = []pkix.AttributeTypeAndValue{
		{Type: oidCommonName, Value: "041@Z12@某公司@00000002"}, {Type: oidCommonName, Value: testSigningCN},
	}
	twoCNCert := channeltest.IssueCert(t, twoCNs, pki.mid, &pki.signKey.PublicKey, pki.midKey)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecLeaf := channeltest.IssueCert(t, leafTemplate(testSigningCN, now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), pki.mid, &ecKey.PublicKey, pki.midKey)
	sibling := channeltest.IssueCert(t, caTemplate("paygw test UnionPay intermediate 2", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)), pki.root, &pki.other.PublicKey, pki.rootKey)

	byCert := func(c *x509.Certificate) string {
		return signUnionPay(t, pki.signKey, pemOf(c), unionPayFields(), true)
	}
	// UnionPay's PEM may come with CRLF line ends; it is signed as sent.
	crlf := strings.ReplaceAll(signPEM, "\n", "\r\n")
	withSibling := pki.config()
	withSibling.Intermediates = []*x509.Certificate{sibling}
	testEnvConfig := pki.config()
	testEnvConfig.SignerName = "00040000:SIGN"
	origQry := param{"origQryId", "652405011200050012345"}

	tests := map[string]struct {
		config Config // zero = pki.config()
		body   string
		now    time.Time // zero = now
		err    error
		reason string // in the error text
		kind   payment.Kind
	}{
		"valid":                       {body: valid(), kind: payment.KindPaid},
		"valid crlf certificate":      {body: signUnionPay(t, pki.signKey, crlf, unionPayFields(), true), kind: payment.KindPaid},
		"A6 is paid":                  {body: valid(param{"respCode", "A6"}), kind: payment.KindPaid},
		"consume not finished":        {body: valid(param{"respCode", "05"}), kind: payment.KindPending},
		"refund":                      {body: valid(param{"txnType", "04"}, param{"txnSubType", "00"}, origQry), kind: payment.KindRefund},
		"cancel":                      {body: valid(param{"txnType", "31"}, param{"txnSubType", "00"}, origQry), kind: payment.KindRefund},
		"refund without origQryId":    {body: valid(param{"txnType", "04"}, param{"txnSubType", "00"}), err: channels.ErrMalformed, reason: "origQryId"},
		"origQryId too long":          {body: valid(param{"txnType", "04"}, param{"origQryId", strings.Repeat("1", 129)}), err: channels.ErrMalformed, reason: "128"},
		"other txnType":               {body: valid(param{"txnType", "71"}), kind: payment.KindOther},
		"unknown extra field signed":  {body: valid(param{"reqReserved", "x=1"}), kind: payment.KindPaid},
		"empty field signed":          {body: valid(param{"reqReserved", ""}), kind: payment.KindPaid},
		"tampered txnAmt":             {body: strings.Replace(vectors["paid"].Body, "txnAmt=8888", "txnAmt=1", 1), err: channels.ErrBadSignature, reason: "does not match"},
		"tampered orderId":            {body: strings.Replace(vectors["paid"].Body, "orderId=T20240501001", "orderId=T20240501009", 1), err: channels.ErrBadSignature, reason: "does not match"},
		"added empty field":           {body: vectors["paid"].Body + "&reqReserved=", kind: payment.KindPaid}, // signed without empty fields: the demo receivers' convention
		"single hash":                 {body: signUnionPay(t, pki.signKey, signPEM, unionPayFields(), false), err: channels.ErrBadSignature, reason: "does not match"},
		"signed by another key":       {body: signUnionPay(t, pki.other, signPEM, unionPayFields(), true), err: channels.ErrBadSignature, reason: "does not match"},
		"another chain":               {body: byCert(otherLeaf), err: channels.ErrBadSignature, reason: "certificate does not chain"},
		"expired":                     {body: byCert(expired), err: channels.ErrBadSignature, reason: "certificate expired"},
		"not yet valid":               {body: byCert(notYet), err: channels.ErrBadSignature, reason: "certificate not yet valid"},
		"vector after expiry":         {body: vectors["paid"].Body, now: pki.sign.NotAfter.Add(time.Second), err: channels.ErrBadSignature, reason: "certificate expired"},
		"wrong signer name":           {body: byCert(wrongName), err: channels.ErrBadSignature, reason: "signer name"},
		"CN without @ parts":          {body: byCert(bareName), err: channels.ErrBadSignature, reason: "signer name"},
		"two CNs":                     {body: byCert(twoCNCert), err: channels.ErrBadSignature, reason: "signer name"},
		"test environment refused":    {body: byCert(testEnv), err: channels.ErrBadSignature, reason: "signer name"},
		"test environment configured": {config: testEnvConfig, body: byCert(testEnv), kind: payment.KindPaid},
		"production with test name":   {config: testEnvConfig, body: valid(), err: channels.ErrBadSignature, reason: "signer name"},
		"intermediate not configured": {config: withSibling, body: valid(), err: channels.ErrBadSignature, reason: "certificate does not chain"},
		"ECDSA certificate":           {body: byCert(ecLeaf), err: channels.ErrBadSignature, reason: "not RSA"},
		"intermediate as signer":      {body: byCert(pki.mid), err: channels.ErrBadSignature, reason: "signer name"},
		"wrong merId":                 {body: valid(param{"merId", "777290058110049"}), err: channels.ErrNotOurs},
		"duplicate field":             {body: vectors["paid"].Body + "&txnAmt=1", err: channels.ErrMalformed},
		"empty body":                  {body: "", err: channels.ErrMalformed},
		"version 5.0.0":               {body: valid(param{"version", "5.0.0"}), err: channels.ErrUnsupported},
		"signMethod 11":               {body: valid(param{"signMethod", "11"}), err: channels.ErrUnsupported},
		"encoding GBK":                {body: valid(param{"encoding", "GBK"}), err: channels.ErrUnsupported},
		"signature missing":           {body: strings.Split(vectors["paid"].Body, "&signature=")[0], err: channels.ErrBadSignature, reason: "signature missing"},
		"signature not base64":        {body: strings.Split(vectors["paid"].Body, "&signature=")[0] + "&signature=%25%25", err: channels.ErrBadSignature, reason: "not base64"},
		"certificate missing":         {body: signUnionPay(t, pki.signKey, "", unionPayFields(), true), err: channels.ErrBadSignature, reason: "signPubKeyCert missing"},
		"certificate not PEM":         {body: signUnionPay(t, pki.signKey, "MIIB", unionPayFields(), true), err: channels.ErrBadSignature, reason: "not PEM"},
		"two certificates":            {body: signUnionPay(t, pki.signKey, signPEM+pemOf(pki.mid), unionPayFields(), true), err: channels.ErrBadSignature, reason: "data after"},
		"orderId invalid":             {body: valid(param{"orderId", "T 1"}), err: channels.ErrMalformed},
		"queryId missing":             {body: valid(param{"queryId", ""}), err: channels.ErrMalformed},
		"txnAmt negative":             {body: valid(param{"txnAmt", "-1"}), err: channels.ErrMalformed},
		"currency unknown":            {body: valid(param{"currencyCode", "392"}), err: channels.ErrMalformed},
		"txnTime bad":                 {body: valid(param{"txnTime", "2024-05-01"}), err: channels.ErrMalformed},
	}

	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := pki.verify(t, tc.config, []byte(tc.body), tc.now)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("err = %v, want reason %q", err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tc.kind {
				t.Fatalf("kind = %s, want %s", ev.Kind, tc.kind)
			}
			if string(ev.Raw) != tc.body {
				t.Fatal("Raw is not the body")
			}
		})
	}
}

// testSigningCN is a production-shaped signing CN for certificates made in these tests.
const testSigningCN = "041@Z12@" + SignerName + "@00000002"

func TestUnionPayEvent(t *testing.T) {
	origQry := param{"origQryId", "652405011200050012345"}
	body := []byte("raw")
	ev, err := unionPayEvent(unionPayFields(), body)
	if err != nil {
		t.Fatal(err)
	}
	want := payment.Event{
		Channel: "unionpay", NotifyID: "652405011200050012345:01:00", TradeNo: "T20240501001",
		ChannelTxnID: "652405011200050012345", Kind: payment.KindPaid, Status: "txnType=01 respCode=00",
		AmountFen: 8888, Currency: "CNY", PaidAt: time.Date(2024, 5, 1, 4, 0, 5, 0, time.UTC), Raw: body,
	}
	channeltest.AssertEvent(t, ev, want)
	body[0] = 'X'
	if string(ev.Raw) != "raw" {
		t.Fatal("Raw shares the caller's buffer")
	}

	tests := map[string]struct {
		edits    []param
		err      error
		kind     payment.Kind
		amount   int64
		currency string
	}{
		"respCode 00": {kind: payment.KindPaid, amount: 8888, currency: "CNY"},
		"respCode A6": {edits: []param{{"respCode", "A6"}}, kind: payment.KindPaid, amount: 8888, currency: "CNY"},
		"respCode 03": {edits: []param{{"respCode", "03"}}, kind: payment.KindPending, amount: 8888, currency: "CNY"},
		"refund":      {edits: []param{{"txnType", "04"}, {"txnAmt", "100"}, origQry}, kind: payment.KindRefund, amount: 100, currency: "CNY"},
		"cancel":      {edits: []param{{"txnType", "31"}, origQry}, kind: payment.KindRefund, amount: 8888, currency: "CNY"},
		"refund, origQryId at the column's width": {
			edits: []param{{"txnType", "04"}, {"origQryId", strings.Repeat("1", 128)}}, kind: payment.KindRefund, amount: 8888, currency: "CNY",
		},
		"refund, origQryId too long": {edits: []param{{"txnType", "04"}, {"origQryId", strings.Repeat("1", 129)}}, err: channels.ErrMalformed},
		"refund, no origQryId":       {edits: []param{{"txnType", "04"}}, err: channels.ErrMalformed},
		"refund, queryId too long": {
			edits: []param{{"txnType", "04"}, origQry, {"queryId", strings.Repeat("1", 129)}}, err: channels.ErrMalformed,
		},
		"failed refund":     {edits: []param{{"txnType", "04"}, {"respCode", "05"}}, kind: payment.KindOther, amount: 8888, currency: "CNY"},
		"query":             {edits: []param{{"txnType", "00"}}, kind: payment.KindOther, amount: 8888, currency: "CNY"},
		"USD":               {edits: []param{{"currencyCode", "840"}}, kind: payment.KindPaid, amount: 8888, currency: "USD"},
		"EUR":               {edits: []param{{"currencyCode", "978"}}, kind: payment.KindPaid, amount: 8888, currency: "EUR"},
		"HKD":               {edits: []param{{"currencyCode", "344"}}, kind: payment.KindPaid, amount: 8888, currency: "HKD"},
		"leading zeros":     {edits: []param{{"txnAmt", "000000000100"}}, kind: payment.KindPaid, amount: 100, currency: "CNY"},
		"zero":              {edits: []param{{"txnAmt", "0"}}, kind: payment.KindPaid, amount: 0, currency: "CNY"},
		"currency missing":  {edits: []param{{"currencyCode", ""}}, err: channels.ErrMalformed},
		"currency alpha":    {edits: []param{{"currencyCode", "CNY"}}, err: channels.ErrMalformed},
		"amount decimal":    {edits: []param{{"txnAmt", "88.88"}}, err: channels.ErrMalformed},
		"amount 13 digits":  {edits: []param{{"txnAmt", "1000000000000"}}, err: channels.ErrMalformed},
		"amount over max":   {edits: []param{{"txnAmt", "999999999999"}}, err: channels.ErrMalformed},
		"amount missing":    {edits: []param{{"txnAmt", ""}}, err: channels.ErrMalformed},
		"txnType missing":   {edits: []param{{"txnType", ""}}, err: channels.ErrMalformed},
		"respCode missing":  {edits: []param{{"respCode", ""}}, err: channels.ErrMalformed},
		"respCode too long": {edits: []param{{"respCode", "000"}}, err: channels.ErrMalformed},
		// The notify id is queryId:txnType:respCode, six bytes longer, and must fit notify_id too.
		"queryId 122 bytes":  {edits: []param{{"queryId", strings.Repeat("1", 122)}}, kind: payment.KindPaid, amount: 8888, currency: "CNY"},
		"queryId 123 bytes":  {edits: []param{{"queryId", strings.Repeat("1", 123)}}, err: channels.ErrMalformed},
		"queryId too long":   {edits: []param{{"queryId", strings.Repeat("1", 129)}}, err: channels.ErrMalformed},
		"orderId missing":    {edits: []param{{"orderId", ""}}, err: channels.ErrMalformed},
		"txnTime missing":    {edits: []param{{"txnTime", ""}}, err: channels.ErrMalformed},
		"txnTime impossible": {edits: []param{{"txnTime", "20241301120005"}}, err: channels.ErrMalformed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := unionPayEvent(unionPayFields(tc.edits...), nil)
			if err == nil {
				ev, err = channels.CheckEvent(ev)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tc.kind || ev.AmountFen != tc.amount || ev.Currency != tc.currency {
				t.Fatalf("got %s %d %s, want %s %d %s", ev.Kind, ev.AmountFen, ev.Currency, tc.kind, tc.amount, tc.currency)
			}
		})
	}
}

// TestUnionPayNotifyID: UnionPay resends the same notice up to five times; each resend must map to
// the same NotifyID, and a refund of the payment to another.
func TestUnionPayNotifyID(t *testing.T) {
	a, _ := unionPayEvent(unionPayFields(param{"traceTime", "0501120006"}), nil)
	b, _ := unionPayEvent(unionPayFields(param{"traceTime", "0501120507"}), nil)
	r, err := unionPayEvent(unionPayFields(param{"txnType", "04"}, param{"queryId", "652405021200050099999"},
		param{"origQryId", "652405011200050012345"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.NotifyID == "" || a.NotifyID != b.NotifyID || r.NotifyID == "" || a.NotifyID == r.NotifyID {
		t.Fatalf("NotifyIDs %q %q %q", a.NotifyID, b.NotifyID, r.NotifyID)
	}
}

// TestUnionPayRefund: a refund (04) or void (31) is keyed by its own queryId and names the
// consume it undoes by origQryId; txnAmt is this refund's amount alone.
func TestUnionPayRefund(t *testing.T) {
	for _, txnType := range []string{"04", "31"} {
		ev, err := unionPayEvent(unionPayFields(param{"txnType", txnType}, param{"txnAmt", "300"}, param{"orderId", "RF20240502001"},
			param{"queryId", "652405021200050099999"}, param{"origQryId", "652405011200050012345"}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ev, err = channels.CheckEvent(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != payment.KindRefund || ev.RefundID != "652405021200050099999" || ev.ChannelTxnID != "652405011200050012345" ||
			ev.RefundFen != 300 || ev.AmountFen != 300 || ev.RefundIsTotal || ev.TradeNo != "RF20240502001" {
			t.Errorf("txnType %s: %s %q of %q, %d (total=%v), trade_no %q", txnType, ev.Kind, ev.RefundID, ev.ChannelTxnID, ev.RefundFen, ev.RefundIsTotal, ev.TradeNo)
		}
	}
	// One that did not go through moved no money: no refund, whatever it names.
	ev, err := unionPayEvent(unionPayFields(param{"txnType", "04"}, param{"respCode", "03"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != payment.KindOther || ev.RefundID != "" || ev.RefundFen != 0 {
		t.Errorf("failed refund: %s %q %d", ev.Kind, ev.RefundID, ev.RefundFen)
	}
}

func TestNewUnionPay(t *testing.T) {
	pki := testUnionPayPKI(t)
	now := pki.now
	leafAsCA := channeltest.IssueCert(t, leafTemplate("leaf", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0)), pki.root, &pki.other.PublicKey, pki.rootKey)
	foreignMid := channeltest.IssueCert(t, caTemplate("foreign intermediate", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0)), nil, &pki.other.PublicKey, pki.other)

	tests := map[string]struct {
		edit func(*Config)
		key  string // "" = no error
	}{
		"valid":                      {edit: func(*Config) {}},
		"mer_id missing":             {edit: func(c *Config) { c.MerID = "" }, key: "channels.unionpay.mer_id"},
		"no root":                    {edit: func(c *Config) { c.Roots = nil }, key: "channels.unionpay.root_cert_file"},
		"nil root":                   {edit: func(c *Config) { c.Roots = []*x509.Certificate{nil} }, key: "channels.unionpay.root_cert_file"},
		"root not a CA":              {edit: func(c *Config) { c.Roots = []*x509.Certificate{pki.sign} }, key: "channels.unionpay.root_cert_file"},
		"no intermediate":            {edit: func(c *Config) { c.Intermediates = nil }, key: "channels.unionpay.intermediate_cert_file"},
		"intermediate not a CA":      {edit: func(c *Config) { c.Intermediates = []*x509.Certificate{leafAsCA} }, key: "channels.unionpay.intermediate_cert_file"},
		"intermediate of other root": {edit: func(c *Config) { c.Intermediates = []*x509.Certificate{foreignMid} }, key: "channels.unionpay.intermediate_cert_file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := pki.config()
			tc.edit(&c)
			u, err := New(c)
			if tc.key == "" {
				if err != nil || u.signerName != SignerName {
					t.Fatalf("NewUnionPay: %v (signer %q)", err, u.signerName)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
				t.Fatalf("err = %v, want one naming %s", err, tc.key)
			}
		})
	}
}

func TestUnionPayReply(t *testing.T) {
	u := testUnionPay(t, testUnionPayPKI(t).config())
	if u.Name() != "unionpay" {
		t.Fatalf("Name() = %q", u.Name())
	}
	tests := map[string]struct {
		reply  payment.Reply
		status int
		body   string
	}{
		"success": {payment.ReplySuccess, 200, "ok"},
		"refuse":  {payment.ReplyRefuse, 400, "fail"},
		"retry":   {payment.ReplyRetry, 500, "fail"},
		"unknown": {payment.Reply(99), 500, "fail"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := u.Reply(tc.reply)
			if r.Status != tc.status || string(r.Body) != tc.body || r.ContentType != "text/plain; charset=utf-8" {
				t.Fatalf("Reply = %d %q %q, want %d %q", r.Status, r.ContentType, r.Body, tc.status, tc.body)
			}
		})
	}
}

func TestParseCertificates(t *testing.T) {
	root, mid := channeltest.ReadTestFile(t, "unionpay_root.pem"), channeltest.ReadTestFile(t, "unionpay_intermediate.pem")
	tests := map[string]struct {
		data string
		n    int // 0 = error
	}{
		"one":           {root, 1},
		"two, CRLF":     {strings.ReplaceAll(root+mid, "\n", "\r\n"), 2},
		"empty":         {"", 0},
		"garbage after": {root + "junk", 0},
		"key, not cert": {channeltest.ReadTestFile(t, "unionpay_sign_key.pem"), 0},
		"bad DER":       {"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			certs, err := channels.ParseCertificates([]byte(tc.data))
			if tc.n == 0 {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil || len(certs) != tc.n {
				t.Fatalf("%d certs, %v; want %d", len(certs), err, tc.n)
			}
		})
	}
}

// param is one form parameter; a slice of them keeps the body order chosen by the test.
type param struct{ k, v string }
