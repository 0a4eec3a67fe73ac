package repository

import (
	"context"
	"errors"
	"time"
)

// Order statuses.
const (
	OrderWaitPay = "WAIT_PAY"
	OrderPaid    = "PAID"
	OrderClosed  = "CLOSED"
)

// Order is one orders row. Channel, ChannelTxnID and PaidTime are set once it is PAID.
type Order struct {
	TradeNo      string     `db:"trade_no"`
	UserID       int64      `db:"user_id"`
	SKU          string     `db:"sku"`
	Num          int        `db:"num"`
	AmountFen    int64      `db:"amount_fen"`
	Currency     string     `db:"currency"`
	Status       string     `db:"status"`
	Channel      *string    `db:"channel"`
	ChannelTxnID *string    `db:"channel_txn_id"`
	PaidTime     *time.Time `db:"paid_time"`
	CreateTime   time.Time  `db:"create_time"`
	UpdateTime   time.Time  `db:"update_time"`
}

const orderColumns = `trade_no, user_id, sku, num, amount_fen, currency, status, channel, channel_txn_id,
	paid_time, create_time, update_time`

// Stock is one stock row.
type Stock struct {
	SKU      string `db:"sku" json:"sku"`
	Num      int    `db:"num" json:"num"`
	PriceFen int64  `db:"price_fen" json:"price_fen"`
}

// PutStock creates or replaces a SKU's stock level and price.
func (db *DB) PutStock(ctx context.Context, s Stock) error {
	const q = `INSERT INTO stock (sku, num, price_fen) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE num = VALUES(num), price_fen = VALUES(price_fen)`
	_, err := db.x.ExecContext(ctx, q, s.SKU, s.Num, s.PriceFen)
	return err
}

// GetStock returns ErrNotFound for an unknown SKU.
func (db *DB) GetStock(ctx context.Context, sku string) (Stock, error) {
	const q = `SELECT sku, num, price_fen FROM stock WHERE sku = ?`
	var s Stock
	err := db.x.GetContext(ctx, &s, q, sku)
	return s, notFound(err)
}

// GetOrder returns ErrNotFound for an unknown trade_no.
func (db *DB) GetOrder(ctx context.Context, tradeNo string) (Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE trade_no = ?`
	var o Order
	err := db.x.GetContext(ctx, &o, q, tradeNo)
	return o, notFound(err)
}

// TakeStock decrements a SKU by num only if that many are left, and returns its unit price.
// Returns ErrOutOfStock if too few are left and ErrNotFound for an unknown SKU.
func (tx *Tx) TakeStock(ctx context.Context, sku string, num int) (priceFen int64, err error) {
	const take = `UPDATE stock SET num = num - ? WHERE sku = ? AND num >= ?`
	res, err := tx.x.ExecContext(ctx, take, num, sku, num)
	if err = oneRow(res, err); errors.Is(err, ErrFenced) {
		const exists = `SELECT COUNT(*) FROM stock WHERE sku = ?`
		var n int
		if err := tx.x.GetContext(ctx, &n, exists, sku); err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, ErrNotFound
		}
		return 0, ErrOutOfStock
	} else if err != nil {
		return 0, err
	}
	const price = `SELECT price_fen FROM stock WHERE sku = ?` // the row is ours until commit
	err = tx.x.GetContext(ctx, &priceFen, price, sku)
	return priceFen, err
}

// InsertOrder inserts a WAIT_PAY order; scope and key ("" for none) fill uk_order_idem.
// Returns ErrDuplicate if the trade_no or the idempotency key already has an order.
func (tx *Tx) InsertOrder(ctx context.Context, o Order, scope, key string) error {
	const q = `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status,
		idem_scope, idem_key, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, 'WAIT_PAY', ?, ?, ?, ?)`
	_, err := tx.x.ExecContext(ctx, q, o.TradeNo, o.UserID, o.SKU, o.Num, o.AmountFen, o.Currency,
		nullable(scope), nullable(key), o.CreateTime, o.CreateTime)
	if isDuplicate(err) {
		return ErrDuplicate
	}
	return err
}

// MarkPaid is the conditional state change of a payment: it succeeds only for a WAIT_PAY order
// asking for exactly this amount and currency. ok is false when no row matched; the caller then
// reads the order to tell why.
func (tx *Tx) MarkPaid(ctx context.Context, tradeNo, channel, txnID string, amountFen int64, currency string, paidAt time.Time) (ok bool, err error) {
	const q = `UPDATE orders SET status = 'PAID', channel = ?, channel_txn_id = ?, paid_time = ?
		WHERE trade_no = ? AND status = 'WAIT_PAY' AND amount_fen = ? AND currency = ?`
	return changed(tx.x.ExecContext(ctx, q, channel, txnID, paidAt, tradeNo, amountFen, currency))
}

// MarkClosed closes a WAIT_PAY order; ok is false if it was not WAIT_PAY (or does not exist).
func (tx *Tx) MarkClosed(ctx context.Context, tradeNo string) (ok bool, err error) {
	const q = `UPDATE orders SET status = 'CLOSED' WHERE trade_no = ? AND status = 'WAIT_PAY'`
	return changed(tx.x.ExecContext(ctx, q, tradeNo))
}

// OrderByIdemKey finds the order created for an idempotency key; ErrNotFound if there is none.
func (db *DB) OrderByIdemKey(ctx context.Context, scope, key string) (Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE idem_scope = ? AND idem_key = ?`
	var o Order
	err := db.x.GetContext(ctx, &o, q, scope, key)
	return o, notFound(err)
}

// LockOrderByChannelTxn reads, with a row lock, the order a channel transaction paid.
// Returns ErrNotFound if none.
func (tx *Tx) LockOrderByChannelTxn(ctx context.Context, channel, txnID string) (Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE channel = ? AND channel_txn_id = ? LIMIT 1 FOR UPDATE`
	var o Order
	err := tx.x.GetContext(ctx, &o, q, channel, txnID)
	return o, notFound(err)
}

// LockOrder reads an order with a row lock, so the decision taken on it holds until commit.
// Returns ErrNotFound for an unknown trade_no.
func (tx *Tx) LockOrder(ctx context.Context, tradeNo string) (Order, error) {
	const q = `SELECT ` + orderColumns + ` FROM orders WHERE trade_no = ? FOR UPDATE`
	var o Order
	err := tx.x.GetContext(ctx, &o, q, tradeNo)
	return o, notFound(err)
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
