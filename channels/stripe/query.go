package stripe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// stripeQuerier asks Stripe about a trade's PaymentIntents through stripe-go's client. Stripe's
// answers are not signed: they are trusted because they come over the configured API with our key.
type stripeQuerier struct {
	sc *stripe.Client
}

var _ channels.Querier = (*stripeQuerier)(nil)

// Bounds on what one query reads: a trade has one PaymentIntent, or a few when the buyer retried.
const (
	stripeMaxIntents  = 100     // PaymentIntents of one trade_no; more is not an answer we can trust
	stripeMaxResponse = 4 << 20 // bytes of one response body
)

// NewQuerier returns the Stripe querier for c, calling the API at c.APIBaseURL over hc
// (nil: a client with a 30 s timeout) with stripe-go's retries off (the reconciliation schedule
// retries) and its logging off (paygw logs the errors it returns). Without channels.stripe.api_key
// the error wraps channels.ErrNoCredentials. Errors name configuration keys, never the key itself.
func NewQuerier(c config.Stripe, hc *http.Client) (channels.Querier, error) {
	if c.APIKey == "" {
		return nil, fmt.Errorf("%w: stripe: channels.stripe.api_key is not set", channels.ErrNoCredentials)
	}
	if !strings.HasPrefix(c.APIKey, "sk_") && !strings.HasPrefix(c.APIKey, "rk_") {
		return nil, errors.New("channels: stripe: channels.stripe.api_key: must start with sk_ or rk_")
	}
	u, err := url.Parse(c.APIBaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("channels: stripe: channels.stripe.api_base_url: must be an http(s) URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, errors.New("channels: stripe: channels.stripe.api_base_url: must be scheme, host and an optional path, without user, query or fragment")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if hc != nil {
		copied := *hc
		client = &copied
	}
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	// stripe-go routes each response by its request's path, and refuses any that does not start
	// with /v1 or /v2 ("unknown path prefix"): the backend is given the host alone, and the
	// transport puts api_base_url's path (an egress proxy's /stripe) in front of every request.
	client.Transport = stripeTransport{next: next,
		prefix: strings.TrimRight(u.Path, "/"), rawPrefix: strings.TrimRight(u.EscapedPath(), "/")}

	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(u.Scheme + "://" + u.Host),
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        client,
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return &stripeQuerier{sc: stripe.NewClient(c.APIKey, stripe.WithBackends(backends))}, nil
}

func (s *stripeQuerier) Name() string { return "stripe" }

// QueryTrade asks about q's PaymentIntents: the one q.ChannelRef names (pi_...), else every
// PaymentIntent whose metadata.trade_no is q.TradeNo (Stripe's search, which lags writes by up to
// a minute, up to an hour in outages). A named PaymentIntent that was canceled closes nothing by
// itself: the buyer may have paid the trade through another one, so the search is asked too
// before the answer is "closed". latest_charge is expanded in the same request, so a refund
// costs no extra call.
//
// The answer (see stripeAnswer): any succeeded PaymentIntent -> channels.TradePaid, or channels.TradeRefunded when
// a latest charge has amount_refunded; else any processing or requires_* -> channels.TradeNotPaid; else,
// when the PaymentIntent q.ChannelRef names is canceled -> channels.TradeClosed (a close of that
// PaymentIntent); otherwise channels.TradeNotPaid.
//
// How far the lagging search is trusted: it can show a payment (a succeeded PaymentIntent stays
// succeeded, so a late sight of it is still true) and it can keep a close from happening (an
// open or paid PaymentIntent found), but it never proves one. "Every PaymentIntent found is
// canceled" says nothing of one made within the lag, which may be the one the buyer paid; so a
// close rests on a PaymentIntent retrieved by id, which Stripe answers consistently, and closes
// only that PaymentIntent's attempt (apply closes the order once none of its attempts is open).
// A search alone that finds only canceled PaymentIntents answers channels.TradeNotPaid, and the attempt
// is asked again until it is closed another way or reconcile.query_max_age passes. What is left:
// a PaymentIntent made within the lag and never recorded as an attempt is not seen by the close;
// its payment notification (retried for three days) then applies as PAID_AFTER_CLOSE, and the
// day's balance transactions (strongly consistent) list it.
//
// Errors: channels.ErrQueryFailed when Stripe could not be asked or answered an error (transport, 401,
// 404, 429, 5xx); channels.ErrMalformed when a 2xx body does not decode, or names another trade.
func (s *stripeQuerier) QueryTrade(ctx context.Context, q channels.TradeQuery) (channels.TradeAnswer, error) {
	if !payment.ValidTradeNo(q.TradeNo) {
		return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: trade_no is not 1-%d of [A-Za-z0-9_-]", channels.ErrQueryFailed, payment.MaxTradeNo)
	}
	if q.ChannelRef == "" {
		intents, err := s.search(ctx, q.TradeNo)
		if err != nil {
			return channels.TradeAnswer{}, err
		}
		return stripeAnswer(q.TradeNo, "", intents)
	}

	if !strings.HasPrefix(q.ChannelRef, "pi_") || !validStripeID(q.ChannelRef) || len(q.ChannelRef) > channels.MaxChannelTxnID {
		return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: channel_ref is not a PaymentIntent id", channels.ErrQueryFailed)
	}
	pi, err := s.retrieve(ctx, q.ChannelRef)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	intents := []*stripe.PaymentIntent{pi}
	if pi.Status == stripe.PaymentIntentStatusCanceled && pi.Metadata["trade_no"] == q.TradeNo {
		more, err := s.search(ctx, q.TradeNo)
		if err != nil {
			return channels.TradeAnswer{}, err
		}
		intents = append(intents, more...)
	}
	return stripeAnswer(q.TradeNo, pi.ID, intents)
}

func (s *stripeQuerier) retrieve(ctx context.Context, id string) (_ *stripe.PaymentIntent, err error) {
	defer stripeRecover(&err)
	params := &stripe.PaymentIntentRetrieveParams{}
	params.AddExpand("latest_charge")
	ex := new(stripeExchange)
	pi, err := s.sc.V1PaymentIntents.Retrieve(context.WithValue(ctx, stripeExchangeKey{}, ex), id, params)
	if err != nil {
		return nil, stripeQueryError(ctx, err, ex, &stripe.PaymentIntent{})
	}
	return pi, nil
}

func (s *stripeQuerier) search(ctx context.Context, tradeNo string) (_ []*stripe.PaymentIntent, err error) {
	defer stripeRecover(&err)
	params := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{
		Query: stripeSearchQuery(tradeNo),
		Limit: stripe.Int64(100),
	}}
	params.AddExpand("data.latest_charge")
	ex := new(stripeExchange)
	var intents []*stripe.PaymentIntent
	for pi, err := range s.sc.V1PaymentIntents.Search(context.WithValue(ctx, stripeExchangeKey{}, ex), params) {
		if err != nil {
			return nil, stripeQueryError(ctx, err, ex, &stripe.PaymentIntentSearchResult{})
		}
		if len(intents) == stripeMaxIntents {
			return nil, fmt.Errorf("%w: stripe: more than %d PaymentIntents for one trade_no", channels.ErrQueryFailed, stripeMaxIntents)
		}
		intents = append(intents, pi)
	}
	return intents, nil
}

// stripeRecover turns a panic inside stripe-go into channels.ErrMalformed. stripe-go v82 panics on some
// bodies it cannot have expected (a search result whose data holds null dereferences it), and a
// response from the network must not take the process down.
func stripeRecover(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: stripe: stripe-go failed on the response", channels.ErrMalformed)
	}
}

// stripeSearchQuery is the search for one trade_no, quoted as Stripe's query language quotes
// strings. A trade_no is [A-Za-z0-9_-] already; the escaping keeps the query whole whatever it is.
func stripeSearchQuery(tradeNo string) string {
	escaped := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(tradeNo)
	return "metadata['trade_no']:'" + escaped + "'"
}

// stripeQueryError sorts a failed call: Stripe's own errors and transport failures are
// channels.ErrQueryFailed; a 2xx body stripe-go could not use is channels.ErrMalformed, with the reason it does
// not decode as want (the type stripe-go decoded it into). ex is the last exchange the transport
// saw (status 0: none). Stripe's messages are left out: one of them quotes part of the API key;
// so are stripe-go's own, which quote the body.
func stripeQueryError(ctx context.Context, err error, ex *stripeExchange, want any) error {
	var se *stripe.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: stripe: %w", channels.ErrQueryFailed, ctx.Err())
	case errors.Is(err, errStripeTooLarge):
		return fmt.Errorf("%w: stripe: response larger than %d bytes", channels.ErrMalformed, stripeMaxResponse)
	case errors.As(err, &se):
		words := strings.TrimSpace(stripeWord(string(se.Type)) + " " + stripeWord(string(se.Code)))
		return fmt.Errorf("%w: stripe: HTTP %d %s", channels.ErrQueryFailed, se.HTTPStatusCode, words)
	case ex.status >= 200 && ex.status < 300:
		return ex.undecodable(want)
	case ex.status != 0:
		return fmt.Errorf("%w: stripe: HTTP %d", channels.ErrQueryFailed, ex.status)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: stripe: %w", channels.ErrQueryFailed, ue.Err)
	}
	return fmt.Errorf("%w: stripe: request failed", channels.ErrQueryFailed)
}

// stripeWord keeps an error type or code (invalid_request_error, resource_missing) for the log,
// and drops anything else.
func stripeWord(s string) string {
	if len(s) > 64 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return ""
	}
	return s
}

// stripeAnswer maps the PaymentIntents found for tradeNo to an answer; byID is the one retrieved
// by id ("" when the search alone was asked), the only one whose cancellation can close (see
// QueryTrade). Every one must carry metadata.trade_no = tradeNo: the search asked for exactly
// that, and a retrieved one that names another trade is not about this order. Duplicates (the
// retrieved one found again by the search) count once.
//
// Paid: one payment event per succeeded PaymentIntent, oldest first (a second one is a duplicate
// payment for apply to flag), each followed by its refund when its latest charge has
// amount_refunded: a KindRefund of that running total (RefundIsTotal), keyed
// "query:refund:<pi>:<amount_refunded>" so that a later, larger refund is a new key while a
// repeat of the same total adds nothing.
//
// Closed: one KindClosed event naming the PaymentIntent byID, NotifyID "query:close:<pi>", so
// that the closes of two attempts of one trade (two PaymentIntents) are two events.
func stripeAnswer(tradeNo, byID string, intents []*stripe.PaymentIntent) (channels.TradeAnswer, error) {
	seen := make(map[string]bool, len(intents))
	var unique []*stripe.PaymentIntent
	for _, pi := range intents {
		switch {
		case pi == nil:
			return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: a PaymentIntent is null", channels.ErrMalformed)
		case !strings.HasPrefix(pi.ID, "pi_") || !validStripeID(pi.ID):
			return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: PaymentIntent id missing or not a pi_ id", channels.ErrMalformed)
		case pi.Metadata["trade_no"] != tradeNo:
			return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: %s: metadata.trade_no is not the trade asked about", channels.ErrMalformed, pi.ID)
		case seen[pi.ID]:
			continue
		}
		seen[pi.ID] = true
		unique = append(unique, pi)
	}
	slices.SortStableFunc(unique, func(a, b *stripe.PaymentIntent) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), strings.Compare(a.ID, b.ID))
	})

	var events []payment.Event
	var statuses []string
	var canceled *stripe.PaymentIntent // byID, when it is canceled
	open, paid, refunded, searchCanceled := false, false, false, false
	for _, pi := range unique {
		statuses = append(statuses, string(pi.Status))
		switch {
		case pi.Status == stripe.PaymentIntentStatusSucceeded:
			evs, err := stripeQueryPayment(tradeNo, pi)
			if err != nil {
				return channels.TradeAnswer{}, err
			}
			events = append(events, evs...)
			paid, refunded = true, refunded || len(evs) > 1
		case pi.Status == stripe.PaymentIntentStatusProcessing || strings.HasPrefix(string(pi.Status), "requires_"):
			open = true
		case pi.Status == stripe.PaymentIntentStatusCanceled && pi.ID == byID:
			canceled = pi
		case pi.Status == stripe.PaymentIntentStatusCanceled:
			searchCanceled = true
		default:
			return channels.TradeAnswer{}, fmt.Errorf("%w: stripe: %s: status %s", channels.ErrMalformed, pi.ID, channels.Quote(string(pi.Status)))
		}
	}

	answer := channels.TradeAnswer{State: channels.TradeNotPaid, Status: strings.Join(statuses, ",")}
	switch {
	case paid && refunded:
		answer.State, answer.Events = channels.TradeRefunded, events
	case paid:
		answer.State, answer.Events = channels.TradePaid, events
	case open:
	case canceled != nil:
		ev, err := stripeQueryClose(tradeNo, canceled)
		if err != nil {
			return channels.TradeAnswer{}, err
		}
		answer.State, answer.Events = channels.TradeClosed, []payment.Event{ev}
	case searchCanceled:
		answer.Status += " (found by search only, which cannot prove a close)"
	default:
		answer.Status = "no PaymentIntent"
	}
	return answer, nil
}

// stripeQueryPayment is a succeeded PaymentIntent's payment, as payment_intent.succeeded would
// report it (same channel transaction id, amount_received, currency), then its refund if any.
func stripeQueryPayment(tradeNo string, pi *stripe.PaymentIntent) ([]payment.Event, error) {
	currency, err := stripeIntentCurrency(pi)
	if err != nil {
		return nil, err
	}
	if pi.AmountReceived < 0 || pi.AmountReceived > channels.MaxFen {
		return nil, fmt.Errorf("%w: stripe: %s: amount_received out of range", channels.ErrMalformed, pi.ID)
	}
	if pi.Created <= 0 {
		return nil, fmt.Errorf("%w: stripe: %s: created missing", channels.ErrMalformed, pi.ID)
	}
	received, err := fromStripe(pi.AmountReceived, currency)
	if err != nil {
		return nil, err
	}
	raw := stripeRaw(pi)
	ev, err := channels.CheckEvent(payment.Event{
		Channel: "stripe", NotifyID: channels.QueryNotifyID(pi.ID), TradeNo: tradeNo, ChannelTxnID: pi.ID,
		Kind: payment.KindPaid, Status: string(pi.Status), AmountFen: received, Currency: currency,
		PaidAt: time.Unix(pi.Created, 0).UTC(), Raw: raw,
	})
	if err != nil {
		return nil, err
	}
	events := []payment.Event{ev}

	ch := pi.LatestCharge
	if ch == nil || ch.AmountRefunded == 0 {
		return events, nil
	}
	switch {
	case ch.AmountRefunded < 0 || ch.AmountRefunded > channels.MaxFen:
		return nil, fmt.Errorf("%w: stripe: %s: latest_charge.amount_refunded out of range", channels.ErrMalformed, pi.ID)
	case ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" && ch.PaymentIntent.ID != pi.ID:
		return nil, fmt.Errorf("%w: stripe: %s: latest_charge belongs to another PaymentIntent", channels.ErrMalformed, pi.ID)
	}
	refunded, err := fromStripe(ch.AmountRefunded, currency)
	if err != nil {
		return nil, err
	}
	notifyID := "query:refund:" + pi.ID + ":" + strconv.FormatInt(ch.AmountRefunded, 10)
	status := "partially_refunded"
	if ch.Refunded {
		status = "refunded"
	}
	refund, err := channels.CheckEvent(payment.Event{
		Channel: "stripe", NotifyID: notifyID, TradeNo: tradeNo, ChannelTxnID: pi.ID, Kind: payment.KindRefund,
		Status: status, AmountFen: refunded, Currency: currency, Raw: raw,
		RefundFen: refunded, RefundIsTotal: true, // a running total: it names no refund
	})
	if err != nil {
		return nil, err
	}
	return append(events, refund), nil
}

// stripeQueryClose is the close of pi, retrieved by id and canceled, when no PaymentIntent of the
// trade found beside it is open or paid.
func stripeQueryClose(tradeNo string, pi *stripe.PaymentIntent) (payment.Event, error) {
	currency, err := stripeIntentCurrency(pi)
	if err != nil {
		return payment.Event{}, err
	}
	if pi.Amount < 0 || pi.Amount > channels.MaxFen {
		return payment.Event{}, fmt.Errorf("%w: stripe: %s: amount out of range", channels.ErrMalformed, pi.ID)
	}
	amount, err := fromStripe(pi.Amount, currency)
	if err != nil {
		return payment.Event{}, err
	}
	return channels.CheckEvent(payment.Event{
		Channel: "stripe", NotifyID: "query:close:" + pi.ID, TradeNo: tradeNo, ChannelTxnID: pi.ID,
		Kind: payment.KindClosed, Status: string(pi.Status), AmountFen: amount, Currency: currency, Raw: stripeRaw(pi),
	})
}

func stripeIntentCurrency(pi *stripe.PaymentIntent) (string, error) {
	c, err := stripeCurrency(string(pi.Currency))
	if err != nil {
		return "", fmt.Errorf("%w: stripe: %s: currency missing or not 3 letters", channels.ErrMalformed, pi.ID)
	}
	return c, nil
}

// stripeRaw is the PaymentIntent's JSON as Stripe sent it (stripe-go keeps each search result's
// own JSON), for the journal.
func stripeRaw(pi *stripe.PaymentIntent) []byte {
	if pi.LastResponse == nil {
		return nil
	}
	return slices.Clone(pi.LastResponse.RawJSON)
}

// stripeExchangeKey carries, in a call's context, the *stripeExchange stripeTransport fills in:
// stripe-go reports a body it could not decode without its status, and paygw tells a garbled
// 2xx (channels.ErrMalformed) from a proxy's HTML error page (channels.ErrQueryFailed), and names what is wrong
// with the body, by it.
type stripeExchangeKey struct{}

// stripeExchange is the last response of a call (a search reads one page after another).
type stripeExchange struct {
	status      int
	contentType string
	body        []byte // as read by stripe-go, at most stripeMaxResponse bytes
	readErr     error  // reading the body failed before its end (not too large: errStripeTooLarge)
}

// undecodable explains an error stripe-go returned for a 2xx response, whose body it was to
// decode as want: the body was cut short (channels.ErrQueryFailed: ask again), or it is not JSON, or not
// JSON of want's shape (channels.ErrMalformed, naming the JSON error: its position or field, never the
// body's values). A body that does decode means stripe-go refused the response for another
// reason, which is then named, as stripe-go words it, without the body.
func (ex *stripeExchange) undecodable(want any) error {
	ct := ex.contentType
	if ct == "" {
		ct = "no Content-Type"
	}
	if ex.readErr != nil {
		return fmt.Errorf("%w: stripe: HTTP %d body cut short: %w", channels.ErrQueryFailed, ex.status, ex.readErr)
	}
	if !json.Valid(ex.body) {
		return fmt.Errorf("%w: stripe: HTTP %d body (%s, %d bytes) is not JSON: is channels.stripe.api_base_url Stripe's API, or a proxy that forwards to it?",
			channels.ErrMalformed, ex.status, channels.Quote(ct), len(ex.body))
	}
	if err := json.Unmarshal(ex.body, want); err != nil {
		var te *json.UnmarshalTypeError
		reason := "its JSON does not fit"
		if errors.As(err, &te) {
			kind, _, _ := strings.Cut(te.Value, " ") // "number 1.5": the kind, not the value
			reason = fmt.Sprintf("field %s is a JSON %s, not %s", channels.Quote(te.Field), kind, te.Type)
		}
		return fmt.Errorf("%w: stripe: HTTP %d body does not decode as a %T: %s", channels.ErrMalformed, ex.status, want, reason)
	}
	return fmt.Errorf("%w: stripe: HTTP %d body decodes, yet stripe-go refused the response", channels.ErrMalformed, ex.status)
}

// stripeTransport puts api_base_url's path in front of each request, records each response for
// stripeQueryError, and bounds its body.
type stripeTransport struct {
	next              http.RoundTripper
	prefix, rawPrefix string // api_base_url's path without its trailing slash ("" for none), and its escaped form
}

func (t stripeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.prefix != "" {
		r = r.Clone(r.Context()) // a RoundTripper leaves its request as it is
		r.URL.RawPath = t.rawPrefix + r.URL.EscapedPath()
		r.URL.Path = t.prefix + r.URL.Path
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	ex, _ := r.Context().Value(stripeExchangeKey{}).(*stripeExchange)
	if ex != nil {
		*ex = stripeExchange{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	}
	resp.Body = &stripeLimitedBody{ReadCloser: resp.Body, left: stripeMaxResponse, ex: ex}
	return resp, nil
}

var errStripeTooLarge = errors.New("response body too large")

// stripeLimitedBody fails a read past stripeMaxResponse bytes, where io.LimitReader would cut the
// body short and let a truncated JSON reach the decoder. It keeps what it reads, and a read
// error, in ex (when not nil).
type stripeLimitedBody struct {
	io.ReadCloser
	left int64
	ex   *stripeExchange
}

func (b *stripeLimitedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left == 0 { // all that is allowed is read: only the end may follow
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errStripeTooLarge
		}
		b.keep(nil, err)
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	b.keep(p[:n], err)
	return n, err
}

func (b *stripeLimitedBody) keep(p []byte, err error) {
	if b.ex == nil {
		return
	}
	b.ex.body = append(b.ex.body, p...)
	if err != nil && err != io.EOF && b.ex.readErr == nil {
		b.ex.readErr = err
	}
}
