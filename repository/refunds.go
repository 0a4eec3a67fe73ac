package repository

import (
	"context"
	"time"

	"github.com/paygw/paygw/payment"
)

// refundRow is one refund row.
type refundRow struct {
	Channel      string    `db:"channel"`
	RefundID     string    `db:"refund_id"`
	TradeNo      string    `db:"trade_no"`
	ChannelTxnID string    `db:"channel_txn_id"`
	StatedFen    int64     `db:"stated_fen"`
	StatedTotal  bool      `db:"stated_total"`
	AmountFen    int64     `db:"amount_fen"`
	Currency     string    `db:"currency"`
	Status       string    `db:"status"`
	CreatedTime  time.Time `db:"created_time"`
}

const refundColumns = `channel, refund_id, trade_no, channel_txn_id, stated_fen, stated_total, amount_fen,
	currency, status, created_time`

func (r refundRow) refund() payment.Refund {
	return payment.Refund{
		Channel: r.Channel, RefundID: r.RefundID, TradeNo: r.TradeNo, ChannelTxnID: r.ChannelTxnID,
		AmountFen: r.AmountFen, Currency: r.Currency, Status: r.Status, CreatedTime: r.CreatedTime,
	}
}

// PendingRefund is a refund that arrived before its payment was applied, as the channel stated
// it: an amount, or (StatedTotal) the payment's running refunded total.
type PendingRefund struct {
	RefundID    string
	TradeNo     string // the order it was counted against
	StatedFen   int64
	StatedTotal bool
}

// InsertRefund records a refund once per (channel, refund id), with what the channel stated (see
// PendingRefund). Returns payment.ErrConflict if it is recorded already.
func (tx *Tx) InsertRefund(ctx context.Context, r payment.Refund, statedFen int64, statedTotal bool) error {
	const q = `INSERT INTO refund (channel, refund_id, trade_no, channel_txn_id, stated_fen, stated_total,
		amount_fen, currency, status, created_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.x.ExecContext(ctx, q, r.Channel, r.RefundID, r.TradeNo, r.ChannelTxnID, statedFen,
		statedTotal, r.AmountFen, r.Currency, r.Status, r.CreatedTime)
	return conflict(err)
}

// AddRefunded grows a PAID order's refunded_fen by fen, only while the sum stays within what was
// paid; ok is false otherwise (the caller holds the order's lock and has checked already, so a
// false here is a bug the CHECK constraint would also stop).
func (tx *Tx) AddRefunded(ctx context.Context, tradeNo string, fen int64) (ok bool, err error) {
	const q = `UPDATE orders SET refunded_fen = refunded_fen + ?
		WHERE trade_no = ? AND status = 'PAID' AND refunded_fen + ? <= amount_fen`
	return changed(tx.x.ExecContext(ctx, q, fen, tradeNo, fen))
}

// AddRefundsPending changes an order's count of refunds waiting for their payment by delta.
func (tx *Tx) AddRefundsPending(ctx context.Context, tradeNo string, delta int) error {
	const q = `UPDATE orders SET refunds_pending = refunds_pending + ? WHERE trade_no = ?`
	res, err := tx.x.ExecContext(ctx, q, delta, tradeNo)
	return oneRow(res, err)
}

// LockPendingRefunds reads, with row locks, the refunds of one payment still waiting for it,
// oldest first.
func (tx *Tx) LockPendingRefunds(ctx context.Context, channel, txnID string) ([]PendingRefund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund
		WHERE channel = ? AND channel_txn_id = ? AND status = 'PENDING' ORDER BY id FOR UPDATE`
	var rows []refundRow
	if err := tx.x.SelectContext(ctx, &rows, q, channel, txnID); err != nil {
		return nil, err
	}
	pending := make([]PendingRefund, len(rows))
	for i, r := range rows {
		pending[i] = PendingRefund{RefundID: r.RefundID, TradeNo: r.TradeNo, StatedFen: r.StatedFen, StatedTotal: r.StatedTotal}
	}
	return pending, nil
}

// SettleRefund moves a PENDING refund to its final status, with what it added to refunded_fen.
func (tx *Tx) SettleRefund(ctx context.Context, channel, refundID, status string, amountFen int64) error {
	const q = `UPDATE refund SET status = ?, amount_fen = ? WHERE channel = ? AND refund_id = ? AND status = 'PENDING'`
	res, err := tx.x.ExecContext(ctx, q, status, amountFen, channel, refundID)
	return oneRow(res, err)
}

// Refunds lists the refunds of one trade_no, oldest first.
func (db *DB) Refunds(ctx context.Context, tradeNo string) ([]payment.Refund, error) {
	const q = `SELECT ` + refundColumns + ` FROM refund WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, refundRow.refund, q, tradeNo)
}
