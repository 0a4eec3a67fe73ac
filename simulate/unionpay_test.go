package simulate_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

const merID = "777290058110048"

func newSandbox(tb testing.TB, now time.Time) *simulate.UnionPaySandbox {
	tb.Helper()
	sb, err := simulate.NewUnionPaySandbox(now)
	if err != nil {
		tb.Fatal(err)
	}
	return sb
}

func parsePEMCert(tb testing.TB, data []byte) *x509.Certificate {
	tb.Helper()
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) != 0 {
		tb.Fatalf("not one PEM certificate: %q", data)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// verifier trusts sb the way a gateway configured from its PEM files would.
func verifier(tb testing.TB, sb *simulate.UnionPaySandbox) *unionpay.Channel {
	tb.Helper()
	u, err := unionpay.New(unionpay.Config{
		MerID:         merID,
		Roots:         []*x509.Certificate{parsePEMCert(tb, sb.RootPEM())},
		Intermediates: []*x509.Certificate{parsePEMCert(tb, sb.IntermediatePEM())},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// TestUnionPaySignerAgainstVerifier: the simulator's signer and the gateway's verifier are written
// apart; each status must come out as the event the gateway expects.
func TestUnionPaySignerAgainstVerifier(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 5, 0, time.UTC)
	sb := newSandbox(t, now)
	u := verifier(t, sb)
	signer := sb.Signer(merID)
	if signer.Channel() != "unionpay" {
		t.Fatalf("Channel() = %q", signer.Channel())
	}

	tests := map[string]struct {
		p      simulate.Payment
		kind   payment.Kind
		amount int64
	}{
		"paid":    {simulate.Payment{TradeNo: "T1", AmountFen: 8888, Time: now}, payment.KindPaid, 8888},
		"pending": {simulate.Payment{TradeNo: "T1", AmountFen: 8888, Time: now, Status: simulate.StatusPending}, payment.KindPending, 8888},
		"refund":  {simulate.Payment{TradeNo: "T1", AmountFen: 8888, Time: now, Status: simulate.StatusRefund, RefundFen: 100}, payment.KindRefund, 100},
		"closed":  {simulate.Payment{TradeNo: "T1", AmountFen: 8888, Time: now, Status: simulate.StatusClosed}, payment.KindRefund, 8888}, // a void (31): money back,
		"USD":     {simulate.Payment{TradeNo: "T-2_x", AmountFen: 1, Time: now, Currency: "USD"}, payment.KindPaid, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			msg, err := signer.Sign(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if ct := msg.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
				t.Fatalf("Content-Type %q", ct)
			}
			ev, err := u.Verify(msg.Body, msg.Header, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tc.kind || ev.AmountFen != tc.amount || ev.TradeNo != tc.p.TradeNo || !ev.PaidAt.Equal(now) {
				t.Fatalf("event %+v", ev)
			}
			form, _ := url.ParseQuery(string(msg.Body))
			if q := form.Get("queryId"); len(q) != 21 || strings.Trim(q, "0123456789") != "" {
				t.Fatalf("queryId %q is not 21 digits", q)
			}
			again, err := signer.Sign(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			ev2, err := u.Verify(again.Body, again.Header, now.Add(time.Minute))
			if err != nil || ev2.NotifyID != ev.NotifyID || ev2.ChannelTxnID != ev.ChannelTxnID {
				t.Fatalf("a repeat maps to another notice: %v %q vs %q", err, ev2.NotifyID, ev.NotifyID)
			}
		})
	}

	t.Run("a refund is keyed by its own queryId and names the consume", func(t *testing.T) {
		paid, err := signer.Sign(simulate.Payment{TradeNo: "T1", AmountFen: 8888, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		consume, err := u.Verify(paid.Body, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, given := range []string{"", "765432109876543210987"} {
			msg, err := signer.Sign(simulate.Payment{TradeNo: "R1", AmountFen: 8888, Time: now, TxnID: consume.ChannelTxnID,
				Status: simulate.StatusRefund, RefundFen: 100, RefundID: given})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := u.Verify(msg.Body, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			form, _ := url.ParseQuery(string(msg.Body))
			if ev.Kind != payment.KindRefund || ev.ChannelTxnID != consume.ChannelTxnID || form.Get("origQryId") != consume.ChannelTxnID ||
				ev.RefundID != form.Get("queryId") || ev.RefundID == consume.ChannelTxnID || ev.RefundFen != 100 || ev.RefundIsTotal ||
				form.Get("txnType") != "04" || given != "" && ev.RefundID != given {
				t.Fatalf("refund %s of %s: id %s, %d total=%v; consume %s, form queryId %s origQryId %s txnType %s", ev.Kind, ev.ChannelTxnID,
					ev.RefundID, ev.RefundFen, ev.RefundIsTotal, consume.ChannelTxnID, form.Get("queryId"), form.Get("origQryId"), form.Get("txnType"))
			}
		}
	})

	t.Run("refund and cancel are other notices", func(t *testing.T) {
		ids := map[string]bool{}
		for _, st := range []string{simulate.StatusPaid, simulate.StatusRefund, simulate.StatusClosed} {
			msg, err := signer.Sign(simulate.Payment{TradeNo: "T1", AmountFen: 1, Time: now, Status: st})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := u.Verify(msg.Body, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			ids[ev.NotifyID] = true
		}
		if len(ids) != 3 {
			t.Fatalf("NotifyIDs %v", ids)
		}
	})
	t.Run("unknown currency", func(t *testing.T) {
		if _, err := signer.Sign(simulate.Payment{TradeNo: "T1", AmountFen: 1, Currency: "JPY"}); err == nil {
			t.Fatal("signed a currency ACP code is not known for")
		}
	})
	t.Run("digits TxnID kept", func(t *testing.T) {
		msg, err := signer.Sign(simulate.Payment{TradeNo: "T1", AmountFen: 1, Time: now, TxnID: "123456789012345678901"})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := u.Verify(msg.Body, nil, now)
		if err != nil || ev.ChannelTxnID != "123456789012345678901" {
			t.Fatalf("%v %q", err, ev.ChannelTxnID)
		}
	})
	t.Run("another sandbox is not trusted", func(t *testing.T) {
		msg, err := newSandbox(t, now).Signer(merID).Sign(simulate.Payment{TradeNo: "T1", AmountFen: 1, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Verify(msg.Body, nil, now); !errors.Is(err, channels.ErrBadSignature) {
			t.Fatalf("err = %v, want ErrBadSignature", err)
		}
	})
	t.Run("after the signing certificate expires", func(t *testing.T) {
		msg, _ := signer.Sign(simulate.Payment{TradeNo: "T1", AmountFen: 1, Time: now})
		if _, err := u.Verify(msg.Body, nil, sb.Cert.NotAfter.Add(time.Second)); !errors.Is(err, channels.ErrBadSignature) {
			t.Fatalf("err = %v, want ErrBadSignature", err)
		}
	})
}

// TestSignUnionPayAgainstOpenSSL checks the signer against the openssl-made vectors in
// channels/unionpay/testdata: the same fields signed by SignUnionPay must verify under the openssl PKI's key,
// and the first hash must equal openssl's.
func TestSignUnionPayAgainstOpenSSL(t *testing.T) {
	dir := filepath.Join("..", "channels", "unionpay", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "unionpay_vectors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "unionpay_sign_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key := k.(*rsa.PrivateKey)

	for line := range strings.Lines(string(data)) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if strings.HasPrefix(line, "#") || len(fields) != 3 {
			continue
		}
		name, wantHex, body := fields[0], fields[1], fields[2]
		t.Run(name, func(t *testing.T) {
			form, err := url.ParseQuery(body)
			if err != nil {
				t.Fatal(err)
			}
			opensslSig := form.Get("signature")
			if err := simulate.SignUnionPay(form, key); err != nil {
				t.Fatal(err)
			}
			// PKCS #1 v1.5 is deterministic: same key, same message, same signature.
			if form.Get("signature") != opensslSig {
				t.Fatal("SignUnionPay's signature differs from openssl's")
			}
			// And the hex is the one openssl hashed (checked without the signer's code).
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range form {
					if n != "signature" && !yield(n) {
						return
					}
				}
			})
			var parts []string
			for _, n := range names {
				parts = append(parts, n+"="+form.Get(n))
			}
			sum := sha256.Sum256([]byte(strings.Join(parts, "&")))
			if got := hex.EncodeToString(sum[:]); got != wantHex {
				t.Fatalf("hex %s, openssl %s", got, wantHex)
			}
			sig, _ := base64.StdEncoding.DecodeString(form.Get("signature"))
			second := sha256.Sum256([]byte(wantHex))
			if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, second[:], sig); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUnionPaySandboxPEM(t *testing.T) {
	now := time.Now()
	sb := newSandbox(t, now)
	leaf := parsePEMCert(t, sb.CertPEM())
	if !strings.Contains(leaf.Subject.CommonName, "@中国银联股份有限公司@") || strings.Split(leaf.Subject.CommonName, "@")[2] != unionpay.SignerName {
		t.Fatalf("CN %q", leaf.Subject.CommonName)
	}
	if !leaf.NotBefore.Before(now) || !leaf.NotAfter.After(now.AddDate(1, 0, 0)) {
		t.Fatalf("validity %v - %v", leaf.NotBefore, leaf.NotAfter)
	}
	block, _ := pem.Decode(sb.KeyPEM())
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil || !k.(*rsa.PrivateKey).Equal(sb.Key) {
		t.Fatalf("KeyPEM: %v", err)
	}
	if !parsePEMCert(t, sb.RootPEM()).IsCA || !parsePEMCert(t, sb.IntermediatePEM()).IsCA {
		t.Fatal("root and intermediate must be CAs")
	}
}
