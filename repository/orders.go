package repository

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/paygw/paygw/payment"
)

// orderRow is one orders row as MySQL returns it.
type orderRow struct {
	TradeNo      string         `db:"trade_no"`
	UserID       int64          `db:"user_id"`
	SKU          string         `db:"sku"`
	Num          int            `db:"num"`
	AmountFen    int64          `db:"amount_fen"`
	Currency     string         `db:"currency"`
	MerchantID   sql.NullString `db:"merchant_order_id"`
	Status       string         `db:"status"`
	Channel      sql.NullString `db:"channel"`
	ChannelTxnID sql.NullString `db:"channel_txn_id"`
	PaidTime     sql.NullTime   `db:"paid_time"`
	RefundedFen  int64          `db:"refunded_fen"`
	RequestHash  sql.NullString `db:"request_hash"`
	CreateTime   time.Time      `db:"create_time"`
	UpdateTime   time.Time      `db:"update_time"`
}

const orderColumns = `trade_no, user_id, sku, num, amount_fen, currency, merchant_order_id, status, channel,
	channel_txn_id, paid_time, refunded_fen, request_hash, create_time, update_time`

func (r orderRow) order() payment.Order {
	o := payment.Order{
		TradeNo: r.TradeNo, UserID: r.UserID, SKU: r.SKU, Num: r.Num, AmountFen: r.AmountFen,
		Currency: r.Currency, MerchantOrderID: r.MerchantID.String, Status: r.Status, Channel: r.Channel.String, ChannelTxnID: r.ChannelTxnID.String,
		RefundedFen: r.RefundedFen, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime,
	}
	if r.PaidTime.Valid {
		t := r.PaidTime.Time
		o.PaidTime = &t
	}
	return o
}

// stockRow is one stock row.
type stockRow struct {
	SKU      string `db:"sku"`
	Num      int    `db:"num"`
	PriceFen int64  `db:"price_fen"`
	Currency string `db:"currency"`
}

// PutStock creates or replaces a SKU's stock level, price and currency (CNY when s names none).
func (db *DB) PutStock(ctx context.Context, s payment.Stock) error {
	return putStock(ctx, db.x, s)
}

func putStock(ctx context.Context, x execer, s payment.Stock) error {
	const q = `INSERT INTO stock (sku, num, price_fen, currency) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE num = VALUES(num), price_fen = VALUES(price_fen), currency = VALUES(currency)`
	_, err := x.ExecContext(ctx, q, s.SKU, s.Num, s.PriceFen, cmp.Or(s.Currency, "CNY"))
	return err
}

// GetStock returns payment.ErrNotFound for an unknown SKU.
func (db *DB) GetStock(ctx context.Context, sku string) (payment.Stock, error) {
	return getStock(ctx, db.x, sku)
}

func getStock(ctx context.Context, x getter, sku string) (payment.Stock, error) {
	const q = `SELECT sku, num, price_fen, currency FROM stock WHERE sku = ?`
	var r stockRow
	if err := x.GetContext(ctx, &r, q, sku); err != nil {
		return payment.Stock{}, notFound(err)
	}
	return payment.Stock{SKU: r.SKU, Num: r.Num, PriceFen: r.PriceFen, Currency: r.Currency}, nil
}

// GetOrder returns payment.ErrNotFound for an unknown trade_no.
func (db *DB) GetOrder(ctx context.Context, tradeNo string) (payment.Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE trade_no = ?`
	return getOrder(ctx, db.x, q, tradeNo)
}

// ReadStock reads a SKU's stock and unit price without locking its row (the latest committed
// values, under READ COMMITTED). payment.ErrNotFound for an unknown SKU.
func (tx *Tx) ReadStock(ctx context.Context, sku string) (payment.Stock, error) {
	return getStock(ctx, tx.x, sku)
}

// ErrStockChanged means the SKU's row changed since the order was priced (another price, or units
// that a transaction in flight had hidden from the UPDATE): price the order again.
var ErrStockChanged = errors.New("the sku's stock changed while the order was priced")

// TakeStock decrements a SKU by num only if that many are left at the unit price priceFen.
// Returns payment.ErrOutOfStock if too few are left, ErrStockChanged if the price is another one
// now (or the units are there after all), and payment.ErrNotFound for an unknown SKU. It locks
// the SKU's row until COMMIT, which every create of that SKU waits for: callers take it last.
func (tx *Tx) TakeStock(ctx context.Context, sku string, num int, priceFen int64) error {
	return tx.TakeStockIn(ctx, sku, num, priceFen, "")
}

// TakeStockIn is TakeStock at a price in a currency: ErrStockChanged too if the SKU's currency is
// another one now. currency "" takes any.
func (tx *Tx) TakeStockIn(ctx context.Context, sku string, num int, priceFen int64, currency string) error {
	const take = `UPDATE stock SET num = num - ? WHERE sku = ? AND num >= ? AND price_fen = ? AND (? = '' OR currency = ?)`
	res, err := tx.x.ExecContext(ctx, take, num, sku, num, priceFen, currency, currency)
	if err = oneRow(res, err); !errors.Is(err, ErrFenced) {
		return err
	}
	st, err := tx.ReadStock(ctx, sku)
	switch {
	case err != nil:
		return err
	case st.PriceFen != priceFen || (currency != "" && st.Currency != currency) || st.Num >= num:
		return ErrStockChanged
	}
	return payment.ErrOutOfStock
}

// InsertOrder inserts a WAIT_PAY order; scope, key and hash ("" for none) are the idempotent
// create's, key filling uk_order_idem. Returns payment.ErrConflict if the trade_no or the
// idempotency key already has an order.
func (tx *Tx) InsertOrder(ctx context.Context, o payment.Order, scope, key, hash string) error {
	const q = `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status,
		idem_scope, idem_key, merchant_order_id, request_hash, create_time, update_time)
		VALUES (?, ?, ?, ?, ?, ?, 'WAIT_PAY', ?, ?, ?, ?, ?, ?)`
	_, err := tx.x.ExecContext(ctx, q, o.TradeNo, o.UserID, o.SKU, o.Num, o.AmountFen, o.Currency,
		nullable(scope), nullable(key), nullable(o.MerchantOrderID), nullable(hash), o.CreateTime, o.CreateTime)
	return conflict(err)
}

// MerchantOrderKey is the idempotency key ("" for none) of the order of scope that holds the
// merchant's order id merchantID, read as last committed; payment.ErrNotFound if no order does.
func (tx *Tx) MerchantOrderKey(ctx context.Context, scope, merchantID string) (string, error) {
	const q = `SELECT COALESCE(idem_key, '') FROM orders WHERE idem_scope = ? AND merchant_order_id = ?`
	var key string
	if err := tx.x.GetContext(ctx, &key, q, scope, merchantID); err != nil {
		return "", notFound(err)
	}
	return key, nil
}

// MarkPaid is the conditional state change of a payment: it succeeds only for a WAIT_PAY order
// asking for exactly this amount and currency, with no refund of this payment waiting for it in
// the ledger, and writes its order.paid event, stamped at. ok is false when no row matched (and
// nothing was written); the caller then reads the order to tell why.
func (tx *Tx) MarkPaid(ctx context.Context, tradeNo, channel, txnID string, amountFen int64, currency string, paidAt, at time.Time) (ok bool, err error) {
	const q = `UPDATE orders SET status = 'PAID', channel = ?, channel_txn_id = ?, paid_time = ?
		WHERE trade_no = ? AND status = 'WAIT_PAY' AND amount_fen = ? AND currency = ?
		AND NOT EXISTS (SELECT 1 FROM refund r WHERE r.channel = ? AND r.channel_txn_id = ? AND r.status = 'PENDING')`
	ok, err = changed(tx.x.ExecContext(ctx, q, channel, txnID, paidAt, tradeNo, amountFen, currency, channel, txnID))
	return tx.withEvent(ctx, ok, err, payment.EventOrderPaid, tradeNo, at)
}

// MarkPaidWithPending is MarkPaid for an order the caller has locked and knows to have refunds
// pending: the caller counts them in within the same transaction.
func (tx *Tx) MarkPaidWithPending(ctx context.Context, tradeNo, channel, txnID string, amountFen int64, currency string, paidAt, at time.Time) (ok bool, err error) {
	const q = `UPDATE orders SET status = 'PAID', channel = ?, channel_txn_id = ?, paid_time = ?
		WHERE trade_no = ? AND status = 'WAIT_PAY' AND amount_fen = ? AND currency = ?`
	ok, err = changed(tx.x.ExecContext(ctx, q, channel, txnID, paidAt, tradeNo, amountFen, currency))
	return tx.withEvent(ctx, ok, err, payment.EventOrderPaid, tradeNo, at)
}

// MarkClosed closes a WAIT_PAY order and writes its order.closed event, stamped at; ok is false
// if it was not WAIT_PAY (or does not exist), and nothing was written.
func (tx *Tx) MarkClosed(ctx context.Context, tradeNo string, at time.Time) (ok bool, err error) {
	const q = `UPDATE orders SET status = 'CLOSED' WHERE trade_no = ? AND status = 'WAIT_PAY'`
	ok, err = changed(tx.x.ExecContext(ctx, q, tradeNo))
	return tx.withEvent(ctx, ok, err, payment.EventOrderClosed, tradeNo, at)
}

// withEvent writes the event of a state change that happened (ok), and passes its result on.
func (tx *Tx) withEvent(ctx context.Context, ok bool, err error, typ, tradeNo string, at time.Time, fields ...eventField) (bool, error) {
	if err != nil || !ok {
		return ok, err
	}
	if err := tx.insertEvent(ctx, typ, tradeNo, at, fields...); err != nil {
		return false, err
	}
	return true, nil
}

// OrderByIdemKey finds the order created for an idempotency key, with the request_hash of the
// create that made it ("" for orders from before it was stored). payment.ErrNotFound if none.
func (db *DB) OrderByIdemKey(ctx context.Context, scope, key string) (payment.Order, string, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE idem_scope = ? AND idem_key = ?`
	var r orderRow
	if err := db.x.GetContext(ctx, &r, q, scope, key); err != nil {
		return payment.Order{}, "", notFound(err)
	}
	return r.order(), r.RequestHash.String, nil
}

// LockOrderByChannelTxn reads, with a row lock, the order a channel transaction paid.
// Returns payment.ErrNotFound if none.
func (tx *Tx) LockOrderByChannelTxn(ctx context.Context, channel, txnID string) (payment.Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE channel = ? AND channel_txn_id = ? LIMIT 1 FOR UPDATE`
	return getOrder(ctx, tx.x, q, channel, txnID)
}

// LockOrder reads an order with a row lock, so the decision taken on it holds until commit.
// Returns payment.ErrNotFound for an unknown trade_no.
func (tx *Tx) LockOrder(ctx context.Context, tradeNo string) (payment.Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE trade_no = ? FOR UPDATE`
	return getOrder(ctx, tx.x, q, tradeNo)
}

type getter interface {
	GetContext(ctx context.Context, dest any, query string, args ...any) error
}

func getOrder(ctx context.Context, x getter, q string, args ...any) (payment.Order, error) {
	var r orderRow
	if err := x.GetContext(ctx, &r, q, args...); err != nil {
		return payment.Order{}, notFound(err)
	}
	return r.order(), nil
}

func changed(res interface{ RowsAffected() (int64, error) }, err error) (bool, error) {
	if err := oneRow(res, err); errors.Is(err, ErrFenced) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
