// Package alipay is everything paygw does with Alipay: it verifies the asynchronous trade
// notifications (RSA2, or legacy RSA, over the sorted parameters), asks alipay.trade.query about a
// trade, and downloads the daily trade bill, through the smartwalle/alipay SDK.
package alipay

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- Alipay's legacy sign_type RSA is SHA1withRSA by protocol; RSA2 is preferred
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/bills"
)

// Channel verifies Alipay's asynchronous trade notifications (public-key mode) and renders the
// replies Alipay expects.
type Channel struct {
	appID    string
	sellerID string // "" = not checked
	key      *rsa.PublicKey
}

// New returns a verifier for notifications to appID, signed with Alipay's public key.
// sellerID is checked when not empty. A nil key is a wiring bug and panics here, not per request.
func New(appID, sellerID string, key *rsa.PublicKey) *Channel {
	if key == nil {
		panic("channels: NewAlipay: nil public key")
	}
	return &Channel{appID: appID, sellerID: sellerID, key: key}
}

// Name is the channel name stored with every event.
func (a *Channel) Name() string { return "alipay" }

// alipayTimeLayout is how Alipay writes times, in Asia/Shanghai.
const alipayTimeLayout = "2006-01-02 15:04:05"

// Verify checks the form body of an Alipay notification and maps it to an event. header and now
// are unused: Alipay signs the body alone and sends no timestamp to bound.
//
// Alipay signs the parameters in the charset the notification names (utf-8, gbk or gb2312), so
// the signature is checked over the decoded bytes as sent, and only then are the values turned
// into UTF-8 for the event.
//
// Errors: channels.ErrMalformed for an unparseable body or a missing or invalid field, channels.ErrUnsupported for
// an unknown charset or a sign_type other than RSA2/RSA, channels.ErrBadSignature when sign is missing or
// does not verify, channels.ErrNotOurs when app_id or (if configured) seller_id differ. Identity and
// fields are only looked at once the signature holds.
func (a *Channel) Verify(body []byte, header http.Header, now time.Time) (payment.Event, error) {
	params, charset, err := parseAlipayForm(body)
	if err != nil {
		return payment.Event{}, err
	}
	if err := a.checkSignature(params); err != nil {
		return payment.Event{}, err
	}
	if params, err = alipayUTF8(params, charset); err != nil {
		return payment.Event{}, err
	}
	if !channels.EqualConstantTime(params["app_id"], a.appID) {
		return payment.Event{}, fmt.Errorf("%w: alipay: app_id differs from ours", channels.ErrNotOurs)
	}
	if a.sellerID != "" && !channels.EqualConstantTime(params["seller_id"], a.sellerID) {
		return payment.Event{}, fmt.Errorf("%w: alipay: seller_id differs from ours", channels.ErrNotOurs)
	}
	ev, err := alipayEvent(params, body)
	if err != nil {
		return payment.Event{}, err
	}
	return channels.CheckEvent(ev)
}

// ApplyTimeout is 8 s: Alipay documents no reply timeout; 8 s, as for UnionPay's documented 10 s,
// answers "retry" before a caller's usual timeout would cut us off.
func (a *Channel) ApplyTimeout() time.Duration { return 8 * time.Second }

// AcceptsCurrency refuses every currency but CNY, the one paygw takes through this channel
// (channels.CNYOnly).
func (a *Channel) AcceptsCurrency(code string) error { return channels.CNYOnly(a.Name(), code) }

// alipayCharsets are the charsets Alipay names in charset, lower case; nil is UTF-8. GB2312 text
// is GBK text (GBK extends it), so one decoder reads both.
var alipayCharsets = map[string]encoding.Encoding{
	"":       nil,
	"utf-8":  nil,
	"gbk":    simplifiedchinese.GBK,
	"gb2312": simplifiedchinese.GBK,
}

// parseAlipayForm reads the form body into parameters holding the bytes as sent, and returns the
// charset they are in (nil: UTF-8, checked here). charset is checked first, so that a notification
// in an unknown charset says why it is refused.
func parseAlipayForm(body []byte) (map[string]string, encoding.Encoding, error) {
	params, err := channels.ParseForm("alipay", body)
	if err != nil {
		return nil, nil, err
	}
	cs := params["charset"]
	charset, ok := alipayCharsets[strings.ToLower(cs)]
	if !ok {
		return nil, nil, fmt.Errorf("%w: alipay: charset %s", channels.ErrUnsupported, channels.Quote(cs))
	}
	if charset == nil {
		if err := channels.CheckUTF8("alipay", params); err != nil {
			return nil, nil, err
		}
	}
	return params, charset, nil
}

// alipayUTF8 converts verified parameters from charset to UTF-8 (nil: they are UTF-8 already).
// Bytes that are not GBK become U+FFFD: the identifiers that matter are ASCII and checked later.
func alipayUTF8(params map[string]string, charset encoding.Encoding) (map[string]string, error) {
	if charset == nil {
		return params, nil
	}
	dec := charset.NewDecoder()
	out := make(map[string]string, len(params))
	for k, v := range params {
		uk, err := dec.String(k)
		if err != nil {
			return nil, fmt.Errorf("%w: alipay: a parameter name is not in its charset", channels.ErrMalformed)
		}
		uv, err := dec.String(v)
		if err != nil {
			return nil, fmt.Errorf("%w: alipay: parameter %s is not in its charset", channels.ErrMalformed, channels.Quote(uk))
		}
		if _, dup := out[uk]; dup {
			return nil, fmt.Errorf("%w: alipay: duplicate parameter %s", channels.ErrMalformed, channels.Quote(uk))
		}
		out[uk] = uv
	}
	return out, nil
}

func (a *Channel) checkSignature(params map[string]string) error {
	sign := params["sign"]
	if sign == "" {
		return fmt.Errorf("%w: alipay: sign missing", channels.ErrBadSignature)
	}

	msg := []byte(alipaySignedString(params))
	var hash crypto.Hash
	var digest []byte
	switch st := params["sign_type"]; st {
	case "RSA2":
		sum := sha256.Sum256(msg)
		hash, digest = crypto.SHA256, sum[:]
	case "RSA": // legacy SHA1withRSA, still sent to old applications
		sum := sha1.Sum(msg) // #nosec G401 -- the legacy sign_type RSA, as Alipay defines it
		hash, digest = crypto.SHA1, sum[:]
	default:
		return fmt.Errorf("%w: alipay: sign_type %s", channels.ErrUnsupported, channels.Quote(st))
	}

	sig, err := base64.StdEncoding.DecodeString(sign)
	if err != nil {
		return fmt.Errorf("%w: alipay: sign is not base64", channels.ErrBadSignature)
	}
	if err := rsa.VerifyPKCS1v15(a.key, hash, digest, sig); err != nil {
		return fmt.Errorf("%w: alipay: sign does not match", channels.ErrBadSignature)
	}
	return nil
}

// alipaySignedString is what Alipay signs: every received parameter but sign and sign_type,
// empty values left out, sorted by key in byte order, as k=v joined by &, values decoded.
// It is built from the received map, so fields we do not know (fund_bill_list, ...) count too.
func alipaySignedString(params map[string]string) string {
	return channels.SortedPairs(params, func(k, v string) bool { return k != "sign" && k != "sign_type" && v != "" })
}

// alipayEvent maps verified parameters, in UTF-8, to an event. Widths are channels.CheckEvent's.
func alipayEvent(params map[string]string, body []byte) (payment.Event, error) {
	ev := payment.Event{
		Channel:  "alipay",
		Currency: "CNY", // Alipay's total_amount is always in yuan
		Subject:  params["subject"],
		Raw:      bytes.Clone(body),
	}

	if ev.NotifyID = params["notify_id"]; ev.NotifyID == "" {
		return payment.Event{}, fmt.Errorf("%w: alipay: notify_id missing", channels.ErrMalformed)
	}
	if ev.ChannelTxnID = params["trade_no"]; ev.ChannelTxnID == "" {
		return payment.Event{}, fmt.Errorf("%w: alipay: trade_no missing", channels.ErrMalformed)
	}
	ev.TradeNo = params["out_trade_no"]
	if !payment.ValidTradeNo(ev.TradeNo) {
		return payment.Event{}, fmt.Errorf("%w: alipay: out_trade_no missing or not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	var err error
	if ev.AmountFen, err = ParseYuan(params["total_amount"]); err != nil {
		return payment.Event{}, fmt.Errorf("alipay: total_amount: %w", err)
	}
	if v := params["gmt_payment"]; v != "" {
		// Fixed UTC+8 (China keeps no DST), so no tzdata is needed.
		if ev.PaidAt, err = time.ParseInLocation(alipayTimeLayout, v, bills.ChinaTime); err != nil {
			return payment.Event{}, fmt.Errorf("%w: alipay: gmt_payment is not %q", channels.ErrMalformed, alipayTimeLayout)
		}
	}

	ev.Status = params["trade_status"]
	switch ev.Status {
	case "TRADE_SUCCESS", "TRADE_FINISHED":
		// A partial refund re-sends the trade's status with refund_fee: not a second payment.
		ev.Kind = payment.KindPaid
		err = alipayRefund(&ev, params, false)
	case "TRADE_CLOSED":
		// Closed covers both "never paid" and "paid, then refunded in full"; the latter carries
		// the refund's fields and is a refund, not a close of an unpaid trade.
		ev.Kind = payment.KindClosed
		err = alipayRefund(&ev, params, true)
	case "WAIT_BUYER_PAY":
		ev.Kind = payment.KindPending
	default:
		return payment.Event{}, fmt.Errorf("%w: alipay: trade_status %s", channels.ErrMalformed, channels.Quote(ev.Status))
	}
	if err != nil {
		return payment.Event{}, err
	}
	return ev, nil
}

// alipayRefund turns ev into a refund when the notification carries one. refund_fee is the
// trade's total refunded so far (RefundIsTotal): the refund ledger raises the payment's total to
// it, so whichever notification arrives, in whatever order and how often, nothing is added twice. A zero refund_fee is no refund:
// treating it as one would acknowledge a payment without applying it. A TRADE_CLOSED with
// gmt_refund but no refund_fee is the whole total_amount given back.
func alipayRefund(ev *payment.Event, params map[string]string, closed bool) error {
	var fen int64
	if rf := params["refund_fee"]; rf != "" {
		var err error
		if fen, err = ParseYuan(rf); err != nil {
			return fmt.Errorf("alipay: refund_fee: %w", err)
		}
	}
	gmt := params["gmt_refund"]
	if fen == 0 && closed && gmt != "" {
		fen = ev.AmountFen
	}
	if fen == 0 {
		return nil
	}
	// out_biz_no names the refund that caused this notice (the bill's 退款批次号/请求号); without
	// it the notice states only the payment's running total.
	ev.Kind, ev.RefundFen, ev.RefundIsTotal, ev.RefundID = payment.KindRefund, fen, true, params["out_biz_no"]
	return nil
}

// Reply renders the answer Alipay understands: exactly "success" stops its retries, anything else
// ("fail") makes it deliver again. A refusal is still answered 4xx so our own logs tell it apart.
func (a *Channel) Reply(r payment.Reply) channels.Response {
	const contentType = "text/plain; charset=utf-8"
	switch r {
	case payment.ReplySuccess:
		return channels.Response{Status: http.StatusOK, ContentType: contentType, Body: []byte("success")}
	case payment.ReplyRefuse:
		return channels.Response{Status: http.StatusBadRequest, ContentType: contentType, Body: []byte("fail")}
	default: // ReplyRetry, and anything unknown: a redelivery is never lost money
		return channels.Response{Status: http.StatusServiceUnavailable, ContentType: contentType, Body: []byte("fail")}
	}
}

// ParseYuan parses a yuan amount as Alipay writes it ("88.88", "1", "0.5") into fen, exactly and
// without floating point. It accepts only ASCII digits, without sign or leading zeros (bar a lone
// "0"), with an optional '.' followed by one or two digits; "1." and ".5" are refused. Errors wrap
// channels.ErrMalformed.
func ParseYuan(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	switch {
	case !channels.AllDigits(whole):
		return 0, fmt.Errorf("%w: amount %s: want digits before the point", channels.ErrMalformed, channels.Quote(s))
	case len(whole) > 1 && whole[0] == '0':
		return 0, fmt.Errorf("%w: amount %s: leading zero", channels.ErrMalformed, channels.Quote(s))
	case hasDot && (!channels.AllDigits(frac) || len(frac) > 2):
		return 0, fmt.Errorf("%w: amount %s: want one or two digits after the point", channels.ErrMalformed, channels.Quote(s))
	case len(whole) > 12: // well past channels.MaxFen, and short enough that the sum below cannot overflow
		return 0, fmt.Errorf("%w: amount %s: too large", channels.ErrMalformed, channels.Quote(s))
	}

	var fen int64
	for _, c := range whole + (frac + "00")[:2] {
		fen = fen*10 + int64(c-'0')
	}
	if fen > channels.MaxFen {
		return 0, fmt.Errorf("%w: amount %s: too large", channels.ErrMalformed, channels.Quote(s))
	}
	return fen, nil
}
