package repository

import (
	"context"
	"database/sql"
	"time"

	"github.com/paygw/paygw/payment"
)

// The refund ledger (sql/00010_refund_ledger.sql): ITEM rows, one per channel refund, and one
// TOTAL row per payment holding the largest running total any source stated. An order's
// refunded_fen is derived from its payment's APPLIED rows (RefundSums), never added to.

// TotalRefundID is the refund_id of a payment's TOTAL row.
func TotalRefundID(txnID string) string { return "total:" + txnID }

// refundRow is one refund row.
type refundRow struct {
	ID           int64          `db:"id"`
	Channel      string         `db:"channel"`
	RefundID     string         `db:"refund_id"`
	Kind         string         `db:"kind"`
	IDKnown      bool           `db:"id_known"`
	BillKey      sql.NullString `db:"bill_key"`
	TradeNo      string         `db:"trade_no"`
	ChannelTxnID string         `db:"channel_txn_id"`
	AmountFen    sql.NullInt64  `db:"amount_fen"`
	Currency     string         `db:"currency"`
	Status       string         `db:"status"`
	CreatedTime  time.Time      `db:"created_time"`
}

const refundColumns = `id, channel, refund_id, kind, id_known, bill_key, trade_no, channel_txn_id, amount_fen,
	currency, status, created_time`

func (r refundRow) refund() payment.Refund {
	f := payment.Refund{
		ID: r.ID, Channel: r.Channel, RefundID: r.RefundID, Kind: r.Kind, IDKnown: r.IDKnown, BillKey: r.BillKey.String,
		TradeNo: r.TradeNo, ChannelTxnID: r.ChannelTxnID, Currency: r.Currency, Status: r.Status, CreatedTime: r.CreatedTime,
	}
	if r.AmountFen.Valid {
		f.AmountFen = &r.AmountFen.Int64
	}
	return f
}

// getRefund reads one row; payment.ErrNotFound if none.
func getRefund(ctx context.Context, x getter, q string, args ...any) (payment.Refund, error) {
	var r refundRow
	if err := x.GetContext(ctx, &r, q, args...); err != nil {
		return payment.Refund{}, notFound(err)
	}
	return r.refund(), nil
}

// LockRefund reads, with a row lock, the refund (channel, refundID). payment.ErrNotFound if none.
func (tx *Tx) LockRefund(ctx context.Context, channel, refundID string) (payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE channel = ? AND refund_id = ? FOR UPDATE`
	return getRefund(ctx, tx.x, q, channel, refundID)
}

// LockAnonymousItem reads, with a row lock, the oldest item of a payment that a bill line without
// a refund id put in the ledger with this amount: the refund a statement with an id and the same
// amount may be. payment.ErrNotFound if none.
func (tx *Tx) LockAnonymousItem(ctx context.Context, channel, txnID string, amountFen int64) (payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE channel = ? AND channel_txn_id = ? AND kind = 'ITEM'
		AND id_known = 0 AND amount_fen = ? ORDER BY id LIMIT 1 FOR UPDATE`
	return getRefund(ctx, tx.x, q, channel, txnID, amountFen)
}

// InsertRefund puts a new row in the ledger (r.AmountFen nil: an item whose amount no source has
// stated yet) and returns its id. Returns payment.ErrConflict if (channel, refund id) or its bill
// key is there.
func (tx *Tx) InsertRefund(ctx context.Context, r payment.Refund) (int64, error) {
	const q = `INSERT INTO refund (channel, refund_id, kind, id_known, bill_key, trade_no, channel_txn_id, amount_fen,
		currency, status, created_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	res, err := tx.x.ExecContext(ctx, q, r.Channel, r.RefundID, r.Kind, r.IDKnown, nullable(r.BillKey), r.TradeNo,
		r.ChannelTxnID, r.AmountFen, r.Currency, r.Status, r.CreatedTime)
	if err != nil {
		return 0, conflict(err)
	}
	return res.LastInsertId()
}

// RaiseRefundTotal records a running total a source stated for a payment, in one statement: its
// TOTAL row becomes the larger of what it held and fen (a row that is new takes r's status), and
// when r names the refund that caused it (r.RefundID), that refund's item is there too, without an
// amount of its own (an item already there is left as it is).
func (tx *Tx) RaiseRefundTotal(ctx context.Context, r payment.Refund, fen int64) error {
	q := `INSERT INTO refund (channel, refund_id, kind, trade_no, channel_txn_id, amount_fen, currency, status,
		created_time) VALUES (?, ?, 'TOTAL', ?, ?, ?, ?, ?, ?)`
	args := []any{r.Channel, TotalRefundID(r.ChannelTxnID), r.TradeNo, r.ChannelTxnID, fen, r.Currency, r.Status, r.CreatedTime}
	if r.RefundID != "" {
		q += `, (?, ?, 'ITEM', ?, ?, NULL, ?, ?, ?)`
		args = append(args, r.Channel, r.RefundID, r.TradeNo, r.ChannelTxnID, r.Currency, r.Status, r.CreatedTime)
	}
	q += ` ON DUPLICATE KEY UPDATE amount_fen = IF(kind = 'TOTAL', GREATEST(amount_fen, VALUES(amount_fen)), amount_fen)`
	_, err := tx.x.ExecContext(ctx, q, args...)
	return err
}

// The ledger's savepoint: a refund statement is written, the payment's sums read, and the
// statement undone when they would pass what was paid.
const ledgerSavepoint = "refund_statement"

// Savepoint marks where RollbackToSavepoint returns to.
func (tx *Tx) Savepoint(ctx context.Context) error {
	_, err := tx.x.ExecContext(ctx, "SAVEPOINT "+ledgerSavepoint)
	return err
}

// RollbackToSavepoint undoes what the transaction did since Savepoint, keeping its row locks.
func (tx *Tx) RollbackToSavepoint(ctx context.Context) error {
	_, err := tx.x.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+ledgerSavepoint)
	return err
}

// UpdateRefund stores a locked row's amount, refund id, bill key and status as r holds them.
func (tx *Tx) UpdateRefund(ctx context.Context, r payment.Refund) error {
	const q = `UPDATE refund SET refund_id = ?, id_known = ?, bill_key = ?, amount_fen = ?, status = ?, trade_no = ?
		WHERE id = ?`
	res, err := tx.x.ExecContext(ctx, q, r.RefundID, r.IDKnown, nullable(r.BillKey), r.AmountFen, r.Status, r.TradeNo, r.ID)
	if err != nil {
		return conflict(err)
	}
	return oneRow(res, nil)
}

// DeleteRefund removes a row folded into another (an anonymous bill item that turned out to be a
// refund known by its id).
func (tx *Tx) DeleteRefund(ctx context.Context, id int64) error {
	res, err := tx.x.ExecContext(ctx, `DELETE FROM refund WHERE id = ?`, id)
	return oneRow(res, err)
}

// RefundSums reads, with shared locks, what the ledger holds for one payment in the given status:
// the sum of its items' amounts and its running total.
func (tx *Tx) RefundSums(ctx context.Context, channel, txnID, status string) (items, total int64, err error) {
	const q = `SELECT COALESCE(SUM(IF(kind = 'ITEM', amount_fen, 0)), 0), COALESCE(MAX(IF(kind = 'TOTAL', amount_fen, 0)), 0)
		FROM refund WHERE channel = ? AND channel_txn_id = ? AND status = ? LOCK IN SHARE MODE`
	err = tx.x.QueryRowContext(ctx, q, channel, txnID, status).Scan(&items, &total)
	return items, total, err
}

// SetRefunded sets a PAID order's refunded_fen to what its ledger now says; it never lowers it
// and never passes what was paid (ok is false then: the caller checked, so that is a bug). A
// change writes its order.refunded event, stamped at, for the refund that made it: refundID
// ("" for a running total that names none), adding refundFen to what was refunded.
func (tx *Tx) SetRefunded(ctx context.Context, tradeNo string, fen int64, refundID string, refundFen int64, at time.Time) (ok bool, err error) {
	const q = `UPDATE orders SET refunded_fen = ?
		WHERE trade_no = ? AND status = 'PAID' AND ? <= amount_fen AND ? >= refunded_fen`
	res, err := tx.x.ExecContext(ctx, q, fen, tradeNo, fen, fen)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return tx.withEvent(ctx, n == 1, err, payment.EventOrderRefunded, tradeNo, at,
			bound("refund_id", refundID), bound("refund_fen", refundFen))
	}
	// No row changed: either the value was already there (MariaDB counts changed rows: no
	// change, no event) or the guard refused. Tell them apart.
	var cur int64
	if err := tx.x.GetContext(ctx, &cur, `SELECT refunded_fen FROM orders WHERE trade_no = ?`, tradeNo); err != nil {
		return false, err
	}
	return cur == fen, nil
}

// LockPendingRefunds reads, with row locks, the rows of one payment still waiting for it, oldest
// first.
func (tx *Tx) LockPendingRefunds(ctx context.Context, channel, txnID string) ([]payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund
		WHERE channel = ? AND channel_txn_id = ? AND status = 'PENDING' ORDER BY id FOR UPDATE`
	var rows []refundRow
	if err := tx.x.SelectContext(ctx, &rows, q, channel, txnID); err != nil {
		return nil, err
	}
	out := make([]payment.Refund, len(rows))
	for i, r := range rows {
		out[i] = r.refund()
	}
	return out, nil
}

// StrandedPayment is a payment that is applied (to an order, or recorded as an anomaly) while
// refunds of it still wait as PENDING: a refund that committed while its payment was applying.
type StrandedPayment struct {
	Channel      string `db:"channel"`
	ChannelTxnID string `db:"channel_txn_id"`
}

// StrandedRefunds lists up to limit payments with PENDING refunds whose payment is recorded.
func (db *DB) StrandedRefunds(ctx context.Context, limit int) ([]StrandedPayment, error) {
	const q = `SELECT DISTINCT r.channel, r.channel_txn_id FROM refund r
		WHERE r.status = 'PENDING' AND (
			EXISTS (SELECT 1 FROM orders o WHERE o.channel = r.channel AND o.channel_txn_id = r.channel_txn_id)
			OR EXISTS (SELECT 1 FROM anomaly a WHERE a.channel = r.channel AND a.channel_txn_id = r.channel_txn_id
				AND a.kind IN ('AMOUNT_MISMATCH', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT')))
		LIMIT ?`
	var rows []StrandedPayment
	err := db.x.SelectContext(ctx, &rows, q, limit)
	return rows, err
}

// Refunds lists the refunds of one trade_no, oldest first.
func (db *DB) Refunds(ctx context.Context, tradeNo string) ([]payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, refundRow.refund, q, tradeNo)
}

// RefundByBillKey finds the refund an id-less bill line matched before. payment.ErrNotFound if none.
func (db *DB) RefundByBillKey(ctx context.Context, channel, billKey string) (payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE channel = ? AND bill_key = ?`
	return getRefund(ctx, db.x, q, channel, billKey)
}

// RefundByID finds the refund (channel, refundID). payment.ErrNotFound if none.
func (db *DB) RefundByID(ctx context.Context, channel, refundID string) (payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE channel = ? AND refund_id = ?`
	return getRefund(ctx, db.x, q, channel, refundID)
}

// MarkBilled leaves a bill line's key on the refund it stated (a refund known by its id).
func (db *DB) MarkBilled(ctx context.Context, id int64, billKey string) error {
	_, err := db.x.ExecContext(ctx, `UPDATE refund SET bill_key = ? WHERE id = ? AND bill_key IS NULL`, billKey, id)
	return conflict(err)
}

// ClaimRefund gives an id-less bill line the oldest item of its payment with its amount that no
// bill line has stated (by its id or by claiming it): the refund the line stands for. ok is false when there is none.
func (db *DB) ClaimRefund(ctx context.Context, channel, txnID string, amountFen int64, billKey string) (payment.Refund, bool, error) {
	const q = `UPDATE refund SET bill_key = ? WHERE channel = ? AND channel_txn_id = ? AND kind = 'ITEM'
		AND amount_fen = ? AND bill_key IS NULL ORDER BY id LIMIT 1`
	res, err := db.x.ExecContext(ctx, q, billKey, channel, txnID, amountFen)
	if err != nil {
		return payment.Refund{}, false, conflict(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return payment.Refund{}, false, err
	}
	r, err := db.RefundByBillKey(ctx, channel, billKey)
	return r, err == nil, err
}
