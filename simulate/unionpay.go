package simulate

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
)

// UnionPaySigner signs UnionPay ACP 5.1.0 back notifications with a sandbox signing certificate,
// as UnionPay's own servers would: signMethod 01, the certificate carried in signPubKeyCert.
type UnionPaySigner struct {
	MerID   string
	Key     *rsa.PrivateKey // the signing certificate's key
	CertPEM []byte          // the signing certificate, sent as signPubKeyCert
}

func (s UnionPaySigner) Channel() string { return "unionpay" }

// unionPayCurrencyCodes are the ISO 4217 numeric codes ACP writes in currencyCode.
var unionPayCurrencyCodes = map[string]string{"CNY": "156", "USD": "840", "EUR": "978", "HKD": "344"}

// Sign renders p as a back notification: paid is a consume (txnType 01) answered 00, pending a
// consume still in progress (05), refund a refund (04) of RefundFen whose queryId is RefundID
// (21 digits; derived from it otherwise), and closed a consume cancel (31) of the whole amount;
// the last two name the consume in origQryId.
func (s UnionPaySigner) Sign(p Payment) (Message, error) {
	if s.Key == nil || len(s.CertPEM) == 0 {
		return Message{}, errors.New("unionpay: signer needs Key and CertPEM")
	}
	p = p.normalized("unionpay")
	// ACP's queryId is 21 digits; derive one when the caller's id is not in that shape.
	if !unionPayDigitsOnly(p.TxnID) {
		p.TxnID = unionPayQueryID(p.TradeNo, p.TxnID)
	}
	if p.Status == StatusRefund && !unionPayDigitsOnly(p.RefundID) {
		p.RefundID = unionPayQueryID(p.TradeNo, p.TxnID, StatusRefund, p.RefundID)
	}
	code := unionPayCurrencyCodes[strings.ToUpper(p.Currency)]
	if code == "" {
		return Message{}, fmt.Errorf("unionpay: no ACP currency code for %q", p.Currency)
	}

	at := p.Time.In(bills.ChinaTime)
	v := url.Values{}
	v.Set("version", "5.1.0")
	v.Set("encoding", "UTF-8")
	v.Set("signMethod", "01")
	v.Set("bizType", "000201") // B2C gateway payment
	v.Set("accessType", "0")   // merchant direct access
	v.Set("merId", s.MerID)
	v.Set("orderId", p.TradeNo)
	v.Set("txnTime", at.Format("20060102150405"))
	v.Set("currencyCode", code)
	v.Set("respCode", "00")
	v.Set("respMsg", "成功[0000000]")
	v.Set("traceNo", unionPayQueryID(p.TradeNo, p.Status, "trace")[15:])
	v.Set("traceTime", at.Format("0102150405"))
	v.Set("settleCurrencyCode", "156")
	v.Set("settleDate", at.Format("0102"))
	v.Set("accNo", "6216***********0018")
	v.Set("payCardType", "01")
	v.Set("payType", "0001")

	amount := p.AmountFen
	switch p.Status {
	case StatusPaid:
		v.Set("txnType", "01")
		v.Set("txnSubType", "01")
		v.Set("queryId", p.TxnID)
	case StatusPending:
		v.Set("txnType", "01")
		v.Set("txnSubType", "01")
		v.Set("queryId", p.TxnID)
		v.Set("respCode", "05")
		v.Set("respMsg", "交易处理中")
	case StatusRefund:
		amount = p.RefundFen
		v.Set("txnType", "04")
		v.Set("txnSubType", "00")
		v.Set("queryId", p.RefundID)
		v.Set("origQryId", p.TxnID)
	case StatusClosed:
		v.Set("txnType", "31")
		v.Set("txnSubType", "00")
		v.Set("queryId", unionPayQueryID(p.TradeNo, p.TxnID, StatusClosed))
		v.Set("origQryId", p.TxnID)
	default:
		return Message{}, fmt.Errorf("unionpay: unknown status %q", p.Status)
	}
	v.Set("txnAmt", fmt.Sprint(amount))
	v.Set("settleAmt", fmt.Sprint(amount))
	v.Set("signPubKeyCert", string(s.CertPEM))

	if err := SignUnionPay(v, s.Key); err != nil {
		return Message{}, err
	}
	return Message{
		Body:   []byte(v.Encode()),
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded;charset=UTF-8"}},
	}, nil
}

// SignUnionPay sets form's signature the ACP 5.1.0 way: the form's fields but signature, sorted by
// name, as name=value joined by '&'; its SHA-256 in lower-case hex; that hex text signed with
// SHA256withRSA (PKCS #1 v1.5); base64.
func SignUnionPay(form url.Values, key *rsa.PrivateKey) error {
	digest := unionPayDigest(form)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return fmt.Errorf("unionpay: sign: %w", err)
	}
	form.Set("signature", base64.StdEncoding.EncodeToString(sig))
	return nil
}

// unionPayQueryID derives a stable 21-digit id from parts.
func unionPayQueryID(parts ...string) string {
	sum := sha256.Sum256([]byte("unionpay\x00" + strings.Join(parts, "\x00")))
	n := new(big.Int).SetBytes(sum[:])
	n.Mod(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(21), nil))
	digits := n.String()
	return strings.Repeat("0", 21-len(digits)) + digits
}

func unionPayDigitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// UnionPaySandboxCN is the subject CN of the sandbox signing certificate, in the shape UnionPay's
// SDK reads: the organisation is the third '@'-separated part.
const UnionPaySandboxCN = "041@Z12@中国银联股份有限公司@00000002"

// UnionPaySandbox is a throw-away UnionPay PKI: a root CA, an intermediate CA and a signing
// certificate with its key. Nothing in it is, or ever signs for, real UnionPay.
type UnionPaySandbox struct {
	Root, Intermediate, Cert *x509.Certificate
	RootKey, IntermediateKey *rsa.PrivateKey
	Key                      *rsa.PrivateKey // the signing certificate's key
}

// NewUnionPaySandbox generates a sandbox PKI valid from an hour before now for ten years (the
// signing certificate for five).
func NewUnionPaySandbox(now time.Time) (*UnionPaySandbox, error) {
	sb := &UnionPaySandbox{}
	var err error
	if sb.RootKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	if sb.IntermediateKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	if sb.Key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	start := now.Add(-time.Hour)

	ca := func(cn string) *x509.Certificate {
		return &x509.Certificate{
			Subject:               pkix.Name{Country: []string{"CN"}, Organization: []string{"paygw sandbox"}, CommonName: cn},
			NotBefore:             start,
			NotAfter:              start.AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
	}
	rootT := ca("paygw sandbox UnionPay root CA")
	rootT.SerialNumber = unionPaySerial(1)
	if sb.Root, err = unionPayIssue(rootT, rootT, &sb.RootKey.PublicKey, sb.RootKey); err != nil {
		return nil, err
	}
	midT := ca("paygw sandbox UnionPay intermediate CA")
	midT.SerialNumber = unionPaySerial(2)
	midT.MaxPathLenZero = true
	if sb.Intermediate, err = unionPayIssue(midT, sb.Root, &sb.IntermediateKey.PublicKey, sb.RootKey); err != nil {
		return nil, err
	}
	leafT := &x509.Certificate{
		SerialNumber: unionPaySerial(3),
		Subject: pkix.Name{
			Country: []string{"CN"}, Organization: []string{"paygw sandbox"},
			OrganizationalUnit: []string{"Enterprises"}, CommonName: UnionPaySandboxCN,
		},
		NotBefore:             start,
		NotAfter:              start.AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment,
		BasicConstraintsValid: true,
	}
	if sb.Cert, err = unionPayIssue(leafT, sb.Intermediate, &sb.Key.PublicKey, sb.IntermediateKey); err != nil {
		return nil, err
	}
	return sb, nil
}

func unionPaySerial(n int64) *big.Int {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return new(big.Int).SetUint64(binary.BigEndian.Uint64(b[:])>>8<<8 | uint64(n)) // #nosec G115 -- n is a small positive constant (1, 2, 3)
}

func unionPayIssue(template, parent *x509.Certificate, pub *rsa.PublicKey, signer *rsa.PrivateKey) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("unionpay sandbox: %w", err)
	}
	return x509.ParseCertificate(der)
}

func unionPayCertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// RootPEM is the root certificate: what a gateway configures as root_cert_file.
func (sb *UnionPaySandbox) RootPEM() []byte { return unionPayCertPEM(sb.Root) }

// IntermediatePEM is the intermediate certificate: intermediate_cert_file.
func (sb *UnionPaySandbox) IntermediatePEM() []byte { return unionPayCertPEM(sb.Intermediate) }

// CertPEM is the signing certificate, sent in every notification as signPubKeyCert.
func (sb *UnionPaySandbox) CertPEM() []byte { return unionPayCertPEM(sb.Cert) }

// KeyPEM is the signing key as PKCS #8 PEM.
func (sb *UnionPaySandbox) KeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(sb.Key)
	if err != nil { // cannot happen for an RSA key
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Signer returns a signer for merID with the sandbox signing certificate.
func (sb *UnionPaySandbox) Signer(merID string) UnionPaySigner {
	return UnionPaySigner{MerID: merID, Key: sb.Key, CertPEM: sb.CertPEM()}
}

// unionPayDigest is what ACP 5.1.0 signs with SHA256withRSA: the SHA-256 of the lower-case hex
// SHA-256 of the form's fields but signature, sorted by name, as name=value joined by '&'.
func unionPayDigest(form url.Values) [32]byte {
	first := sha256.Sum256([]byte(sortedForm(form, func(name, _ string) bool { return name != "signature" })))
	return sha256.Sum256([]byte(fmt.Sprintf("%x", first[:])))
}

// sortedForm is the fields of form that keep accepts, as name=value sorted by name and joined
// by '&', values as they are (not percent-encoded): the string ACP and Alipay sign, and ACP's
// synchronous answer.
func sortedForm(form url.Values, keep func(name, value string) bool) string {
	names := make([]string, 0, len(form))
	for name := range form {
		if keep(name, form.Get(name)) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	pairs := make([]string, len(names))
	for i, name := range names {
		pairs[i] = name + "=" + form.Get(name)
	}
	return strings.Join(pairs, "&")
}
