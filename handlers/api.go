package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
)

var errBadStock = errors.New("invalid stock")

func (s *Server) putStock(c echo.Context) error {
	sku := c.Param("sku")
	if !orders.ValidSKU(sku) {
		return fmt.Errorf("%w: sku must be 1-64 characters of [A-Za-z0-9._-]", errBadStock)
	}
	canonical, err := s.readJSON(c)
	if err != nil {
		return err
	}
	var in struct {
		Num      *int   `json:"num"`
		PriceFen *int64 `json:"price_fen"`
		Currency string `json:"currency"`
	}
	if err := decodeStrict(canonical, &in); err != nil {
		return fmt.Errorf("%w: %v", errBadStock, err)
	}
	if in.Num == nil || *in.Num < 0 || *in.Num > 1e9 || in.PriceFen == nil || *in.PriceFen < 0 || *in.PriceFen > 1e12 {
		return fmt.Errorf("%w: num (at most 1e9) and price_fen (at most 1e12) must be given as non-negative integers", errBadStock)
	}
	in.Currency = cmp.Or(in.Currency, money.Default)
	if !money.Valid(in.Currency) {
		return fmt.Errorf("%w: currency must be an ISO 4217 code in upper case (default CNY)", errBadStock)
	}
	st := payment.Stock{SKU: sku, Num: *in.Num, PriceFen: *in.PriceFen, Currency: in.Currency}
	if err := s.db.PutStockAudited(c.Request().Context(), st, s.entry(c, "stock.put", "stock:"+sku)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, stockView{SKU: st.SKU, Num: st.Num, PriceFen: st.PriceFen, Currency: st.Currency})
}

// stockView is a stock row as PUT /v1/stock/{sku} echoes it.
type stockView struct {
	SKU      string `json:"sku"`
	Num      int    `json:"num"`
	PriceFen int64  `json:"price_fen"`
	Currency string `json:"currency"`
}

// createOrder is the idempotent create: Idempotency-Key, request hash, the original result
// replayed.
func (s *Server) createOrder(c echo.Context) error {
	req := orders.Request{Scope: c.Get(clientKey).(string)}
	if s.orders.Enabled() {
		values := c.Request().Header.Values(s.cfg.KeyHeader)
		if len(values) == 0 {
			return fmt.Errorf("%w: send header %s", errNoKey, s.cfg.KeyHeader)
		}
		if len(values) > 1 || !validKey(values[0]) {
			return errBadKey
		}
		req.Key = values[0]
	}
	canonical, err := s.readJSON(c)
	if err != nil {
		return err
	}
	if req.Order, err = orders.ParseNewOrder(canonical); err != nil {
		return err
	}
	if req.Order.Channel != "" || req.Order.ChannelRef != "" {
		ch, err := s.checkAttempt(req.Order.Channel, req.Order.ChannelRef)
		if err != nil {
			return err
		}
		if err := s.acceptsOrderCurrency(c.Request().Context(), ch, req.Order); err != nil {
			return err
		}
		req.Accepts = ch.AcceptsCurrency // again in the create's transaction, on the stock it reads
	}
	req.Hash = orders.RequestHash(http.MethodPost, "/v1/orders", canonical)
	ctx, cancel := context.WithTimeout(c.Request().Context(), apply.ApplyTimeout)
	defer cancel()
	res, err := s.orders.Create(ctx, req)
	s.cfg.Metrics.OrderCreate(createResult(res, err))
	if err != nil {
		s.noteFailure(err)
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	} else if res.Code == http.StatusCreated {
		s.auditCreate(c, res.Body)
	}
	contentType := echo.MIMEApplicationJSON
	if res.Code >= 400 {
		contentType = "application/problem+json"
	}
	return c.Blob(res.Code, contentType, res.Body)
}

// auditCreate records a new order, its view as the answer shows it. The create commits in the
// orders service's own transaction, so the row follows it.
func (s *Server) auditCreate(c echo.Context, body []byte) {
	var o struct {
		TradeNo string `json:"trade_no"`
	}
	_ = json.Unmarshal(body, &o) // our own rendering of an orderView
	e := s.entry(c, "order.create", "order:"+o.TradeNo)
	e.After = body
	s.auditAfter(c, e)
}

// acceptsOrderCurrency refuses, before anything is stored, an order whose currency the first
// attempt's channel does not take: the body's, or the stock's as committed now. An unknown SKU is
// left to the create, which stores its refusal.
func (s *Server) acceptsOrderCurrency(ctx context.Context, ch channels.Channel, o orders.NewOrder) error {
	if o.SKU == "" {
		return ch.AcceptsCurrency(o.Currency)
	}
	st, err := s.db.GetStock(ctx, o.SKU)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return ch.AcceptsCurrency(st.Currency)
}

// createResult names a create's result for paygw_order_creates_total.
func createResult(res orders.Result, err error) string {
	var done *orders.Done
	switch {
	case errors.Is(err, orders.ErrInFlight):
		return metrics.OrderInFlight
	case errors.Is(err, orders.ErrKeyReused):
		return metrics.OrderKeyReused
	case errors.As(err, &done):
		return metrics.OrderDone
	case err != nil:
		return metrics.OrderError
	case res.Replayed:
		return metrics.OrderReplayed
	case res.Code >= 400:
		return metrics.OrderRefused
	}
	return metrics.OrderCreated
}

// readJSON reads the body once and returns it in canonical form: one JSON value, no duplicate
// keys, valid UTF-8.
func (s *Server) readJSON(c echo.Context) ([]byte, error) {
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	return orders.Canonical(body)
}

// validKey: 1-128 bytes of printable ASCII (no controls, no spaces at the ends).
func validKey(k string) bool {
	if len(k) == 0 || len(k) > 128 || k[0] == ' ' || k[len(k)-1] == ' ' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// getPayment is the query-callback-status API: the order, why it is (not) paid, what each
// channel told us, the refunds counted against it, and what needs a person.
func (s *Server) getPayment(c echo.Context) error {
	tradeNo := c.Param("trade_no")
	if !payment.ValidTradeNo(tradeNo) {
		return payment.ErrNotFound
	}
	r, err := explain.Load(c.Request().Context(), s.db, s.guard, tradeNo)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, paymentViewOf(r))
}

var errBadAttempt = errors.New("invalid payment attempt")

// idChars are the characters of Stripe's object ids.
const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

// attemptView is a payment attempt as the API shows it.
type attemptView struct {
	TradeNo     string     `json:"trade_no"`
	Channel     string     `json:"channel"`
	ChannelRef  string     `json:"channel_ref,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	QueryCount  int        `json:"query_count"`
	NextQueryAt time.Time  `json:"next_query_at"`
	LastQueryAt *time.Time `json:"last_query_at,omitempty"`
	LastAnswer  string     `json:"last_answer,omitempty"`
	LastStatus  string     `json:"last_status,omitempty"`
}

func attemptViewOf(a payment.Attempt) attemptView {
	return attemptView{TradeNo: a.TradeNo, Channel: a.Channel, ChannelRef: a.ChannelRef, CreatedAt: a.CreatedTime,
		QueryCount: a.QueryCount, NextQueryAt: a.NextQueryAt, LastQueryAt: a.LastQueryAt, LastAnswer: a.LastAnswer,
		LastStatus: a.LastStatus}
}

// addAttempt records that the order service sent the buyer to a channel: 201 with the attempt,
// 200 with the same body when it was recorded already.
func (s *Server) addAttempt(c echo.Context) error {
	tradeNo := c.Param("trade_no")
	if !payment.ValidTradeNo(tradeNo) {
		return payment.ErrNotFound
	}
	canonical, err := s.readJSON(c)
	if err != nil {
		return err
	}
	var in struct {
		Channel    string `json:"channel"`
		ChannelRef string `json:"channel_ref"`
	}
	if err := decodeStrict(canonical, &in); err != nil {
		return fmt.Errorf("%w: %v", errBadAttempt, err)
	}
	ch, err := s.checkAttempt(in.Channel, in.ChannelRef)
	if err != nil {
		return err
	}
	a, created, err := s.orders.AddAttempt(c.Request().Context(), tradeNo, in.Channel, in.ChannelRef, ch.AcceptsCurrency)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		e := s.entry(c, "attempt.add", "order:"+tradeNo)
		e.After = access.State(attemptViewOf(a))
		s.auditAfter(c, e)
	}
	return c.JSON(code, attemptViewOf(a))
}

// checkAttempt refuses a channel that is not enabled here and a ref without its channel's shape:
// Stripe's PaymentIntent id, or UnionPay's txnTime (yyyyMMddHHmmss); the others take none. It
// returns the channel, whose rule on currencies the caller applies to the order.
func (s *Server) checkAttempt(channel, ref string) (channels.Channel, error) {
	var found channels.Channel
	for _, ch := range s.channels {
		if ch.Name() == channel {
			found = ch
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: channel must be one of the enabled channels", errBadAttempt)
	}
	switch {
	case ref == "":
		return found, nil
	case channel == "stripe" && strings.HasPrefix(ref, "pi_") && len(ref) <= 128 && strings.Trim(ref, idChars) == "":
		return found, nil
	case channel == "unionpay" && len(ref) == 14:
		if _, err := time.Parse("20060102150405", ref); err == nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("%w: channel_ref must be a Stripe PaymentIntent id (pi_...) or a UnionPay txnTime (yyyyMMddHHmmss); other channels take none", errBadAttempt)
}

// decodeStrict decodes one canonical JSON body into v, refusing fields v does not have.
func decodeStrict(canonical []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
