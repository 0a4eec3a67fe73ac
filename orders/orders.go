// Package orders is the order service's idempotent create: a key claims an idempotent_record,
// the business writes and the record's final result commit together, and every repeat of the key
// gets the original result back. It speaks no HTTP: the caller's Render turns a result into the
// bytes stored and replayed, and errors are sentinels the caller maps.
package orders

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/batch"
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
)

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
// ErrUnknownSKU, wrapped with a detail). code is stored with body in idempotent_record.
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
}

// NewOrder is the create-order body.
type NewOrder struct {
	UserID int64  `json:"user_id"`
	SKU    string `json:"sku"`
	Num    int    `json:"num"`
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
	switch {
	case o.UserID <= 0:
		return o, fmt.Errorf("%w: user_id must be a positive integer", ErrInvalid)
	case !ValidSKU(o.SKU):
		return o, fmt.Errorf("%w: sku must be 1-64 characters of [A-Za-z0-9._-]", ErrInvalid)
	case o.Num < 1 || o.Num > 10000:
		return o, fmt.Errorf("%w: num must be between 1 and 10000", ErrInvalid)
	}
	return o, nil
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
		case errors.Is(err, payment.ErrOutOfStock):
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
		var price int64
		var ordered bool
		var err error
		if res, price, ordered, err = s.business(ctx, tx, r); err != nil {
			return err
		}
		s.hookAfterPricing()
		if err := s.complete(ctx, tx, c, res); err != nil {
			return err
		}
		if ordered { // last: the SKU's row lock is held from here to COMMIT
			if err := tx.TakeStock(ctx, r.Order.SKU, r.Order.Num, price); err != nil {
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

// refuse renders a final refusal: out of stock, or an unknown SKU. Stored and replayed like a
// success.
func (s *Service) refuse(r Request, err error) Result {
	refusal := fmt.Errorf("%w: sku %s does not exist", ErrUnknownSKU, r.Order.SKU)
	if errors.Is(err, payment.ErrOutOfStock) {
		refusal = fmt.Errorf("%w: sku %s has fewer than %d units left", payment.ErrOutOfStock, r.Order.SKU, r.Order.Num)
	}
	code, body := s.render(nil, refusal)
	return Result{Code: code, Body: body}
}

// business prices the order from the SKU's stock as last committed (no lock) and inserts it;
// ordered says the caller must then take the units at price, last. Out of stock and unknown SKU
// are final answers, with nothing inserted.
func (s *Service) business(ctx context.Context, tx *repository.Tx, r Request) (res Result, price int64, ordered bool, err error) {
	st, err := tx.ReadStock(ctx, r.Order.SKU)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return s.refuse(r, err), 0, false, nil
	case err != nil:
		return Result{}, 0, false, err
	case st.Num < r.Order.Num:
		return s.refuse(r, payment.ErrOutOfStock), 0, false, nil
	}
	res, err = s.placeOrder(ctx, tx, r, st.PriceFen)
	return res, st.PriceFen, err == nil, err
}

// placeOrder inserts the WAIT_PAY order of r at the unit price priceFen, with its first payment
// attempt if it names one, and renders it.
func (s *Service) placeOrder(ctx context.Context, tx *repository.Tx, r Request, priceFen int64) (Result, error) {
	o := payment.Order{
		TradeNo:    NewTradeNo(s.now()),
		UserID:     r.Order.UserID,
		SKU:        r.Order.SKU,
		Num:        r.Order.Num,
		AmountFen:  priceFen * int64(r.Order.Num),
		Currency:   "CNY",
		Status:     payment.OrderWaitPay,
		CreateTime: s.now().UTC().Truncate(time.Millisecond),
	}
	if err := tx.InsertOrder(ctx, o, r.Scope, r.Key, r.Hash); err != nil {
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
// the channel and ref). created is false when the order had this attempt already: it is
// returned as it is. Errors: payment.ErrNotFound, ErrNotPayable, or a storage failure.
func (s *Service) AddAttempt(ctx context.Context, tradeNo, channel, ref string) (a payment.Attempt, created bool, err error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	err = s.db.InTx(ctx, func(tx *repository.Tx) error {
		o, err := tx.LockOrder(ctx, tradeNo)
		if err != nil {
			return err
		}
		if o.Status != payment.OrderWaitPay {
			return fmt.Errorf("%w: order %s is %s", ErrNotPayable, tradeNo, o.Status)
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
