package repository

import (
	"context"
	"strings"
	"time"

	"github.com/paygw/paygw/payment"
)

// OrderFilter is what GET /v1/orders searches by; the zero value of a field does not filter.
type OrderFilter struct {
	ChannelTxnID    string // the channel's transaction that paid the order
	MerchantOrderID string
	UserID          int64 // with HasUserID
	HasUserID       bool
	Status          string
	CreatedFrom     time.Time // inclusive
	CreatedTo       time.Time // exclusive
	After           *OrderCursor
}

// OrderCursor is where a page of SearchOrders ended: results go newest first, by create_time
// and then id.
type OrderCursor struct {
	CreateTime time.Time
	ID         int64
}

// searchRow is an order with its id, for the cursor.
type searchRow struct {
	ID int64 `db:"id"`
	orderRow
}

// SearchOrders answers up to limit orders matching f, newest first, and the cursor after the
// last one. Each filter goes through an index (sql/00018_order_search.sql).
func (db *DB) SearchOrders(ctx context.Context, f OrderFilter, limit int) ([]payment.Order, OrderCursor, error) {
	var chans []string
	if f.ChannelTxnID != "" {
		// idx_channel_txn leads with the channel: name every channel an order was paid by.
		if err := db.x.SelectContext(ctx, &chans, `SELECT DISTINCT channel FROM orders WHERE channel IS NOT NULL`); err != nil {
			return nil, OrderCursor{}, err
		}
		if len(chans) == 0 {
			return nil, OrderCursor{}, nil
		}
	}
	q, args := searchQuery(f, chans, limit)
	var rows []searchRow
	if err := db.x.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, OrderCursor{}, err
	}
	out := make([]payment.Order, len(rows))
	for i, r := range rows {
		out[i] = r.order()
	}
	var last OrderCursor
	if n := len(rows); n > 0 {
		last = OrderCursor{CreateTime: rows[n-1].CreateTime, ID: rows[n-1].ID}
	}
	return out, last, nil
}

// searchQuery is the SELECT of SearchOrders; chans are the channels to look for ChannelTxnID on.
func searchQuery(f OrderFilter, chans []string, limit int) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v ...any) {
		where = append(where, cond)
		args = append(args, v...)
	}
	if f.ChannelTxnID != "" {
		for _, c := range chans {
			args = append(args, c)
		}
		add(`channel IN (`+placeholders(len(chans), "?")+`) AND channel_txn_id = ?`, f.ChannelTxnID)
	}
	if f.MerchantOrderID != "" {
		add(`merchant_order_id = ?`, f.MerchantOrderID)
	}
	if f.HasUserID {
		add(`user_id = ?`, f.UserID)
	}
	if f.Status != "" {
		add(`status = ?`, f.Status)
	}
	if !f.CreatedFrom.IsZero() {
		add(`create_time >= ?`, f.CreatedFrom)
	}
	if !f.CreatedTo.IsZero() {
		add(`create_time < ?`, f.CreatedTo)
	}
	if f.After != nil {
		add(`(create_time < ? OR (create_time = ? AND id < ?))`, f.After.CreateTime, f.After.CreateTime, f.After.ID)
	}
	q := `SELECT id, ` + orderColumns + ` FROM orders`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY create_time DESC, id DESC LIMIT ?`, append(args, limit)
}
