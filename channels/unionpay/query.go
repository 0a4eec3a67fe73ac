package unionpay

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/bills"
)

// unionPayQuerier asks UnionPay's ACP 5.1.0 transaction status query (queryTrans.do) about a
// consume: a form signed with the merchant's signing certificate, answered by a message UnionPay
// signs as it signs notifications, which the notification verifier checks.
type unionPayQuerier struct {
	v      *Channel // the notification verifier: merId, trusted chain, signer name
	key    *rsa.PrivateKey
	certID string // the merchant signing certificate's serial, in decimal
	url    string
	hc     *http.Client
	now    func() time.Time
}

var _ channels.Querier = (*unionPayQuerier)(nil)

// unionPayMaxResponse bounds a query response; a real one is about 3 KB, most of it the
// signing certificate.
const unionPayMaxResponse = 64 << 10

// NewQuerier returns the UnionPay querier for c. v is the notification verifier of the
// same configuration: responses are checked by it, against its merId. The merchant signing
// certificate is read from c.SignCertFile (PKCS#12, any encryption go-pkcs12 decodes: the legacy
// RC2/3DES files UnionPay's tools make and the modern AES ones). hc nil is a client with a 30 s
// timeout. Without channels.unionpay.sign_cert_file the error wraps channels.ErrNoCredentials. Errors name
// configuration keys and never carry the password or key material.
func NewQuerier(c config.UnionPay, v *Channel, hc *http.Client) (channels.Querier, error) {
	const fileKey = "channels.unionpay.sign_cert_file"
	if v == nil {
		return nil, errors.New("channels: unionpay: the query needs the notification verifier")
	}
	if c.SignCertFile == "" {
		return nil, fmt.Errorf("%w: unionpay: %s is not set", channels.ErrNoCredentials, fileKey)
	}
	if u, err := url.Parse(c.QueryURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("channels: unionpay: channels.unionpay.query_url: must be an http(s) URL")
	}
	pfx, err := os.ReadFile(c.SignCertFile) // #nosec G304 -- the path is the operator's own configuration
	if err != nil {
		return nil, fmt.Errorf("channels: unionpay: %s: %w", fileKey, err)
	}
	key, cert, err := DecodePFX(pfx, c.SignCertPassword)
	if err != nil {
		return nil, fmt.Errorf("channels: unionpay: %s: %w", fileKey, err)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &unionPayQuerier{v: v, key: key, certID: cert.SerialNumber.String(), url: c.QueryURL, hc: hc, now: time.Now}, nil
}

// DecodePFX reads the merchant's RSA key and its certificate from a .pfx (sign_cert_file), as the
// channel and paygw doctor read it. The certificate is the one whose key it is, wherever the file
// puts it among the CA certificates some tools add. Errors never include key material.
func DecodePFX(pfx []byte, password string) (*rsa.PrivateKey, *x509.Certificate, error) {
	priv, leaf, cas, err := pkcs12.DecodeChain(pfx, password)
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword):
		return nil, nil, errors.New("wrong password (channels.unionpay.sign_cert_password)")
	case err != nil:
		return nil, nil, errors.New("not a PKCS#12 file holding one key and its certificate")
	}
	key, ok := priv.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("the key is not RSA")
	}
	if err := channels.CheckRSAKey(&key.PublicKey, MinRSABits); err != nil {
		return nil, nil, fmt.Errorf("the key: %w", err)
	}
	for _, c := range append([]*x509.Certificate{leaf}, cas...) {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
			return key, c, nil
		}
	}
	return nil, nil, errors.New("no certificate in the file is the key's")
}

func (u *unionPayQuerier) Name() string { return "unionpay" }

// QueryTrade asks about the consume with orderId q.TradeNo sent at q.ChannelRef (the txnTime the
// attempt recorded), or at q.OrderTime in Beijing time when the attempt recorded none; UnionPay
// knows a transaction by merId, orderId and txnTime together.
//
// The answer, read only from a response the verifier accepts (see unionPayQueryAnswer):
//   - respCode 00, origRespCode 00 or A6: channels.TradePaid, with the payment the consume's notification
//     carries (queryId, txnAmt, currencyCode, txnTime).
//   - respCode 00, origRespCode 03, 04 or 05 (processing, unknown): channels.TradeNotPaid.
//   - respCode 00, any other origRespCode: the consume failed. channels.TradeNotPaid, not channels.TradeClosed: a
//     failed transaction is final, but the order is not closed by it, as the buyer may pay the
//     same order again in a new transaction (a new txnTime) or on another channel. The order's
//     own timeout closes it.
//   - respCode 34 (no such transaction): channels.TradeNotPaid; UnionPay's guide says to ask again later.
//   - any other respCode: channels.ErrQueryFailed (the query itself was refused).
//
// UnionPay's query of a consume does not tell of later refunds or cancels (those are
// transactions of their own, notified on their own): a refunded payment answers channels.TradePaid.
//
// Errors: channels.ErrQueryFailed (transport, HTTP status, respCode); channels.ErrBadSignature (the verifier
// refused the response); channels.ErrMalformed (unreadable, merId or orderId not ours, a field missing).
func (u *unionPayQuerier) QueryTrade(ctx context.Context, q channels.TradeQuery) (channels.TradeAnswer, error) {
	form, err := u.request(q)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	body, err := u.post(ctx, form)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	return u.answer(q.TradeNo, body, u.now())
}

// request is the signed query form: ACP 5.1.0's double hash, as UnionPay signs its own messages
// (unionPayDigestHex), with the merchant key.
func (u *unionPayQuerier) request(q channels.TradeQuery) (url.Values, error) {
	if !payment.ValidTradeNo(q.TradeNo) {
		return nil, fmt.Errorf("%w: unionpay: trade_no is not 1-%d of [A-Za-z0-9_-]", channels.ErrQueryFailed, payment.MaxTradeNo)
	}
	txnTime, err := unionPayTxnTime(q)
	if err != nil {
		return nil, err
	}
	params := map[string]string{
		"version":    "5.1.0",
		"encoding":   "UTF-8",
		"signMethod": "01",
		"txnType":    "00",
		"txnSubType": "00",
		"bizType":    "000201",
		"accessType": "0",
		"merId":      u.v.merID,
		"orderId":    q.TradeNo,
		"txnTime":    txnTime,
		"certId":     u.certID,
	}
	return u.signedForm(params)
}

// signedForm is params with the merchant's signature over them, ACP 5.1.0's double hash: the
// form of every request we send, queries and bill downloads alike.
func (u *unionPayQuerier) signedForm(params map[string]string) (url.Values, error) {
	digest := sha256.Sum256([]byte(unionPayDigestHex(params, true)))
	sig, err := rsa.SignPKCS1v15(rand.Reader, u.key, crypto.SHA256, digest[:])
	if err != nil {
		return nil, fmt.Errorf("%w: unionpay: signing the request failed", channels.ErrQueryFailed)
	}
	form := url.Values{"signature": {base64.StdEncoding.EncodeToString(sig)}}
	for k, v := range params {
		form.Set(k, v)
	}
	return form, nil
}

// unionPayTxnTime is the txnTime to ask with: the attempt's, else the order's creation time.
func unionPayTxnTime(q channels.TradeQuery) (string, error) {
	if q.ChannelRef != "" {
		if _, err := time.ParseInLocation(unionPayTimeLayout, q.ChannelRef, bills.ChinaTime); err != nil || !channels.AllDigits(q.ChannelRef) {
			return "", fmt.Errorf("%w: unionpay: channel_ref is not a txnTime (yyyyMMddHHmmss)", channels.ErrQueryFailed)
		}
		return q.ChannelRef, nil
	}
	if q.OrderTime.IsZero() {
		return "", fmt.Errorf("%w: unionpay: no txnTime: neither the attempt's channel_ref nor the order's time", channels.ErrQueryFailed)
	}
	return q.OrderTime.In(bills.ChinaTime).Format(unionPayTimeLayout), nil
}

func (u *unionPayQuerier) post(ctx context.Context, form url.Values) ([]byte, error) {
	return unionPayPost(ctx, u.hc, u.url, form, unionPayMaxResponse)
}

// unionPayPost sends a signed ACP form and returns the answer's body, at most limit bytes.
func unionPayPost(ctx context.Context, hc *http.Client, to string, form url.Values, limit int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: unionpay: %w", channels.ErrQueryFailed, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			err = channels.URLCause(err) // the URL is configuration: the log has it already
		}
		return nil, fmt.Errorf("%w: unionpay: %w", channels.ErrQueryFailed, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: unionpay: reading the response: %w", channels.ErrQueryFailed, err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: unionpay: HTTP %d", channels.ErrQueryFailed, resp.StatusCode)
	case len(body) > limit:
		return nil, fmt.Errorf("%w: unionpay: response larger than %d bytes", channels.ErrMalformed, limit)
	}
	return body, nil
}

// answer verifies a response body exactly as a notification is verified (certificate chain,
// signer name, signature), and only then reads it.
func (u *unionPayQuerier) answer(tradeNo string, body []byte, now time.Time) (channels.TradeAnswer, error) {
	params, err := parseUnionPayResponse(body)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	if err := u.v.checkSignature(params, now); err != nil {
		// A refused query is sometimes answered unsigned; its code says why, unverified.
		if rc := params["respCode"]; rc != "" {
			return channels.TradeAnswer{}, fmt.Errorf("%w (unverified respCode %s)", err, channels.Quote(rc))
		}
		return channels.TradeAnswer{}, err
	}
	return unionPayQueryAnswer(u.v.merID, tradeNo, params, body)
}

// parseUnionPayResponse reads a synchronous ACP response. Unlike a notification, which UnionPay
// posts as an encoded form, a response body is `k=v&k=v` with the values as they are: nothing is
// percent-decoded, a value runs to the next '&' outside {...} or [...] (UnionPay's nested fields
// hold '&'), and the whole may be wrapped in one pair of braces. A field without '=', an empty or
// repeated name, and anything but UTF-8 are refused, as is what the verifier does not implement
// (encoding, version, signMethod).
func parseUnionPayResponse(body []byte) (map[string]string, error) {
	bad := func(reason string) (map[string]string, error) {
		return nil, fmt.Errorf("%w: unionpay: response %s", channels.ErrMalformed, reason)
	}
	if !utf8.Valid(body) {
		return bad("is not UTF-8")
	}
	s := string(body)
	if len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}' {
		s = s[1 : len(s)-1]
	}
	if s == "" {
		return bad("is empty")
	}
	params := map[string]string{}
	for s != "" {
		eq, amp := strings.IndexByte(s, '='), strings.IndexByte(s, '&')
		if eq < 0 || 0 <= amp && amp < eq {
			return bad("has a field without '='")
		}
		name, rest := s[:eq], s[eq+1:]
		end := unionPayValueEnd(rest)
		if _, dup := params[name]; dup || name == "" {
			return bad("has an empty or repeated field name")
		}
		params[name] = rest[:end]
		if s = rest[end:]; s != "" {
			if s = s[1:]; s == "" {
				return bad("ends with '&'")
			}
		}
	}
	if enc := params["encoding"]; enc != "" && !strings.EqualFold(enc, "utf-8") {
		return bad("encoding " + channels.Quote(enc))
	}
	if v := params["version"]; v != "5.1.0" {
		return bad("version " + channels.Quote(v) + ", want 5.1.0")
	}
	if m := params["signMethod"]; m != "01" {
		return bad("signMethod " + channels.Quote(m) + ", want 01")
	}
	return params, nil
}

// unionPayValueEnd is where a response value starting at s[0] ends: the first '&' outside a
// {...} or [...] group, or the end of s.
func unionPayValueEnd(s string) int {
	var closer byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case closer != 0:
			if c == closer {
				closer = 0
			}
		case c == '{':
			closer = '}'
		case c == '[':
			closer = ']'
		case c == '&':
			return i
		}
	}
	return len(s)
}

// unionPayQueryAnswer maps the fields of a verified response about tradeNo (see QueryTrade).
// merId must be ours and orderId the trade asked about: required on an answer (respCode 00),
// compared when present on a refusal.
func unionPayQueryAnswer(merID, tradeNo string, params map[string]string, body []byte) (channels.TradeAnswer, error) {
	respCode, err := channels.RequiredField("unionpay", params, "respCode", 2)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	if m, ok := params["merId"]; (ok || respCode == "00") && !channels.EqualConstantTime(m, merID) {
		return channels.TradeAnswer{}, fmt.Errorf("%w: unionpay: response merId differs from ours", channels.ErrMalformed)
	}
	if o, ok := params["orderId"]; (ok || respCode == "00") && o != tradeNo {
		return channels.TradeAnswer{}, fmt.Errorf("%w: unionpay: response orderId is not the trade asked about", channels.ErrMalformed)
	}
	switch respCode {
	case "00":
	case "34":
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: "respCode=34 no such transaction"}, nil
	default:
		return channels.TradeAnswer{}, fmt.Errorf("%w: unionpay: respCode %s", channels.ErrQueryFailed, respCode)
	}

	orig, err := channels.RequiredField("unionpay", params, "origRespCode", 2)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	status := "origRespCode=" + orig
	switch orig {
	case "00", "A6": // A6: paid, with a defect; the funds are taken
	case "03", "04", "05":
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: status}, nil
	default:
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: status + " failed"}, nil
	}

	if t := params["txnType"]; t != "" && t != "01" && t != "00" {
		return channels.TradeAnswer{}, fmt.Errorf("%w: unionpay: response txnType %s is not a consume", channels.ErrMalformed, channels.Quote(t))
	}
	queryID, err := channels.RequiredField("unionpay", params, "queryId", channels.MaxChannelTxnID-len(channels.QueryNotifyID("")))
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	ev := payment.Event{
		Channel: "unionpay", NotifyID: channels.QueryNotifyID(queryID), TradeNo: tradeNo, ChannelTxnID: queryID,
		Kind: payment.KindPaid, Status: status, Raw: bytes.Clone(body),
	}
	if err := unionPayMoney(&ev, params); err != nil {
		return channels.TradeAnswer{}, err
	}
	if ev, err = channels.CheckEvent(ev); err != nil {
		return channels.TradeAnswer{}, err
	}
	return channels.TradeAnswer{State: channels.TradePaid, Status: status, Events: []payment.Event{ev}}, nil
}
