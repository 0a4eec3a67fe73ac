package unionpay

import (
	"bytes"
	"crypto"
	_ "crypto/md5" // #nosec G501 -- builds the MD5-signed certificates the verifier must refuse
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
)

// Signature algorithm identifiers of PKCS #1 (RFC 8017 A.2.4) and RFC 4055.
var (
	oidMD5WithRSA    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 4}
	oidSHA1WithRSA   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}
	oidSHA256WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	oidSHA224WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 14} // unknown to crypto/x509
)

// wantRefused fails unless err is channels.ErrBadSignature with reason in its text.
func wantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, channels.ErrBadSignature) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("err = %v, want %v with %q", err, channels.ErrBadSignature, reason)
	}
}

// wantOutcome fails t unless err is nil when reason is "" (accepted), or refuses with reason.
func wantOutcome(t *testing.T, err error, reason string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	wantRefused(t, err, reason)
}

// resigned is c (signed SHA256-RSA by parentKey) signed again under another algorithm, which
// crypto/x509 will not create: the algorithm identifier is replaced inside the TBSCertificate, so
// the new signature covers it as a real issuer's would, and outside it; the new TBSCertificate is
// then signed with hash by parentKey. The certificate is genuinely issued, so only the algorithm
// can make a verifier refuse it.
func resigned(tb testing.TB, c *x509.Certificate, parentKey *rsa.PrivateKey, oid asn1.ObjectIdentifier, hash crypto.Hash) *x509.Certificate {
	tb.Helper()
	from, err := asn1.Marshal(oidSHA256WithRSA)
	if err != nil {
		tb.Fatal(err)
	}
	to, err := asn1.Marshal(oid)
	if err != nil {
		tb.Fatal(err)
	}
	if c.SignatureAlgorithm != x509.SHA256WithRSA || len(from) != len(to) || bytes.Count(c.RawTBSCertificate, from) != 1 {
		tb.Fatal("resigned: want a SHA256-RSA certificate and an identifier of the same length")
	}
	tbs := bytes.Replace(c.RawTBSCertificate, from, to, 1)
	h := hash.New()
	h.Write(tbs)
	sig, err := rsa.SignPKCS1v15(rand.Reader, parentKey, hash, h.Sum(nil))
	if err != nil {
		tb.Fatal(err)
	}
	der, err := asn1.Marshal(struct {
		TBS       asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}{
		TBS:       asn1.RawValue{FullBytes: tbs},
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oid, Parameters: asn1.NullRawValue},
		Signature: asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	out, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestUnionPayChainAlgorithms: a signing certificate signed SHA1-RSA or SHA256-RSA by the
// intermediate is accepted; one signed, just as genuinely, with MD5, with SHA-224 (an algorithm
// crypto/x509 does not know), with SHA-512 or with RSA-PSS is refused.
func TestUnionPayChainAlgorithms(t *testing.T) {
	pki := testUnionPayPKI(t)
	now := pki.now
	u := testUnionPay(t, pki.config())
	leaf := func() *x509.Certificate {
		return channeltest.IssueCert(t, leafTemplate(testSigningCN, now.AddDate(0, -1, 0), now.AddDate(1, 0, 0)), pki.mid, &pki.signKey.PublicKey, pki.midKey)
	}
	withAlg := func(alg x509.SignatureAlgorithm) *x509.Certificate {
		tmpl := leafTemplate(testSigningCN, now.AddDate(0, -1, 0), now.AddDate(1, 0, 0))
		tmpl.SignatureAlgorithm = alg
		return channeltest.IssueCert(t, tmpl, pki.mid, &pki.signKey.PublicKey, pki.midKey)
	}

	tests := map[string]struct {
		cert   *x509.Certificate
		want   x509.SignatureAlgorithm // what crypto/x509 reads, to be sure of what is tested
		reason string                  // "" = accepted
	}{
		"SHA256-RSA":     {cert: leaf(), want: x509.SHA256WithRSA},
		"SHA1-RSA":       {cert: resigned(t, leaf(), pki.midKey, oidSHA1WithRSA, crypto.SHA1), want: x509.SHA1WithRSA},
		"MD5-RSA":        {cert: resigned(t, leaf(), pki.midKey, oidMD5WithRSA, crypto.MD5), want: x509.MD5WithRSA, reason: "neither SHA1-RSA nor SHA256-RSA"},
		"SHA224-RSA":     {cert: resigned(t, leaf(), pki.midKey, oidSHA224WithRSA, crypto.SHA224), want: x509.UnknownSignatureAlgorithm, reason: "neither SHA1-RSA nor SHA256-RSA"},
		"SHA512-RSA":     {cert: withAlg(x509.SHA512WithRSA), want: x509.SHA512WithRSA, reason: "neither SHA1-RSA nor SHA256-RSA"},
		"SHA256-RSA-PSS": {cert: withAlg(x509.SHA256WithRSAPSS), want: x509.SHA256WithRSAPSS, reason: "neither SHA1-RSA nor SHA256-RSA"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.cert.SignatureAlgorithm != tc.want {
				t.Fatalf("built a %v certificate, want %v", tc.cert.SignatureAlgorithm, tc.want)
			}
			if reason := u.chain.verify(tc.cert, now); reason != tc.reason && (tc.reason == "" || !strings.Contains(reason, tc.reason)) {
				t.Fatalf("chain: %q, want %q", reason, tc.reason)
			}
			// And through Verify, on a message signed by the certificate's key.
			_, err := u.Verify([]byte(signUnionPay(t, pki.signKey, pemOf(tc.cert), unionPayFields(), true)), http.Header{}, now)
			wantOutcome(t, err, tc.reason)
		})
	}
}

// TestUnionPayChainIntermediateAlgorithms: at start, the intermediate is checked against the
// roots by the same code: SHA1-RSA and SHA256-RSA pass, MD5 and an unknown algorithm do not.
func TestUnionPayChainIntermediateAlgorithms(t *testing.T) {
	pki := testUnionPayPKI(t)
	now := pki.now
	mid := func() *x509.Certificate { // the test intermediate again: same name, same key
		tmpl := caTemplate("", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
		tmpl.RawSubject = pki.mid.RawSubject
		return channeltest.IssueCert(t, tmpl, pki.root, &pki.midKey.PublicKey, pki.rootKey)
	}
	tests := map[string]struct {
		mid     *x509.Certificate
		wantErr string // "" = starts
	}{
		"SHA256-RSA": {mid: mid()},
		"SHA1-RSA":   {mid: resigned(t, mid(), pki.rootKey, oidSHA1WithRSA, crypto.SHA1)},
		"MD5-RSA":    {mid: resigned(t, mid(), pki.rootKey, oidMD5WithRSA, crypto.MD5), wantErr: "channels.unionpay.intermediate_cert_file: signature algorithm is neither SHA1-RSA nor SHA256-RSA"},
		"SHA224-RSA": {mid: resigned(t, mid(), pki.rootKey, oidSHA224WithRSA, crypto.SHA224), wantErr: "channels.unionpay.intermediate_cert_file: signature algorithm is neither SHA1-RSA nor SHA256-RSA"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := pki.config()
			c.Intermediates = []*x509.Certificate{tc.mid}
			u, err := New(c)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The original signing certificate chains through the re-made intermediate.
			if reason := u.chain.verify(pki.sign, now); reason != "" {
				t.Fatal(reason)
			}
		})
	}
}

// TestUnionPayChainRules: name chaining, key usage, CA flags, critical extensions and the
// validity of every certificate in the chain.
func TestUnionPayChainRules(t *testing.T) {
	pki := testUnionPayPKI(t)
	now := pki.now
	year := func(n int) time.Time { return now.AddDate(n, 0, 0) }
	leafOf := func(tmpl, parent *x509.Certificate, parentKey *rsa.PrivateKey) *x509.Certificate {
		return channeltest.IssueCert(t, tmpl, parent, &pki.signKey.PublicKey, parentKey)
	}
	withUsage := func(ku x509.KeyUsage) *x509.Certificate {
		tmpl := leafTemplate(testSigningCN, year(-1), year(1))
		tmpl.KeyUsage = ku
		return leafOf(tmpl, pki.mid, pki.midKey)
	}
	// Signed by the intermediate's key under another issuer name.
	renamed := *pki.mid
	renamed.Subject = pkix.Name{CommonName: "paygw test UnionPay intermediate"} // no C, no O
	renamed.RawSubject = nil
	otherIssuerName := leafOf(leafTemplate(testSigningCN, year(-1), year(1)), &renamed, pki.midKey)
	if bytes.Equal(otherIssuerName.RawIssuer, pki.mid.RawSubject) {
		t.Fatal("the renamed issuer has the intermediate's name")
	}
	critical := leafTemplate(testSigningCN, year(-1), year(1))
	critical.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Critical: true, Value: []byte{5, 0}}}
	// A chain whose intermediate, or root, runs out in an hour; the signing certificate does not.
	shortMid := channeltest.IssueCert(t, caTemplate("short intermediate", year(-1), now.Add(time.Hour)), pki.root, &pki.midKey.PublicKey, pki.rootKey)
	shortRoot := channeltest.IssueCert(t, caTemplate("short root", year(-1), now.Add(time.Hour)), nil, &pki.rootKey.PublicKey, pki.rootKey)
	midOfShortRoot := channeltest.IssueCert(t, caTemplate("intermediate of the short root", year(-1), year(5)), shortRoot, &pki.midKey.PublicKey, pki.rootKey)
	config := func(root, mid *x509.Certificate) Config {
		c := pki.config()
		c.Roots, c.Intermediates = []*x509.Certificate{root}, []*x509.Certificate{mid}
		return c
	}
	// The intermediate itself, not yet valid: issued in the future.
	lateMid := channeltest.IssueCert(t, caTemplate("late intermediate", now.Add(time.Hour), year(5)), pki.root, &pki.midKey.PublicKey, pki.rootKey)

	tests := map[string]struct {
		config Config // zero = pki.config()
		cert   *x509.Certificate
		at     time.Time // zero = now
		reason string    // "" = accepted
	}{
		"digitalSignature":                    {cert: withUsage(x509.KeyUsageDigitalSignature)},
		"nonRepudiation only":                 {cert: withUsage(x509.KeyUsageContentCommitment)},
		"UnionPay's four usages":              {cert: withUsage(x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement)},
		"no key usage extension":              {cert: withUsage(0)},
		"keyEncipherment only":                {cert: withUsage(x509.KeyUsageKeyEncipherment), reason: "key usage does not allow signatures"},
		"issuer name differs":                 {cert: otherIssuerName, reason: "certificate does not chain"},
		"unknown critical extension":          {cert: leafOf(critical, pki.mid, pki.midKey), reason: "critical extension"},
		"intermediate valid":                  {config: config(pki.root, shortMid), cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), shortMid, pki.midKey)},
		"intermediate expired":                {config: config(pki.root, shortMid), cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), shortMid, pki.midKey), at: now.Add(2 * time.Hour), reason: "certificate chain not valid now"},
		"intermediate not yet valid":          {config: config(pki.root, lateMid), cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), lateMid, pki.midKey), reason: "certificate chain not valid now"},
		"root valid":                          {config: config(shortRoot, midOfShortRoot), cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), midOfShortRoot, pki.midKey)},
		"root expired":                        {config: config(shortRoot, midOfShortRoot), cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), midOfShortRoot, pki.midKey), at: now.Add(2 * time.Hour), reason: "certificate chain not valid now"},
		"signed by the root, no intermediate": {cert: leafOf(leafTemplate(testSigningCN, year(-1), year(1)), pki.root, pki.rootKey), reason: "certificate does not chain"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := pki.verify(t, tc.config, []byte(signUnionPay(t, pki.signKey, pemOf(tc.cert), unionPayFields(), true)), tc.at)
			wantOutcome(t, err, tc.reason)
		})
	}
}

// TestNewUnionPayAnchors: what a root or intermediate must be to be configured.
func TestNewUnionPayAnchors(t *testing.T) {
	pki := testUnionPayPKI(t)
	now := pki.now
	noCertSign := caTemplate("paygw test UnionPay intermediate", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	noCertSign.KeyUsage = x509.KeyUsageCRLSign
	pathZero := caTemplate("root of no intermediate", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	pathZero.MaxPathLen, pathZero.MaxPathLenZero = 0, true
	zeroRoot := channeltest.IssueCert(t, pathZero, nil, &pki.rootKey.PublicKey, pki.rootKey)
	critical := caTemplate("paygw test UnionPay intermediate", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	impostor := *pki.root // the root's name on another key
	impostor.PublicKey = &pki.other.PublicKey
	critical.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 2}, Critical: true, Value: []byte{5, 0}}}

	tests := map[string]struct {
		roots, mids []*x509.Certificate
		wantErr     string
	}{
		"intermediate without keyCertSign": {
			roots:   []*x509.Certificate{pki.root},
			mids:    []*x509.Certificate{channeltest.IssueCert(t, noCertSign, pki.root, &pki.midKey.PublicKey, pki.rootKey)},
			wantErr: "channels.unionpay.intermediate_cert_file: key usage does not allow certificate signing",
		},
		"intermediate with an unknown critical extension": {
			roots:   []*x509.Certificate{pki.root},
			mids:    []*x509.Certificate{channeltest.IssueCert(t, critical, pki.root, &pki.midKey.PublicKey, pki.rootKey)},
			wantErr: "channels.unionpay.intermediate_cert_file: has a critical extension paygw does not handle",
		},
		"root of path length 0": {
			roots:   []*x509.Certificate{zeroRoot},
			mids:    []*x509.Certificate{channeltest.IssueCert(t, caTemplate("m", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)), zeroRoot, &pki.midKey.PublicKey, pki.rootKey)},
			wantErr: "channels.unionpay.root_cert_file: path length 0 allows no intermediate",
		},
		"intermediate named by the root, signed by another key": {
			roots:   []*x509.Certificate{pki.root},
			mids:    []*x509.Certificate{channeltest.IssueCert(t, caTemplate("m", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)), &impostor, &pki.midKey.PublicKey, pki.other)},
			wantErr: "channels.unionpay.intermediate_cert_file: not issued by a certificate in channels.unionpay.root_cert_file",
		},
		"two roots, the second issued it": {
			roots: []*x509.Certificate{unrelatedRoot(t, pki), pki.root},
			mids:  []*x509.Certificate{pki.mid},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := pki.config()
			c.Roots, c.Intermediates = tc.roots, tc.mids
			_, err := New(c)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// unrelatedRoot is a root of another key, which issued none of the test chain.
func unrelatedRoot(tb testing.TB, pki unionPayPKI) *x509.Certificate {
	tb.Helper()
	return channeltest.IssueCert(tb, caTemplate("other root", pki.now.AddDate(-1, 0, 0), pki.now.AddDate(5, 0, 0)), nil, &pki.other.PublicKey, pki.other)
}

// TestUnionPayChainDescription: Chain lists the configured roots, then the intermediates.
func TestUnionPayChainDescription(t *testing.T) {
	pki := testUnionPayPKI(t)
	got := testUnionPay(t, pki.config()).Chain()
	want := []Certificate{
		{Role: "root", CommonName: pki.root.Subject.CommonName, SignatureAlgorithm: "SHA256-RSA", NotAfter: pki.root.NotAfter},
		{Role: "intermediate", CommonName: pki.mid.Subject.CommonName, SignatureAlgorithm: "SHA256-RSA", NotAfter: pki.mid.NotAfter},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Chain() = %v, want %v", got, want)
	}
	if got[0].CommonName != "paygw test UnionPay root" || got[1].CommonName != "paygw test UnionPay intermediate" {
		t.Fatalf("Chain() = %v", got)
	}
}
