// Package unionpay is everything paygw does with UnionPay ACP 5.1.0: it verifies back
// notifications against UnionPay's certificate chain, asks queryTrans about a trade, and
// downloads the daily ZM bill through the file transfer, signing with the merchant's PFX.
package unionpay

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/bills"
)

// SignerName is the organisation UnionPay's ACP SDK expects in the third '@'-separated
// part of the signing certificate's CN in production ("041@Z12@中国银联股份有限公司@..."). Its test
// environment signs with "00040000:SIGN" there instead; configure that as SignerName to trust it.
const SignerName = "中国银联股份有限公司"

// MinRSABits is the smallest key this channel accepts, in its certificates and the merchant's
// signing certificate file (paygw doctor checks the files with it): UnionPay still issues
// 1024-bit certificates.
const MinRSABits = channels.MinRSABits

// Config is what a UnionPay verifier trusts.
type Config struct {
	MerID         string              // our merchant id (merId)
	Roots         []*x509.Certificate // UnionPay's root certificate(s): root_cert_file
	Intermediates []*x509.Certificate // UnionPay's intermediate ("middle") certificate(s): intermediate_cert_file
	SignerName    string              // "" = SignerName
}

// Channel verifies UnionPay ACP 5.1.0 back notifications (signMethod 01: RSA certificates) and
// renders the replies UnionPay expects.
type Channel struct {
	merID      string
	chain      *unionPayChain // the configured roots and intermediates (unionpay_chain.go)
	signerName string
}

// New checks c and returns a verifier. Errors name the configuration key at fault. Each
// intermediate must be issued by a configured root, checked as every signing certificate is
// (SHA1-RSA or SHA256-RSA; see unionpay_chain.go).
func New(c Config) (*Channel, error) {
	if c.MerID == "" {
		return nil, errors.New("channels.unionpay.mer_id: must be set")
	}
	chain, err := newUnionPayChain(c.Roots, c.Intermediates)
	if err != nil {
		return nil, err
	}
	name := c.SignerName
	if name == "" {
		name = SignerName
	}
	return &Channel{merID: c.MerID, chain: chain, signerName: name}, nil
}

// Name is the channel name stored with every event.
func (u *Channel) Name() string { return "unionpay" }

// unionPayTimeLayout is how ACP writes txnTime, in Beijing time.
const unionPayTimeLayout = "20060102150405"

// Verify checks the form body of a UnionPay back notification and maps it to an event. header is
// unused: UnionPay signs the body alone. now is the instant the signing certificate must be valid at.
//
// Errors: channels.ErrMalformed for an unparseable body or a missing or invalid field; channels.ErrUnsupported for
// an encoding other than UTF-8, a version other than 5.1.0 or a signMethod other than 01;
// channels.ErrBadSignature when the signature or signPubKeyCert is missing or undecodable, the certificate
// does not chain to the configured roots, is not valid at now or is not UnionPay's, or the
// signature does not match; channels.ErrNotOurs when merId differs. Fields are looked at only once the
// signature holds.
func (u *Channel) Verify(body []byte, header http.Header, now time.Time) (payment.Event, error) {
	params, err := parseUnionPayForm(body)
	if err != nil {
		return payment.Event{}, err
	}
	if err := u.checkSignature(params, now); err != nil {
		return payment.Event{}, err
	}
	if !channels.EqualConstantTime(params["merId"], u.merID) {
		return payment.Event{}, fmt.Errorf("%w: unionpay: merId differs from ours", channels.ErrNotOurs)
	}
	ev, err := unionPayEvent(params, body)
	if err != nil {
		return payment.Event{}, err
	}
	return channels.CheckEvent(ev)
}

// ApplyTimeout is 8 s: UnionPay waits 10 s for the reply.
func (u *Channel) ApplyTimeout() time.Duration { return 8 * time.Second }

// AcceptsCurrency refuses every currency but CNY, the one paygw takes through this channel
// (channels.CNYOnly).
func (u *Channel) AcceptsCurrency(code string) error { return channels.CNYOnly(u.Name(), code) }

// parseUnionPayForm reads the form body and refuses, before any cryptography, what this verifier
// does not implement.
func parseUnionPayForm(body []byte) (map[string]string, error) {
	params, err := channels.ParseForm("unionpay", body)
	if err != nil {
		return nil, err
	}
	if enc := params["encoding"]; enc != "" && !strings.EqualFold(enc, "utf-8") {
		return nil, fmt.Errorf("%w: unionpay: encoding %s", channels.ErrUnsupported, channels.Quote(enc))
	}
	if err := channels.CheckUTF8("unionpay", params); err != nil {
		return nil, err
	}
	if v := params["version"]; v != "5.1.0" {
		return nil, fmt.Errorf("%w: unionpay: version %s, want 5.1.0", channels.ErrUnsupported, channels.Quote(v))
	}
	if m := params["signMethod"]; m != "01" {
		return nil, fmt.Errorf("%w: unionpay: signMethod %s, want 01", channels.ErrUnsupported, channels.Quote(m))
	}
	return params, nil
}

func (u *Channel) checkSignature(params map[string]string, now time.Time) error {
	bad := func(reason string) error { return fmt.Errorf("%w: unionpay: %s", channels.ErrBadSignature, reason) }

	if params["signature"] == "" {
		return bad("signature missing")
	}
	sig, err := base64.StdEncoding.DecodeString(params["signature"])
	if err != nil {
		return bad("signature is not base64")
	}
	cert, reason := parseUnionPayCert(params["signPubKeyCert"])
	if reason != "" {
		return bad(reason)
	}

	// The name first: it costs nothing, and a certificate of the other environment (test vs
	// production) is then reported as such rather than as a chain failure.
	if !channels.EqualConstantTime(unionPaySignerOf(cert), u.signerName) {
		return bad("signer name")
	}
	if reason := u.chain.verify(cert, now); reason != "" {
		return bad(reason)
	}
	key, ok := cert.PublicKey.(*rsa.PublicKey)
	switch {
	case !ok:
		return bad("certificate key is not RSA")
	case channels.CheckRSAKey(key, MinRSABits) != nil:
		return bad("certificate key too short")
	}

	// UnionPay's SDKs sign every field, empty ones included; their demo receivers drop empty
	// fields before verifying. Either string, signed by UnionPay's certificate, is UnionPay's
	// word (an empty field means the same as an absent one to the mapper), so both are tried
	// rather than refusing a genuine payment for a convention.
	for _, withEmpty := range []bool{true, false} {
		digest := sha256.Sum256([]byte(unionPayDigestHex(params, withEmpty)))
		if rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) == nil {
			return nil
		}
		if !hasEmptyValue(params) {
			break // the second string would be the same
		}
	}
	return bad("signature does not match")
}

func hasEmptyValue(params map[string]string) bool {
	for _, v := range params {
		if v == "" {
			return true
		}
	}
	return false
}

// parseUnionPayCert reads signPubKeyCert: exactly one PEM CERTIFICATE block. It returns a short
// reason instead of an error so no parser detail reaches the logs.
func parseUnionPayCert(s string) (*x509.Certificate, string) {
	if s == "" {
		return nil, "signPubKeyCert missing"
	}
	block, rest := pem.Decode([]byte(s))
	switch {
	case block == nil:
		return nil, "signPubKeyCert is not PEM"
	case block.Type != "CERTIFICATE":
		return nil, "signPubKeyCert is not a certificate"
	case len(bytes.TrimSpace(rest)) != 0:
		return nil, "signPubKeyCert has data after the certificate"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, "signPubKeyCert does not parse"
	}
	return cert, ""
}

// oidCommonName is the X.520 commonName attribute.
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// unionPaySignerOf is the organisation the ACP SDK reads from a signing certificate: the third
// '@'-separated part of the subject CN ("041@Z12@中国银联股份有限公司@00000002"), or "" when the CN
// has fewer parts. A subject with several CNs yields "": which one the SDK would read depends on
// the SDK, so none is trusted.
func unionPaySignerOf(cert *x509.Certificate) string {
	cns := 0
	for _, atv := range cert.Subject.Names {
		if atv.Type.Equal(oidCommonName) {
			cns++
		}
	}
	if cns != 1 {
		return ""
	}
	parts := strings.Split(cert.Subject.CommonName, "@")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

// unionPaySignedString is what UnionPay signs: every received parameter but signature
// (signPubKeyCert included, empty values when withEmpty), sorted by key in byte order, as k=v
// joined by &, values decoded. Built from the received map, so fields we do not know count too.
func unionPaySignedString(params map[string]string, withEmpty bool) string {
	return channels.SortedPairs(params, func(k, v string) bool { return k != "signature" && (withEmpty || v != "") })
}

// unionPayDigestHex is the first of ACP 5.1.0's two hashes: the lower-case hex SHA-256 of the
// signed string. The RSA signature is over these 64 ASCII characters, hashed again.
func unionPayDigestHex(params map[string]string, withEmpty bool) string {
	sum := sha256.Sum256([]byte(unionPaySignedString(params, withEmpty)))
	return hex.EncodeToString(sum[:])
}

// unionPayCurrencies maps the ISO 4217 numeric codes ACP sends in currencyCode.
var unionPayCurrencies = map[string]string{"156": "CNY", "840": "USD", "978": "EUR", "344": "HKD"}

// unionPayEvent maps verified parameters to an event. Widths are channels.CheckEvent's.
func unionPayEvent(params map[string]string, body []byte) (payment.Event, error) {
	ev := payment.Event{Channel: "unionpay", Raw: bytes.Clone(body)}

	ev.TradeNo = params["orderId"]
	if !payment.ValidTradeNo(ev.TradeNo) {
		return payment.Event{}, fmt.Errorf("%w: unionpay: orderId missing or not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	queryID := params["queryId"]
	if queryID == "" {
		return payment.Event{}, fmt.Errorf("%w: unionpay: queryId missing", channels.ErrMalformed)
	}
	ev.ChannelTxnID = queryID
	txnType, err := channels.RequiredField("unionpay", params, "txnType", 2)
	if err != nil {
		return payment.Event{}, err
	}
	respCode, err := channels.RequiredField("unionpay", params, "respCode", 2)
	if err != nil {
		return payment.Event{}, err
	}
	// UnionPay's retries of one notice repeat these three; a refund or cancel has its own queryId.
	ev.NotifyID = queryID + ":" + txnType + ":" + respCode
	ev.Status = "txnType=" + txnType + " respCode=" + respCode

	if err := unionPayMoney(&ev, params); err != nil {
		return payment.Event{}, err
	}

	switch txnType {
	case "01": // consume
		ev.Kind = payment.KindPending
		if respCode == "00" || respCode == "A6" { // A6: success with a defect; funds taken
			ev.Kind = payment.KindPaid
		}
	case "04", "31": // refund, consume cancel (same-day void): money back, never a close
		if respCode != "00" {
			ev.Kind = payment.KindOther // a refund or void that did not go through
			break
		}
		// These carry the merchant's own refund or cancel orderId, not necessarily our
		// trade_no: origQryId names the payment they undo, and apply finds the order by it. The
		// refund's own queryId keys it, once.
		orig := params["origQryId"]
		if orig == "" {
			return payment.Event{}, fmt.Errorf("%w: unionpay: origQryId missing on a refund", channels.ErrMalformed)
		}
		ev.Kind, ev.ChannelTxnID = payment.KindRefund, orig
		ev.RefundID, ev.RefundFen = queryID, ev.AmountFen
	default:
		ev.Kind = payment.KindOther
	}
	return ev, nil
}

// unionPayMoney sets ev's amount, currency and time from a verified notification's or query
// answer's txnAmt, currencyCode and txnTime, as both state them alike.
func unionPayMoney(ev *payment.Event, params map[string]string) error {
	var err error
	if ev.AmountFen, err = parseUnionPayFen(params["txnAmt"]); err != nil {
		return err
	}
	code := params["currencyCode"]
	if ev.Currency = unionPayCurrencies[code]; ev.Currency == "" {
		return fmt.Errorf("%w: unionpay: currencyCode %s", channels.ErrMalformed, channels.Quote(code))
	}
	// Fixed UTC+8 (China keeps no DST), so no tzdata is needed.
	if ev.PaidAt, err = time.ParseInLocation(unionPayTimeLayout, params["txnTime"], bills.ChinaTime); err != nil {
		return fmt.Errorf("%w: unionpay: txnTime missing or not %s", channels.ErrMalformed, unionPayTimeLayout)
	}
	return nil
}

// parseUnionPayFen reads an ACP amount: minor units as ASCII digits, at most 12 of them (the field's width).
// Leading zeros are tolerated: the value is exact either way and refusing one would lose a payment.
func parseUnionPayFen(s string) (int64, error) {
	if !channels.AllDigits(s) || len(s) > 12 {
		return 0, fmt.Errorf("%w: unionpay: txnAmt %s: want 1-12 digits", channels.ErrMalformed, channels.Quote(s))
	}
	var fen int64
	for i := 0; i < len(s); i++ {
		fen = fen*10 + int64(s[i]-'0')
	}
	if fen > channels.MaxFen {
		return 0, fmt.Errorf("%w: unionpay: txnAmt %s: too large", channels.ErrMalformed, channels.Quote(s))
	}
	return fen, nil
}

// Reply renders the answer UnionPay understands: HTTP 200 means received (body "ok" by custom);
// anything else makes it deliver again, at most 5 times. A refusal is still answered 4xx so our own
// logs tell it apart.
func (u *Channel) Reply(r payment.Reply) channels.Response {
	const contentType = "text/plain; charset=utf-8"
	switch r {
	case payment.ReplySuccess:
		return channels.Response{Status: http.StatusOK, ContentType: contentType, Body: []byte("ok")}
	case payment.ReplyRefuse:
		return channels.Response{Status: http.StatusBadRequest, ContentType: contentType, Body: []byte("fail")}
	default: // ReplyRetry, and anything unknown: a redelivery is never lost money
		return channels.Response{Status: http.StatusInternalServerError, ContentType: contentType, Body: []byte("fail")}
	}
}
