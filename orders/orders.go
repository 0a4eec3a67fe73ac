// Package orders is the order service's idempotent create: a key claims an idempotent_record,
// the business writes and the record's final result commit together, and every repeat of the key
// gets the original result back. It speaks no HTTP: the caller's Render turns a result into the
// bytes stored and replayed, and errors are sentinels the caller maps.
package orders

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/batch"
	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

var (
	// ErrInvalid: the request is not a valid order; nothing was stored.
	ErrInvalid = errors.New("invalid order request")
	// ErrInFlight: a request with this key is being processed now; retry after RetryAfter.
	ErrInFlight = fmt.Errorf("%w: a request with this idempotency key is in progress", payment.ErrInFlight)
	// ErrKeyReused: the key was first used with a different request.
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrUnknownSKU: the order names a SKU with no stock row. Like payment.ErrOutOfStock it is a
	// final answer, rendered, stored and replayed.
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrMerchantOrderIDTaken: another order of the API client holds the create's
	// merchant_order_id. A final answer too, rendered, stored and replayed for the key.
	ErrMerchantOrderIDTaken = errors.New("merchant_order_id taken")
)

// MaxAmountFen bounds the amount of an order without stock, in minor units (channels.MaxFen:
// larger is no trade a channel would report).
const MaxAmountFen = 100_000_000_000

// Done is returned (wrapped) when return_original_result is false and the key already has a
// final result.
type Done struct{ TradeNo string }

func (d *Done) Error() string {
	if d.TradeNo == "" {
		return "idempotency key already used; its request was refused"
	}
	return "idempotency key already used for order " + d.TradeNo
}

// RetryAfter is how long a client should wait before asking again about an in-flight key.
const RetryAfter = time.Second

// Render turns a create's business result into what its client gets and what every repeat of its
// key is replayed: the order made, or a refusal that is final (payment.ErrOutOfStock,
// ErrUnknownSKU, ErrMerchantOrderIDTaken, wrapped with a detail). code is stored with body in idempotent_record.
type Render func(o *payment.Order, refusal error) (code int, body []byte)

// Config is the part of idempotency.* the service reads.
type Config struct {
	Enabled              bool
	RedisTTL             time.Duration
	ReturnOriginalResult bool
}

// Service creates orders.
type Service struct {
	db     *repository.DB
	guard  *guard.Guard
	cfg    Config
	render Render
	log    zerolog.Logger
	now    func() time.Time

	// Crash points for tests: afterClaim runs between the committed claim and the business
	// transaction, beforeCommit inside the transaction after its last statement. A crash at
	// either must leave nothing or a processing record the sweeper fails. afterPricing runs
	// between the order's insert and the stock's take, for races on the stock.
	afterClaim, afterPricing, beforeCommit func()

	group           *batch.Queue[createItem, createAnswer] // nil: every create alone (group.go)
	groups, grouped atomic.Int64                           // groups committed, and the creates in them
	formed          atomic.Int64                           // creates handed to a group, committed or not
}

func New(db *repository.DB, g *guard.Guard, cfg Config, render Render, log zerolog.Logger) *Service {
	s := &Service{db: db, guard: g, cfg: cfg, render: render, log: log, now: time.Now}
	s.SetGroupLanes(batch.DefaultLanes)
	return s
}

// Request is a create-order call as the HTTP layer hands it over.
type Request struct {
	Scope string // the API client's name: keys of two clients never meet
	Key   string // the Idempotency-Key; "" only when idempotency is disabled
	Hash  string // RequestHash of the call
	Order NewOrder
	// Accepts is the rule on currencies of the first attempt's channel (channels.Currencies);
	// nil when the create names no channel. Its refusal is returned, nothing stored.
	Accepts func(currency string) error
}

// NewOrder is the create-order body: an order from stock (sku and num: the stock's unit price and
// currency), or an order without stock (amount_fen and currency, no sku: stored with sku "" and
// num 1). Amounts are integers in the currency's ISO 4217 minor units.
type NewOrder struct {
	UserID    int64  `json:"user_id"`
	SKU       string `json:"sku"`
	Num       int    `json:"num"`
	AmountFen int64  `json:"amount_fen,omitempty"`
	Currency  string `json:"currency,omitempty"`
	// The merchant's own id for the order, 1-64 characters, unique per API client.
	MerchantOrderID string `json:"merchant_order_id,omitempty"`
	// The first payment attempt, when the order service already knows where the buyer pays
	// (the caller checks the channel is enabled and the ref has its shape).
	Channel    string `json:"channel,omitempty"`
	ChannelRef string `json:"channel_ref,omitempty"`
}

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidSKU reports whether s can name a SKU.
func ValidSKU(s string) bool { return skuPattern.MatchString(s) }

// Enabled reports whether create calls go through idempotency keys (idempotency.enabled).
func (s *Service) Enabled() bool { return s.cfg.Enabled }

// ParseNewOrder decodes and checks a canonical create-order body.
func ParseNewOrder(canonical []byte) (NewOrder, error) {
	var o NewOrder
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// Which optional fields were sent at all, so that "" or 0 is not taken for absent.
	var sent map[string]json.RawMessage  // which fields were sent at all: "", 0 and null are not absent
	_ = json.Unmarshal(canonical, &sent) // decoded above: cannot fail
	has := func(field string) bool {     // as encoding/json matches names: case-insensitively
		for k := range sent {
			if strings.EqualFold(k, field) {
				return true
			}
		}
		return false
	}
	var why string
	switch {
	case o.UserID <= 0:
		why = "user_id must be a positive integer"
	case has("merchant_order_id") && !ValidMerchantOrderID(o.MerchantOrderID):
		why = "merchant_order_id must be 1-64 characters, no control characters, no spaces at the ends"
	case o.SKU == "" && has("sku"):
		why = "sku must be 1-64 characters of [A-Za-z0-9._-]"
	case o.SKU == "" && has("num"):
		why = "num is for an order from stock: send sku too, or amount_fen and currency alone"
	case o.SKU == "" && (o.AmountFen < 1 || o.AmountFen > MaxAmountFen):
		why = "without sku, amount_fen must be an integer from 1 to 1e11, in the currency's minor units"
	case o.SKU == "" && !money.Valid(o.Currency):
		why = "without sku, currency must be an ISO 4217 code in upper case (CNY, USD, JPY ...)"
	case o.SKU == "":
	case !ValidSKU(o.SKU):
		why = "sku must be 1-64 characters of [A-Za-z0-9._-]"
	case o.Num < 1 || o.Num > 10000:
		why = "num must be between 1 and 10000"
	case has("amount_fen") || has("currency"):
		why = "an order from stock takes the stock's price and currency: send amount_fen and currency only without sku"
	}
	if why != "" {
		return o, fmt.Errorf("%w: %s", ErrInvalid, why)
	}
	return o, nil
}

// ValidMerchantOrderID reports whether s can be a merchant_order_id: 1-64 characters (valid
// UTF-8), none a control character, no space at either end.
func ValidMerchantOrderID(s string) bool {
	n := utf8.RuneCountInString(s)
	if n < 1 || n > 64 || !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	return strings.IndexFunc(s, unicode.IsControl) < 0
}

// Result is what Render made of a create: fresh, or the stored one replayed.
type Result struct {
	Code     int
	Body     []byte
	Replayed bool
}

// Create runs one create-order call. Errors are ErrInFlight, ErrKeyReused, *Done, or a storage
// failure (nothing final was stored: the client may retry with the same key).
func (s *Service) Create(ctx context.Context, r Request) (Result, error) {
	if !s.cfg.Enabled || r.Key == "" {
		return s.createGrouped(ctx, r, nil)
	}
	lock, err := s.guard.Acquire(ctx, "idem:"+r.Scope+":"+r.Key, s.cfg.RedisTTL)
	if errors.Is(err, guard.ErrHeld) {
		return Result{}, ErrInFlight
	}
	defer lock.Release(context.WithoutCancel(ctx))

	c, replay, err := s.claim(ctx, r)
	if err != nil || replay != nil {
		return derefResult(replay), err
	}
	if s.afterClaim != nil {
		s.afterClaim()
	}
	res, err := s.createGrouped(ctx, r, &c)
	switch {
	case errors.Is(err, repository.ErrFenced):
		return s.fenced(ctx, r, c)
	case errors.Is(err, payment.ErrConflict):
		return s.adoptOrder(ctx, r, c)
	case err != nil:
		// Our own failure is not final: free the key for a retry now rather than after the sweep.
		if ferr := s.db.FailClaim(context.WithoutCancel(ctx), c.id, c.token); ferr != nil {
			s.log.Warn().Err(ferr).Msg("could not fail the claim; the sweeper will")
		}
	}
	return res, err
}

// adoptOrder answers a claim whose order insert hit uk_order_idem: the key's order exists, made
// by a request that took the claim over while we were slow, or before its record was lost (a
// retention purge). Its stock was taken then; ours rolled back. The existing order becomes the
// record's result, so the key is never stuck answering 409; this request gets it as any repeat
// would, unless the order was made from another body (422, never someone else's order).
func (s *Service) adoptOrder(ctx context.Context, r Request, c claim) (Result, error) {
	o, hash, err := s.db.OrderByIdemKey(ctx, r.Scope, r.Key)
	if err != nil {
		// Not the key's order: a trade_no collision, our own failure. Free the key for a retry.
		if ferr := s.db.FailClaim(context.WithoutCancel(ctx), c.id, c.token); ferr != nil {
			s.log.Warn().Err(ferr).Msg("could not fail the claim; the sweeper will")
		}
		return Result{}, fmt.Errorf("order insert collided: %w", err)
	}
	code, body := s.render(&o, nil)
	reused := hash != "" && hash != r.Hash // "": an order from before request hashes were kept
	err = s.db.InTx(ctx, func(tx *repository.Tx) error {
		if reused {
			return tx.CompleteRecordAs(ctx, c.id, c.token, hash, code, body)
		}
		return tx.CompleteRecord(ctx, c.id, c.token, code, body)
	})
	switch {
	case errors.Is(err, repository.ErrFenced):
		return s.fenced(ctx, r, c)
	case err != nil:
		return Result{}, err
	case reused:
		return Result{}, ErrKeyReused
	case !s.cfg.ReturnOriginalResult:
		return Result{}, &Done{TradeNo: o.TradeNo}
	}
	return Result{Code: code, Body: body, Replayed: true}, nil
}

// fenced answers a create whose record could not be completed because the claim was no longer
// ours to complete. Either our own transaction had completed it already, one whose COMMIT's
// answer was lost (a group's, or a single one's, that did commit): the record is final and
// still carries our lock token, and its result is this request's answer. Or the sweeper failed
// our claim and a retry took it over; ours rolled back, and the client's next try gets the new
// owner's result.
func (s *Service) fenced(ctx context.Context, r Request, c claim) (Result, error) {
	rec, err := s.db.GetRecord(ctx, repository.BizOrderCreate, r.Scope, r.Key)
	switch {
	case err != nil || rec.Status != repository.StatusSuccess || rec.LockToken != c.token:
		return Result{}, ErrInFlight
	case rec.RequestHash != r.Hash: // we adopted an order made from another body
		return Result{}, ErrKeyReused
	}
	return Result{Code: rec.ResponseCode, Body: []byte(rec.ResultJSON)}, nil
}

type claim struct {
	id    int64
	token string
}

// claim commits a processing record for the key, takes over a failed one, or answers by the
// record already there.
func (s *Service) claim(ctx context.Context, r Request) (claim, *Result, error) {
	token := newToken()
	for attempt := 0; attempt < 3; attempt++ {
		id, err := s.db.Claim(ctx, repository.BizOrderCreate, r.Scope, r.Key, r.Hash, token)
		if err == nil {
			return claim{id, token}, nil, nil
		}
		if !errors.Is(err, payment.ErrConflict) {
			return claim{}, nil, err
		}
		rec, err := s.db.GetRecord(ctx, repository.BizOrderCreate, r.Scope, r.Key)
		if errors.Is(err, payment.ErrNotFound) {
			continue // taken and gone between our two statements: try again
		} else if err != nil {
			return claim{}, nil, err
		}
		if rec.RequestHash != r.Hash {
			return claim{}, nil, ErrKeyReused
		}
		switch rec.Status {
		case repository.StatusSuccess:
			res, err := s.replay(ctx, r, rec)
			return claim{}, res, err
		case repository.StatusProcessing:
			return claim{}, nil, ErrInFlight
		case repository.StatusFailed:
			if err := s.db.TakeOver(ctx, rec.ID, r.Hash, token); err == nil {
				return claim{rec.ID, token}, nil, nil
			} else if !errors.Is(err, repository.ErrFenced) {
				return claim{}, nil, err
			}
			// another request took it over first: look again
		}
	}
	return claim{}, nil, ErrInFlight
}

// replay answers a repeat of a key with a final result: the stored result, or with
// return_original_result off, *Done naming the key's order if it made one.
func (s *Service) replay(ctx context.Context, r Request, rec repository.Record) (*Result, error) {
	if !s.cfg.ReturnOriginalResult {
		o, _, err := s.db.OrderByIdemKey(ctx, r.Scope, r.Key)
		if err != nil && !errors.Is(err, payment.ErrNotFound) { // a stored refusal made no order
			return nil, err
		}
		return nil, &Done{TradeNo: o.TradeNo}
	}
	return &Result{Code: rec.ResponseCode, Body: []byte(rec.ResultJSON), Replayed: true}, nil
}

// create runs the business transaction; with a claim, the record's final result commits in it
// too, fenced on our lock token. The SKU's row is taken last, after the order and the record are
// written: its lock, which every create of that SKU waits for, is held only for that UPDATE and
// the COMMIT. When the units went meanwhile, the transaction is rolled back and the refusal is
// the answer, stored in a transaction of its own; when the stock changed otherwise (the price),
// it runs again, three times at most.
func (s *Service) create(ctx context.Context, r Request, c *claim) (Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := s.createOnce(ctx, r, c)
		switch {
		case errors.Is(err, repository.ErrStockChanged) && attempt < 3:
			continue
		case errors.Is(err, repository.ErrStockChanged):
			return Result{}, err
		case errors.Is(err, payment.ErrOutOfStock), errors.Is(err, ErrMerchantOrderIDTaken):
			res = s.refuse(r, err)
			return res, s.db.InTx(ctx, func(tx *repository.Tx) error {
				if err := s.complete(ctx, tx, c, res); err != nil {
					return err
				}
				s.hookBeforeCommit()
				return nil
			})
		}
		return res, err
	}
}

func (s *Service) createOnce(ctx context.Context, r Request, c *claim) (Result, error) {
	var res Result
	err := s.db.InTx(ctx, func(tx *repository.Tx) error {
		var st payment.Stock
		var ordered bool
		var err error
		if res, st, ordered, err = s.business(ctx, tx, r); err != nil {
			return err
		}
		s.hookAfterPricing()
		if err := s.complete(ctx, tx, c, res); err != nil {
			return err
		}
		if ordered { // last: the SKU's row lock is held from here to COMMIT
			if err := tx.TakeStockIn(ctx, r.Order.SKU, r.Order.Num, st.PriceFen, st.Currency); err != nil {
				return err
			}
		}
		s.hookBeforeCommit()
		return nil
	})
	return res, err
}

// complete gives the claim's record its final result res, fenced on our lock token.
func (s *Service) complete(ctx context.Context, tx *repository.Tx, c *claim, res Result) error {
	if c == nil {
		return nil
	}
	return tx.CompleteRecord(ctx, c.id, c.token, res.Code, res.Body)
}

func (s *Service) hookAfterPricing() {
	if s.afterPricing != nil {
		s.afterPricing()
	}
}

func (s *Service) hookBeforeCommit() {
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
}

// refuse renders a final refusal: out of stock, an unknown SKU, a merchant_order_id taken.
// Stored and replayed like a success.
func (s *Service) refuse(r Request, err error) Result {
	refusal := fmt.Errorf("%w: sku %s does not exist", ErrUnknownSKU, r.Order.SKU)
	switch {
	case errors.Is(err, payment.ErrOutOfStock):
		refusal = fmt.Errorf("%w: sku %s has fewer than %d units left", payment.ErrOutOfStock, r.Order.SKU, r.Order.Num)
	case errors.Is(err, ErrMerchantOrderIDTaken):
		refusal = err
	}
	code, body := s.render(nil, refusal)
	return Result{Code: code, Body: body}
}

// business prices the order from the SKU's stock as last committed (no lock) and inserts it;
// ordered says the caller must then take the units of st, last. Out of stock and unknown SKU
// are final answers, with nothing inserted. An order without stock is inserted as it is.
func (s *Service) business(ctx context.Context, tx *repository.Tx, r Request) (res Result, st payment.Stock, ordered bool, err error) {
	if r.Order.SKU == "" {
		res, err = s.placeOrder(ctx, tx, r, payment.Stock{})
		return res, payment.Stock{}, false, err
	}
	st, err = tx.ReadStock(ctx, r.Order.SKU)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return s.refuse(r, err), st, false, nil
	case err != nil:
		return Result{}, st, false, err
	case st.Num < r.Order.Num:
		return s.refuse(r, payment.ErrOutOfStock), st, false, nil
	}
	res, err = s.placeOrder(ctx, tx, r, st)
	return res, st, err == nil, err
}

// placeOrder inserts the WAIT_PAY order of r, priced from st (an order without stock: its own
// amount and currency, st unused), with its first payment attempt if it names one, and renders
// it. Errors: the first attempt's channel refusing the currency (r.Accepts), or
// ErrMerchantOrderIDTaken, with nothing written.
func (s *Service) placeOrder(ctx context.Context, tx *repository.Tx, r Request, st payment.Stock) (Result, error) {
	o := payment.Order{
		TradeNo:         NewTradeNo(s.now()),
		UserID:          r.Order.UserID,
		SKU:             r.Order.SKU,
		Num:             r.Order.Num,
		AmountFen:       st.PriceFen * int64(r.Order.Num),
		Currency:        cmp.Or(st.Currency, money.Default),
		MerchantOrderID: r.Order.MerchantOrderID,
		Status:          payment.OrderWaitPay,
		CreateTime:      s.now().UTC().Truncate(time.Millisecond),
	}
	if r.Order.SKU == "" {
		o.Num, o.AmountFen, o.Currency = 1, r.Order.AmountFen, r.Order.Currency
	}
	if r.Accepts != nil {
		if err := r.Accepts(o.Currency); err != nil {
			return Result{}, err
		}
	}
	if err := s.merchantIDTaken(ctx, tx, r); err != nil {
		return Result{}, err
	}
	if err := tx.InsertOrder(ctx, o, r.Scope, r.Key, r.Hash); err != nil {
		if errors.Is(err, payment.ErrConflict) { // a create of the same merchant_order_id committed meanwhile?
			if taken := s.merchantIDTaken(ctx, tx, r); taken != nil {
				return Result{}, taken
			}
		}
		return Result{}, err
	}
	if r.Order.Channel != "" {
		a := payment.Attempt{TradeNo: o.TradeNo, Channel: r.Order.Channel, ChannelRef: r.Order.ChannelRef,
			CreatedTime: o.CreateTime, NextQueryAt: o.CreateTime}
		if err := tx.InsertAttempt(ctx, a); err != nil {
			return Result{}, err
		}
	}
	code, body := s.render(&o, nil)
	return Result{Code: code, Body: body}, nil
}

// merchantIDTaken returns ErrMerchantOrderIDTaken when another order of r's API client holds r's
// merchant_order_id. The order of r's own idempotency key is no other order: its insert meets
// uk_order_idem and is adopted (Create).
func (s *Service) merchantIDTaken(ctx context.Context, tx *repository.Tx, r Request) error {
	id := r.Order.MerchantOrderID
	if id == "" {
		return nil
	}
	key, err := tx.MerchantOrderKey(ctx, r.Scope, id)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return nil
	case err != nil:
		return err
	case r.Key != "" && key == r.Key:
		return nil
	}
	return fmt.Errorf("%w: merchant_order_id %q names another order of this API client", ErrMerchantOrderIDTaken, id)
}

// NewTradeNo makes a 31-character trade_no: "P", the UTC time to the second, 16 random hex
// digits. It fits every channel's merchant order number ([A-Za-z0-9_-], at most 32).
func NewTradeNo(now time.Time) string {
	return "P" + now.UTC().Format("20060102150405") + newToken()[:16]
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func derefResult(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}

// ErrNotPayable means the order is not WAIT_PAY, so nobody can be sent to pay it.
var ErrNotPayable = errors.New("order is not waiting for payment")

// AddAttempt records that the buyer was sent to a channel to pay tradeNo (the caller checked
// the channel and ref; accepts, if not nil, is the channel's rule on the order's currency).
// created is false when the order had this attempt already: it is returned as it is. Errors:
// payment.ErrNotFound, ErrNotPayable, the refusal of accepts, or a storage failure.
func (s *Service) AddAttempt(ctx context.Context, tradeNo, channel, ref string, accepts func(currency string) error) (a payment.Attempt, created bool, err error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	err = s.db.InTx(ctx, func(tx *repository.Tx) error {
		o, err := tx.LockOrder(ctx, tradeNo)
		if err != nil {
			return err
		}
		if o.Status != payment.OrderWaitPay {
			return fmt.Errorf("%w: order %s is %s", ErrNotPayable, tradeNo, o.Status)
		}
		if accepts != nil {
			if err := accepts(o.Currency); err != nil {
				return err
			}
		}
		return tx.InsertAttempt(ctx, payment.Attempt{TradeNo: tradeNo, Channel: channel, ChannelRef: ref, CreatedTime: now, NextQueryAt: now})
	})
	created = err == nil
	if errors.Is(err, payment.ErrConflict) {
		err = nil
	}
	if err != nil {
		return payment.Attempt{}, false, err
	}
	a, err = s.db.GetAttempt(ctx, tradeNo, channel, ref)
	return a, created, err
}
