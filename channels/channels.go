// Package channels is the shape every payment channel shares: the interfaces the gateway uses
// (Channel verifies what a channel sends and renders its replies, Querier asks it about a trade,
// BillDownloader fetches its daily bill), the errors they return, the checks and key parsing they
// share, and the downloaded BillFile. Each channel is a package of its own under channels/
// (alipay, wechatpay, stripe, unionpay); channels/all builds them from the configuration.
package channels

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paygw/paygw/payment"
)

// Errors returned by the channels, wrapped with a short reason. The reasons name fields, never
// values of keys or signatures. All of them mean "refuse this message"; none means "retry".
var (
	ErrMalformed    = errors.New("channels: malformed")     // not parseable, or a field missing or invalid
	ErrBadSignature = errors.New("channels: bad signature") // missing, undecodable or not matching
	ErrNotOurs      = errors.New("channels: not ours")      // app or merchant id is not the configured one
	ErrUnsupported  = errors.New("channels: unsupported")   // e.g. an unknown sign_type or charset

	// ErrStale means a notification's timestamp is outside the channel's clock window: too old (a
	// replay, or a delivery held back) or too far in the future. Like the other errors, refuse it.
	ErrStale = errors.New("channels: stale")

	// ErrProbe is a channel's deliberate test of our verification (WeChat's WECHATPAY/SIGNTEST/
	// signatures): refused like any bad signature, but expected, so it says nothing about our keys.
	ErrProbe = fmt.Errorf("%w: signature probe", ErrBadSignature)
)

// The widths of the columns an event's identifiers are stored in (notify_journal.notify_id,
// channel_txn_id, refund.refund_id and idempotent_record.idem_key; orders.trade_no is
// payment.MaxTradeNo). A longer id is refused when the notification is verified: stored, it would
// fail its insert on every redelivery until the channel gives up.
const (
	MaxNotifyID     = 128
	MaxChannelTxnID = 128
	MaxRefundID     = 128
)

// CheckEvent is the one width and shape check every Verify passes its event through. Status and
// Subject are informational and clipped by the repository instead.
func CheckEvent(ev payment.Event) (payment.Event, error) {
	bad := func(format string, args ...any) (payment.Event, error) {
		return payment.Event{}, fmt.Errorf("%w: %s: "+format, append([]any{ErrMalformed, ev.Channel}, args...)...)
	}
	switch {
	case ev.NotifyID == "" || len(ev.NotifyID) > MaxNotifyID:
		return bad("notification id missing or longer than %d bytes", MaxNotifyID)
	case ev.TradeNo != "" && !payment.ValidTradeNo(ev.TradeNo):
		return bad("merchant order number not 1-%d of [A-Za-z0-9_-]", payment.MaxTradeNo)
	case ev.TradeNo == "" && ev.Kind != payment.KindRefund && ev.Kind != payment.KindOther:
		return bad("merchant order number missing")
	case len(ev.ChannelTxnID) > MaxChannelTxnID:
		return bad("transaction id longer than %d bytes", MaxChannelTxnID)
	case ev.Kind == payment.KindRefund && ev.RefundID == "" && !ev.RefundIsTotal:
		return bad("refund id missing on a refund that states its own amount")
	case len(ev.RefundID) > MaxRefundID:
		return bad("refund id longer than %d bytes", MaxRefundID)
	case ev.RefundBillKey != "":
		return bad("a bill line's key on a channel's message")
	case (ev.Kind == payment.KindPaid || ev.Kind == payment.KindRefund) && ev.ChannelTxnID == "":
		return bad("transaction id missing")
	case ev.Kind != payment.KindRefund && (ev.RefundID != "" || ev.RefundFen != 0 || ev.RefundIsTotal):
		return bad("refund fields on a %s event", ev.Kind)
	case ev.AmountFen < 0 || ev.RefundFen < 0:
		return bad("negative amount")
	case ev.Currency != "" && !isCurrencyCode(ev.Currency):
		return bad("currency %s is not 3 upper-case letters", Quote(ev.Currency))
	case ev.Currency == "" && ev.Kind != payment.KindOther:
		return bad("currency missing")
	}
	return ev, nil
}

func isCurrencyCode(s string) bool {
	return len(s) == 3 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// Channel is the shape every channel shares: verify raw bytes and headers into an event, render
// the three replies in the channel's own words, say how long applying an event may take, and which
// currencies it takes.
type Channel interface {
	Currencies
	Name() string
	Verify(body []byte, header http.Header, now time.Time) (payment.Event, error)
	Reply(r payment.Reply) Response
	// ApplyTimeout bounds the work on one verified notification, well inside the time the channel
	// waits for our reply: past it we answer "retry" rather than let the channel give up on us
	// while we are still working.
	ApplyTimeout() time.Duration
}

// MaxFen bounds any single amount (one billion yuan): larger is a parsing accident, not a trade.
const MaxFen = 100_000_000_000

// SortedPairs is the string the form-signing channels (Alipay, UnionPay) sign: the parameters
// keep accepts, sorted by key in byte order, as k=v joined by &, values as received (decoded, not
// escaped). It is built from the received map, so fields we do not know count too.
func SortedPairs(params map[string]string, keep func(k, v string) bool) string {
	keys := make([]string, 0, len(params))
	for k, v := range params {
		if keep(k, v) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)

	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params[k])
	}
	return b.String()
}

// Response is what the HTTP layer writes back to the channel, as is.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

// ParseForm reads an x-www-form-urlencoded body into a map, refusing what a form encoder would
// never produce: an empty body, duplicate or empty names, bad escapes.
func ParseForm(channel string, body []byte) (map[string]string, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: %s: empty body", ErrMalformed, channel)
	}
	// The url package's error quotes a piece of the input; the reason alone is enough here.
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: body is not a valid form", ErrMalformed, channel)
	}
	params := make(map[string]string, len(values))
	for k, vs := range values {
		switch {
		case k == "":
			return nil, fmt.Errorf("%w: %s: parameter without a name", ErrMalformed, channel)
		case len(vs) != 1:
			return nil, fmt.Errorf("%w: %s: duplicate parameter %s", ErrMalformed, channel, Quote(k))
		}
		params[k] = vs[0]
	}
	return params, nil
}

// CheckUTF8 refuses parameters whose names or values are not UTF-8.
func CheckUTF8(channel string, params map[string]string) error {
	for k, v := range params {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s: parameter %s is not UTF-8", ErrMalformed, channel, Quote(k))
		}
	}
	return nil
}

// AllDigits reports whether s is non-empty ASCII digits.
func AllDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// RequiredField is params[key], refused as ErrMalformed when it is missing or longer than maxLen.
func RequiredField(channel string, params map[string]string, key string, maxLen int) (string, error) {
	v := params[key]
	switch {
	case v == "":
		return "", fmt.Errorf("%w: %s: %s missing", ErrMalformed, channel, key)
	case len(v) > maxLen:
		return "", fmt.Errorf("%w: %s: %s longer than %d bytes", ErrMalformed, channel, key, maxLen)
	}
	return v, nil
}

// EqualConstantTime compares a secret or signature without leaking where it differs.
func EqualConstantTime(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Quote renders untrusted text for an error message, cut short so a hostile body cannot flood
// the logs.
func Quote(s string) string {
	const max = 32
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// maxJSONDepth bounds the nesting StrictJSON walks; the channels' events nest a handful deep.
const maxJSONDepth = 64

// StrictJSON refuses a JSON body two readers could read differently: invalid UTF-8, which
// encoding/json silently turns into U+FFFD, and an object key given twice, of which encoding/json
// keeps the last and other readers the first. A signature proves who sent the bytes, not that
// everyone reads them alike.
func StrictJSON(channel, what string, body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: %s: %s is not UTF-8", ErrMalformed, channel, what)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := strictValue(dec, 0); err != nil {
		return fmt.Errorf("%w: %s: %s: %s", ErrMalformed, channel, what, err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %s: %s: data after the JSON value", ErrMalformed, channel, what)
	}
	return nil
}

// errJSONSyntax keeps the decoder's messages, which Quote input, out of our errors.
var errJSONSyntax = errors.New("not one well-formed JSON value")

func strictValue(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return errJSONSyntax
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return errJSONSyntax
			}
			key, _ := tok.(string) // the decoder accepts only strings as keys
			if seen[key] {
				return fmt.Errorf("duplicate key %s", Quote(key))
			}
			seen[key] = true
			if err := strictValue(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := strictValue(dec, depth+1); err != nil {
				return err
			}
		}
	default:
		return errJSONSyntax
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errJSONSyntax
	}
	return nil
}
