package channels

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/paygw/paygw/payment"
)

// Outbound trade queries: paygw asks a channel about an order whose notification never came.
// Every answer is read from a response whose signature verified (Alipay, WeChat Pay, UnionPay)
// or that came over the configured Stripe API, and becomes the same channel-neutral events a
// notification would: same channel transaction id, so a query and a late notification apply once
// between them.

// ErrQueryFailed means the channel could not be asked (transport, HTTP status, the channel's own
// error). Nothing is known; ask again later. Unverified or unreadable responses are
// ErrBadSignature and ErrMalformed, as for notifications.
var ErrQueryFailed = errors.New("channels: query failed")

// URLCause is err's cause when err is, or wraps, the *url.Error an http.Client returns, and err
// otherwise: the URL that error names may carry a download token, or be an SDK's default host
// rather than the one asked, so it stays out of the error paygw returns.
func URLCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// TradeQuery is what paygw knows of an order when it asks a channel about it.
type TradeQuery struct {
	TradeNo string
	// ChannelRef is what the payment attempt recorded: Stripe's PaymentIntent id, UnionPay's
	// txnTime (yyyyMMddHHmmss, Beijing time) the order was sent with; "" when none.
	ChannelRef string
	// OrderTime is when the order was created, for channels that need a time and got no ref.
	OrderTime time.Time
}

// TradeState is a channel's answer about a trade, in paygw's words.
type TradeState string

const (
	// TradeNotPaid: not created at the channel yet, waiting for the buyer, or still processing.
	// Nothing changes; ask again later.
	TradeNotPaid TradeState = "NOT_PAID"
	// TradePaid: paid. Events holds the payment.
	TradePaid TradeState = "PAID"
	// TradeRefunded: paid, then refunded. Events holds the payment, then the refund when the
	// channel states its amount.
	TradeRefunded TradeState = "PAID_REFUNDED"
	// TradeClosed: closed or revoked without a payment. Events holds a KindClosed event.
	TradeClosed TradeState = "CLOSED"
)

// TradeAnswer is a verified answer.
type TradeAnswer struct {
	State  TradeState
	Status string // the channel's own words (TRADE_SUCCESS, NOTPAY, origRespCode 03, ...), for people
	// Events are applied in order through the one apply path. Each is what the matching
	// notification would carry, with NotifyID "query:<channel txn id>" (a refund's
	// "query:refund:<refund id>", a close's "query:close:<trade_no>", Stripe's
	// "query:close:<PaymentIntent id>") and Raw the response body. A close event closes the
	// attempt it answers; apply closes the order once none of its attempts is open.
	Events []payment.Event
}

// Querier asks one channel about trades.
type Querier interface {
	Name() string
	// QueryTrade returns a verified answer, or ErrQueryFailed, ErrBadSignature or ErrMalformed
	// (wrapped, with reasons that carry no key material). It honours ctx.
	QueryTrade(ctx context.Context, q TradeQuery) (TradeAnswer, error)
}

// QueryNotifyID is the notify_id of a payment learnt by a query: the journal tells it apart from
// a notification's, and repeated queries of one payment journal it once.
func QueryNotifyID(txnID string) string { return "query:" + txnID }

// ErrNoCredentials means the channel verifies notifications but lacks the merchant-side key its queries
// need; the error names the missing configuration key. Its queries are skipped.
var ErrNoCredentials = errors.New("channels: outbound credentials missing")
