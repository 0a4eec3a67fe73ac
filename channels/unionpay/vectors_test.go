package unionpay

import (
	"crypto/x509"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/bills"
)

// Messages captured from UnionPay's test environment, verified with UnionPay's real test root and
// middle certificates, each at its own capture time. Files and sources: testdata/vectors/README.md.

const unionPayTestSignerName = "00040000:SIGN" // UnionPay's test certificates up to 2017-2020

// unionPayCapture is one file of testdata/vectors.
type unionPayCapture struct {
	name   string       // the file, without .form
	signer string       // the third '@' part of its certificate's CN, as the README lists it
	kind   payment.Kind // for a notification, what Verify maps it to; "" for a response to a request of ours
}

var unionPayCaptures = []unionPayCapture{
	{"01_yansongda_test_2022_front_return_consume", SignerName, payment.KindPaid}, // front notification: a back one's fields
	{"02_yansongda_test_2022_query_response", SignerName, ""},
	{"03_yansongda_test_2024_query_response", SignerName, ""},
	{"04_yansongda_test_2024_cancel_response", SignerName, ""},
	{"05_yansongda_test_2024_refund_response", SignerName, ""},
	{"06_lokielse_test_2017_wtz_front_open_notify", unionPayTestSignerName, ""}, // token opening: no payment fields
	{"07_csharp_demo_test_2017_back_notify_consume", unionPayTestSignerName, payment.KindPaid},
	{"08_csharp_demo_test_2017_back_notify_consume_reqReserved", unionPayTestSignerName, payment.KindPaid},
	{"09_whilegit_test_2017_app_consume_tn_response", unionPayTestSignerName, ""},
	{"10_zhangv_test_2018_query_response", unionPayTestSignerName, ""},
	{"11_zhangv_test_2018_query_nonexistent_response", unionPayTestSignerName, ""},
	{"12_zhangv_test_2018_direct_sms_response", unionPayTestSignerName, ""},
}

const (
	unionPayTestRootFile   = "vectors/acp_test_root.cer.pem"
	unionPayTestMiddleFile = "vectors/acp_test_middle.cer.pem"
)

// unionPayTestAnchors are UnionPay's real test root ("CFCA TEST CS CA") and middle ("CFCA TEST OCA1").
func unionPayTestAnchors(tb testing.TB) (roots, mids []*x509.Certificate) {
	tb.Helper()
	var err error
	if roots, err = channels.ParseCertificates([]byte(channeltest.ReadTestFile(tb, unionPayTestRootFile))); err != nil {
		tb.Fatal(err)
	}
	if mids, err = channels.ParseCertificates([]byte(channeltest.ReadTestFile(tb, unionPayTestMiddleFile))); err != nil {
		tb.Fatal(err)
	}
	return roots, mids
}

// loadedCapture is a capture read: its body, its fields, its certificate and its capture time.
type loadedCapture struct {
	unionPayCapture
	body   []byte
	params map[string]string
	cert   *x509.Certificate
	at     time.Time // txnTime, which ACP writes in Beijing time
}

func loadUnionPayCapture(tb testing.TB, c unionPayCapture) loadedCapture {
	tb.Helper()
	l := loadedCapture{unionPayCapture: c, body: []byte(channeltest.ReadTestFile(tb, "vectors/"+c.name+".form"))}
	var err error
	if l.params, err = parseUnionPayForm(l.body); err != nil {
		tb.Fatal(err)
	}
	var reason string
	if l.cert, reason = parseUnionPayCert(l.params["signPubKeyCert"]); reason != "" {
		tb.Fatal(reason)
	}
	if l.at, err = time.ParseInLocation(unionPayTimeLayout, l.params["txnTime"], bills.ChinaTime); err != nil {
		tb.Fatalf("txnTime: %v", err)
	}
	return l
}

// unionPayCaptureNamed is the capture whose name starts with prefix ("07").
func unionPayCaptureNamed(tb testing.TB, prefix string) loadedCapture {
	tb.Helper()
	for _, c := range unionPayCaptures {
		if strings.HasPrefix(c.name, prefix+"_") {
			return loadUnionPayCapture(tb, c)
		}
	}
	tb.Fatalf("no capture %s", prefix)
	return loadedCapture{}
}

// verifierFor trusts UnionPay's real test anchors and signerName, with the capture's own merId.
func (l loadedCapture) verifierFor(tb testing.TB, signerName string) *Channel {
	tb.Helper()
	roots, mids := unionPayTestAnchors(tb)
	return testUnionPay(tb, Config{MerID: l.params["merId"], Roots: roots, Intermediates: mids, SignerName: signerName})
}

func (l loadedCapture) clone() map[string]string {
	p := make(map[string]string, len(l.params))
	for k, v := range l.params {
		p[k] = v
	}
	return p
}

// TestUnionPayCaptures: every capture verifies at its capture time with UnionPay's real SHA-1
// test chain; the notifications map through the full Verify.
func TestUnionPayCaptures(t *testing.T) {
	for _, c := range unionPayCaptures {
		t.Run(c.name, func(t *testing.T) {
			l := loadUnionPayCapture(t, c)
			if l.cert.SignatureAlgorithm != x509.SHA1WithRSA {
				t.Fatalf("certificate signed %v; these captures are all SHA1-RSA", l.cert.SignatureAlgorithm)
			}
			u := l.verifierFor(t, c.signer)
			if err := u.checkSignature(l.params, l.at); err != nil {
				t.Fatalf("at %s: %v", l.at, err)
			}
			if c.kind == "" {
				return
			}
			ev, err := u.Verify(l.body, nil, l.at)
			if err != nil {
				t.Fatalf("Verify at %s: %v", l.at, err)
			}
			amount, err := strconv.ParseInt(l.params["txnAmt"], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != c.kind || ev.TradeNo != l.params["orderId"] || ev.ChannelTxnID != l.params["queryId"] ||
				ev.AmountFen != amount || ev.Currency != "CNY" || !ev.PaidAt.Equal(l.at) || string(ev.Raw) != string(l.body) {
				t.Fatalf("event %+v does not match the capture", ev)
			}
		})
	}
}

// TestUnionPayCapturesSignerName: the CN rule holds on the real certificates; the test
// environment's name and the production one are not interchangeable.
func TestUnionPayCapturesSignerName(t *testing.T) {
	for _, c := range unionPayCaptures {
		t.Run(c.name, func(t *testing.T) {
			l := loadUnionPayCapture(t, c)
			other := SignerName
			if c.signer == SignerName {
				other = unionPayTestSignerName
			}
			wantRefused(t, l.verifierFor(t, other).checkSignature(l.params, l.at), "signer name")
		})
	}
}

// TestUnionPayCapturesTampered: changing any one signed value of a capture breaks it.
func TestUnionPayCapturesTampered(t *testing.T) {
	for _, c := range unionPayCaptures {
		t.Run(c.name, func(t *testing.T) {
			l := loadUnionPayCapture(t, c)
			u := l.verifierFor(t, c.signer)
			for k := range l.params {
				if k == "signature" {
					continue
				}
				p := l.clone()
				if k == "signPubKeyCert" {
					p[k] += "\r\n" // still the same certificate to a PEM parser, not to the signature
				} else {
					p[k] += "0"
				}
				err := u.checkSignature(p, l.at)
				if !errors.Is(err, channels.ErrBadSignature) || !strings.Contains(err.Error(), "signature does not match") {
					t.Fatalf("%s changed: err = %v, want a signature mismatch", k, err)
				}
			}
		})
	}
	// The same through Verify, on the body as it arrives.
	l := unionPayCaptureNamed(t, "07")
	body := strings.Replace(string(l.body), "txnAmt=1&", "txnAmt=2&", 1)
	if body == string(l.body) {
		t.Fatal("capture 07 has no txnAmt=1")
	}
	_, err := l.verifierFor(t, l.signer).Verify([]byte(body), nil, l.at)
	wantRefused(t, err, "signature does not match")
}

// TestUnionPayCapturesCRLF: UnionPay signs signPubKeyCert with its CRLF line breaks; the same
// certificate with LF only still parses and chains, but is no longer what was signed.
func TestUnionPayCapturesCRLF(t *testing.T) {
	for _, c := range unionPayCaptures {
		t.Run(c.name, func(t *testing.T) {
			l := loadUnionPayCapture(t, c)
			certPEM := l.params["signPubKeyCert"]
			if !strings.Contains(certPEM, "\r\n") {
				t.Fatal("signPubKeyCert has no CRLF; every capture here was sent with it")
			}
			p := l.clone()
			p["signPubKeyCert"] = strings.ReplaceAll(certPEM, "\r\n", "\n")
			wantRefused(t, l.verifierFor(t, c.signer).checkSignature(p, l.at), "signature does not match")
		})
	}
}

// TestUnionPayCapturesValidity: a capture is refused outside its certificate's validity period,
// however good its signature.
func TestUnionPayCapturesValidity(t *testing.T) {
	for _, c := range unionPayCaptures {
		t.Run(c.name, func(t *testing.T) {
			l := loadUnionPayCapture(t, c)
			u := l.verifierFor(t, c.signer)
			wantRefused(t, u.checkSignature(l.params, l.cert.NotAfter.Add(time.Second)), "certificate expired")
			wantRefused(t, u.checkSignature(l.params, l.cert.NotBefore.Add(-time.Second)), "certificate not yet valid")
			if err := u.checkSignature(l.params, l.cert.NotAfter); err != nil {
				t.Fatalf("at the last second of the certificate: %v", err)
			}
			if c.kind != "" {
				_, err := u.Verify(l.body, nil, time.Now())
				wantRefused(t, err, "certificate expired")
			}
		})
	}
}

// TestUnionPayRealTestConfig: a configuration naming UnionPay's real test root and middle files
// starts, describes its SHA-1 chain, and verifies a capture signed under the production name.
func TestUnionPayRealTestConfig(t *testing.T) {
	l := unionPayCaptureNamed(t, "01")
	u, err := FromConfig(config.UnionPay{
		Enabled:              true,
		MerID:                l.params["merId"],
		RootCertFile:         filepath.Join("testdata", unionPayTestRootFile),
		IntermediateCertFile: filepath.Join("testdata", unionPayTestMiddleFile),
	})
	if err != nil {
		t.Fatal(err)
	}
	// As openssl prints them.
	want := []Certificate{
		{Role: "root", CommonName: "CFCA TEST CS CA", SignatureAlgorithm: "SHA1-RSA", NotAfter: time.Date(2032, 8, 29, 5, 1, 29, 0, time.UTC)},
		{Role: "intermediate", CommonName: "CFCA TEST OCA1", SignatureAlgorithm: "SHA1-RSA", NotAfter: time.Date(2031, 5, 11, 3, 14, 33, 0, time.UTC)},
	}
	got := u.Chain()
	if len(got) != len(want) {
		t.Fatalf("Chain() = %v", got)
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].CommonName != want[i].CommonName ||
			got[i].SignatureAlgorithm != want[i].SignatureAlgorithm || !got[i].NotAfter.Equal(want[i].NotAfter) {
			t.Errorf("Chain()[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if s := got[0].String(); s != `root "CFCA TEST CS CA" SHA1-RSA, valid until 2032-08-29T05:01:29Z` {
		t.Errorf("String() = %s", s)
	}
	if _, err := u.Verify(l.body, nil, l.at); err != nil {
		t.Fatalf("capture %s: %v", l.name, err)
	}

	// The test environment's own name, as the README's configuration sets it.
	roots, mids := unionPayTestAnchors(t)
	l = unionPayCaptureNamed(t, "07")
	u = testUnionPay(t, Config{MerID: l.params["merId"], Roots: roots, Intermediates: mids, SignerName: unionPayTestSignerName})
	if _, err := u.Verify(l.body, nil, l.at); err != nil {
		t.Fatalf("capture %s: %v", l.name, err)
	}
}
