package channels

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/smartwalle/alipay/v3"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// AlipayQuerier asks Alipay about trades with alipay.trade.query, through the smartwalle/alipay
// SDK: it builds and signs the request, and verifies the response's sign over the raw bytes of
// alipay_trade_query_response (decoded as map[string]json.RawMessage, so the order of sign and the
// node does not matter). What the SDK does not do is done around it: the response is read whole
// and kept for the journal, a non-200 status is told apart from an unverified body, and the body
// must be JSON that every reader reads alike (strictJSON) before any of it is believed.
type AlipayQuerier struct {
	client *alipay.Client
}

var _ Querier = (*AlipayQuerier)(nil)

// queryMinRSABits: Alipay's RSA2 and WeChat's WECHATPAY2-SHA256-RSA2048 both want 2048-bit
// merchant keys; a smaller one is a configuration slip, found at start.
const queryMinRSABits = 2048

// NewAlipayQuerier builds the trade query for the channel v verifies, with the merchant app
// private key and gateway of c. hc carries the timeout; nil is a client with a 15 s timeout.
//
// The SDK is built with production=false whatever the gateway: in this SDK the flag only picks
// default hosts, which WithSandboxGateway replaces with the configured gateway_url, and, when
// true, lets a response that names an unknown alipay_cert_sn make the SDK download that
// certificate from the gateway during the request and trust it unverified. With false, and the
// Alipay public key always loaded, every response is checked against the configured key alone.
//
// Errors: ErrNoCredentials naming channels.alipay.app_private_key_file when it is not set; an
// error naming the key when a file cannot be read or a key does not parse (never its contents).
func NewAlipayQuerier(c config.Alipay, v *Alipay, hc *http.Client) (Querier, error) {
	const p = "channels: alipay: "
	switch {
	case v == nil:
		return nil, errors.New(p + "NewAlipayQuerier: nil verifier")
	case c.AppPrivateKeyFile == "":
		return nil, fmt.Errorf("%w: channels.alipay.app_private_key_file is not set", ErrNoCredentials)
	case c.AppID == "":
		return nil, errors.New(p + "channels.alipay.app_id: empty")
	}
	if err := checkBaseURL(c.GatewayURL, true); err != nil {
		return nil, fmt.Errorf(p+"channels.alipay.gateway_url: %w", err)
	}
	keyPEM, err := readPrivateKeyFile(c.AppPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.alipay.app_private_key_file: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(v.key)
	if err != nil {
		return nil, fmt.Errorf(p+"the Alipay public key: %w", err)
	}

	client, err := alipay.New(c.AppID, string(keyPEM), false,
		alipay.WithSandboxGateway(c.GatewayURL),
		alipay.WithHTTPClient(capturingClient(hc, nil)),
		// Alipay reads timestamp in Beijing time; China keeps no DST, so a fixed +8 is exact
		// and needs no tzdata.
		alipay.WithTimeLocation(time.FixedZone("CST", 8*3600)))
	if err != nil {
		// Parsed above already; the SDK's own reason is not repeated in case it quotes input.
		return nil, errors.New(p + "channels.alipay.app_private_key_file: the SDK refused the key")
	}
	if err := client.LoadAliPayPublicKey(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))); err != nil {
		return nil, fmt.Errorf(p+"loading the Alipay public key into the SDK: %w", err)
	}
	return &AlipayQuerier{client: client}, nil
}

// Name is the channel asked.
func (q *AlipayQuerier) Name() string { return "alipay" }

// QueryTrade asks Alipay about tq.TradeNo by out_trade_no.
//
// Answers: code 10000 with TRADE_SUCCESS or TRADE_FINISHED is paid; TRADE_CLOSED with
// send_pay_date is paid then refunded in full, without it closed unpaid; WAIT_BUYER_PAY, code
// 10003 and 40004 ACQ.TRADE_NOT_EXIST (a page, wap or app trade exists at Alipay only once the
// buyer logged in or scanned) are not paid yet.
//
// Errors: ErrQueryFailed for transport failures, a status other than 200, and Alipay's other
// codes (signed, but they say nothing about the trade); ErrBadSignature for an unsigned response
// (error_response, or no sign) or one whose sign does not verify with the configured key;
// ErrMalformed for a body that does not parse, or an answer about another out_trade_no.
func (q *AlipayQuerier) QueryTrade(ctx context.Context, tq TradeQuery) (TradeAnswer, error) {
	if !payment.ValidTradeNo(tq.TradeNo) {
		return TradeAnswer{}, fmt.Errorf("%w: alipay: the trade_no to ask about is not 1-%d of [A-Za-z0-9_-]", ErrMalformed, payment.MaxTradeNo)
	}
	var got capture
	rsp, err := q.client.TradeQuery(withCapture(ctx, &got), alipay.TradeQuery{OutTradeNo: tq.TradeNo})
	switch {
	case got.status == 0:
		return TradeAnswer{}, fmt.Errorf("%w: alipay: %w", ErrQueryFailed, err)
	case got.status != http.StatusOK:
		return TradeAnswer{}, fmt.Errorf("%w: alipay: HTTP %d", ErrQueryFailed, got.status)
	case err != nil:
		return TradeAnswer{}, alipaySDKError(err)
	}
	return alipayAnswer(tq.TradeNo, rsp, got.body)
}

// alipaySDKError maps what the SDK returns for a 200 response it did not accept. Its errors are
// not one type; none of their text is kept, as it may quote the response.
func alipaySDKError(err error) error {
	var unsigned *alipay.Error // the SDK's rendering of an unsigned error_response or node
	var notBase64 base64.CorruptInputError
	switch {
	case errors.As(err, &unsigned):
		return fmt.Errorf("%w: alipay: response not signed (error_response, or no sign)", ErrBadSignature)
	case errors.Is(err, rsa.ErrVerification):
		return fmt.Errorf("%w: alipay: response sign does not match", ErrBadSignature)
	case errors.As(err, &notBase64): // sign, or a node in the encrypted form we never ask for
		return fmt.Errorf("%w: alipay: response sign (or encrypted node) is not base64", ErrBadSignature)
	case errors.Is(err, alipay.ErrAliPublicKeyNotFound):
		return fmt.Errorf("%w: alipay: response names an alipay_cert_sn we hold no key for", ErrBadSignature)
	default:
		return fmt.Errorf("%w: alipay: response is not the alipay.trade.query JSON", ErrMalformed)
	}
}

// alipayAnswer maps a response whose signature the SDK verified. body is the whole response, as
// received: it is checked to read alike everywhere, and kept as each event's Raw.
func alipayAnswer(asked string, rsp *alipay.TradeQueryRsp, body []byte) (TradeAnswer, error) {
	if err := strictJSON("alipay", "query response", body); err != nil {
		return TradeAnswer{}, err
	}
	if rsp == nil {
		return TradeAnswer{}, fmt.Errorf("%w: alipay: alipay_trade_query_response is null", ErrMalformed)
	}
	if rsp.OutTradeNo != "" && rsp.OutTradeNo != asked {
		return TradeAnswer{}, fmt.Errorf("%w: alipay: the answer is about another out_trade_no", ErrMalformed)
	}
	switch {
	case rsp.Code == alipay.CodeOrderSuccessPayInProcess:
		return TradeAnswer{State: TradeNotPaid, Status: "10003"}, nil
	case rsp.Code == alipay.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST":
		return TradeAnswer{State: TradeNotPaid, Status: rsp.SubCode}, nil
	case rsp.Code != alipay.CodeSuccess:
		return TradeAnswer{}, fmt.Errorf("%w: alipay: code %s, sub_code %s", ErrQueryFailed, quote(string(rsp.Code)), quote(rsp.SubCode))
	case rsp.OutTradeNo == "":
		return TradeAnswer{}, fmt.Errorf("%w: alipay: out_trade_no missing", ErrMalformed)
	}

	status := string(rsp.TradeStatus)
	switch status {
	case "WAIT_BUYER_PAY":
		return TradeAnswer{State: TradeNotPaid, Status: status}, nil
	case "TRADE_SUCCESS", "TRADE_FINISHED", "TRADE_CLOSED":
	default:
		return TradeAnswer{}, fmt.Errorf("%w: alipay: trade_status %s", ErrMalformed, quote(status))
	}
	ev := payment.Event{
		Channel:      "alipay",
		TradeNo:      asked,
		ChannelTxnID: rsp.TradeNo,
		Status:       status,
		Currency:     "CNY", // total_amount is yuan, always
		Subject:      rsp.Subject,
		Raw:          bytes.Clone(body),
	}
	paid := status != "TRADE_CLOSED" || rsp.SendPayDate != ""
	if paid || rsp.TotalAmount != "" { // a trade closed unpaid may leave it out
		fen, err := ParseYuan(rsp.TotalAmount)
		if err != nil {
			return TradeAnswer{}, fmt.Errorf("alipay: total_amount: %w", err)
		}
		ev.AmountFen = fen
	}
	if rsp.SendPayDate != "" {
		at, err := time.ParseInLocation(alipayTimeLayout, rsp.SendPayDate, time.FixedZone("CST", 8*3600))
		if err != nil {
			return TradeAnswer{}, fmt.Errorf("%w: alipay: send_pay_date is not %q", ErrMalformed, alipayTimeLayout)
		}
		ev.PaidAt = at
	}

	var answer TradeAnswer
	switch {
	case status == "TRADE_SUCCESS" || status == "TRADE_FINISHED":
		if ev.ChannelTxnID == "" {
			return TradeAnswer{}, fmt.Errorf("%w: alipay: trade_no missing", ErrMalformed)
		}
		ev.Kind, ev.NotifyID = payment.KindPaid, QueryNotifyID(ev.ChannelTxnID)
		answer = TradeAnswer{State: TradePaid, Events: []payment.Event{ev}}
	case paid:
		// TRADE_CLOSED after a payment: refunded in full. The answer names no refund: it states
		// the payment's running total (RefundIsTotal), which the refund ledger counts once with
		// whatever else states the same refunds.
		if ev.ChannelTxnID == "" {
			return TradeAnswer{}, fmt.Errorf("%w: alipay: trade_no missing", ErrMalformed)
		}
		payEv := ev
		payEv.Kind, payEv.NotifyID = payment.KindPaid, QueryNotifyID(ev.ChannelTxnID)
		refund := ev
		refund.Kind, refund.NotifyID = payment.KindRefund, "query:refund:"+ev.ChannelTxnID
		refund.RefundFen, refund.RefundIsTotal = ev.AmountFen, true
		answer = TradeAnswer{State: TradeRefunded, Events: []payment.Event{payEv, refund}}
	default: // TRADE_CLOSED, never paid
		ev.Kind, ev.NotifyID = payment.KindClosed, "query:close:"+asked
		answer = TradeAnswer{State: TradeClosed, Events: []payment.Event{ev}}
	}
	answer.Status = status
	for i, ev := range answer.Events {
		var err error
		if answer.Events[i], err = checkEvent(ev); err != nil {
			return TradeAnswer{}, err
		}
	}
	return answer, nil
}

// queryResponseLimit bounds a query response read into memory; the answers are a few kB.
const queryResponseLimit = 1 << 20

// capture is what capturingTransport saw of one request's response.
type capture struct {
	status   int
	header   http.Header
	body     []byte
	verified bool // set by a response validator that checked the signature over body
}

type captureKey struct{}

func withCapture(ctx context.Context, c *capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

func captureOf(ctx context.Context) *capture {
	c, _ := ctx.Value(captureKey{}).(*capture)
	return c
}

// capturingTransport reads each response body whole (at most queryResponseLimit bytes) before the
// SDK does, and records status, headers and body in the capture the request's context carries:
// the bytes an SDK verified are then the very bytes paygw parses and journals. With rewrite set,
// it sends the request to rewrite's scheme and host instead (for SDKs that hard-code the API host;
// the path and query are left alone).
type capturingTransport struct {
	base    http.RoundTripper
	rewrite *url.URL
}

func (t capturingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.rewrite != nil {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = t.rewrite.Scheme, t.rewrite.Host, ""
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, queryResponseLimit+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the response: %w", err)
	case len(body) > queryResponseLimit:
		return nil, fmt.Errorf("response longer than %d bytes", queryResponseLimit)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if c := captureOf(req.Context()); c != nil {
		c.status, c.header, c.body = resp.StatusCode, resp.Header, body
	}
	return resp, nil
}

// capturingClient is hc (timeout, redirects, jar) sending through a capturingTransport.
func capturingClient(hc *http.Client, rewrite *url.URL) *http.Client {
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = capturingTransport{base: base, rewrite: rewrite}
	return &c
}

// checkBaseURL accepts an absolute http(s) URL; withPath also admits a path (a gateway's
// /gateway.do), otherwise only scheme and host may be given.
func checkBaseURL(s string, withPath bool) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("empty")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil:
		return errors.New("not an absolute http(s) URL without credentials")
	case !withPath && (u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != ""):
		return errors.New("must be scheme and host only: the API paths are fixed, and signed as sent")
	}
	return nil
}

// readPrivateKeyFile reads an RSA private key file (PKCS#1 "RSA PRIVATE KEY" or PKCS#8 "PRIVATE
// KEY" PEM) and returns its PEM text once it parsed as a key of at least queryMinRSABits. Errors
// never include the file's contents.
func readPrivateKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- the operator's own configuration names it
	if err != nil {
		return nil, err
	}
	_, err = parseRSAPrivateKey(b)
	return b, err
}

func parseRSAPrivateKey(b []byte) (*rsa.PrivateKey, error) {
	block, rest := pem.Decode(b)
	switch {
	case block == nil:
		return nil, errors.New("not PEM")
	case len(bytes.TrimSpace(rest)) != 0:
		return nil, errors.New("data after the PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM type %q, want PRIVATE KEY or RSA PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, errors.New("the PEM block is not a valid private key")
	}
	rk, ok := key.(*rsa.PrivateKey)
	switch {
	case !ok:
		return nil, fmt.Errorf("a %T key, want RSA", key)
	case rk.N.BitLen() < queryMinRSABits:
		return nil, fmt.Errorf("%d-bit key, want at least %d", rk.N.BitLen(), queryMinRSABits)
	}
	return rk, nil
}
