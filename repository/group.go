package repository

import (
	"context"
	"strings"
	"time"

	"github.com/paygw/paygw/payment"
)

// The statements of group apply (apply/group.go): several first-time payments in one
// transaction, a handful of statements for the whole group. Each takes every row of the group in
// one statement, with every value bound.

// PaidItem is one payment of a group: the order it pays and what the channel says.
type PaidItem struct {
	TradeNo      string
	Channel      string
	ChannelTxnID string
	AmountFen    int64
	Currency     string
	PaidAt       time.Time
}

// LockPayable locks, among the orders the given payments are for, those the fast path may pay:
// WAIT_PAY, with no refund waiting in the ledger for one of these payments under this order or
// under no order (an over-wide match only sends a payment to the one-by-one path, which counts
// such refunds in). It returns them by trade_no with the amount and currency they ask for; the
// caller pays those whose payment matches and leaves the rest to the one-by-one path.
func (tx *Tx) LockPayable(ctx context.Context, pays []PaidItem) (map[string]PaidItem, error) {
	q := `SELECT o.trade_no, o.amount_fen, o.currency FROM orders o
		WHERE o.trade_no IN (` + placeholders(len(pays), "?") + `) AND o.status = 'WAIT_PAY'
		AND NOT EXISTS (SELECT 1 FROM refund r WHERE r.channel IN (` + placeholders(len(pays), "?") + `)
			AND r.channel_txn_id IN (` + placeholders(len(pays), "?") + `) AND r.status = 'PENDING'
			AND r.trade_no IN (o.trade_no, ''))
		FOR UPDATE`
	n := len(pays)
	args := make([]any, 3*n) // the trade_nos, then the channels, then the transactions
	for i, p := range pays {
		args[i], args[n+i], args[2*n+i] = p.TradeNo, p.Channel, p.ChannelTxnID
	}
	// Scanned by hand, not by sqlx's reflection: this is the notify path's group apply.
	rows, err := tx.x.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]PaidItem, len(pays))
	for rows.Next() {
		var it PaidItem
		if err := rows.Scan(&it.TradeNo, &it.AmountFen, &it.Currency); err != nil {
			return nil, err
		}
		out[it.TradeNo] = it
	}
	return out, rows.Err()
}

// MarkPaidGroup moves every order of items (locked by LockPayable, distinct trade_nos) from
// WAIT_PAY to PAID in one statement, and returns how many it moved; when it moved them all, it
// writes their order.paid events, stamped at, in one more.
func (tx *Tx) MarkPaidGroup(ctx context.Context, items []PaidItem, at time.Time) (int64, error) {
	var b strings.Builder
	args := make([]any, 0, 7*len(items))
	set := func(col string, val func(PaidItem) any) {
		b.WriteString(col + " = CASE trade_no")
		for _, it := range items {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, it.TradeNo, val(it))
		}
		b.WriteString(" END")
	}
	b.WriteString("UPDATE orders SET status = 'PAID', ")
	set("channel", func(it PaidItem) any { return it.Channel })
	b.WriteString(", ")
	set("channel_txn_id", func(it PaidItem) any { return it.ChannelTxnID })
	b.WriteString(", ")
	set("paid_time", func(it PaidItem) any { return it.PaidAt })
	b.WriteString(" WHERE trade_no IN (" + placeholders(len(items), "?") + ") AND status = 'WAIT_PAY'")
	for _, it := range items {
		args = append(args, it.TradeNo)
	}
	res, err := tx.x.ExecContext(ctx, b.String(), args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n != int64(len(items)) {
		return n, err // the caller rolls back
	}
	tradeNos := make([]string, len(items))
	for i, it := range items {
		tradeNos[i] = it.TradeNo
	}
	return n, tx.insertEvents(ctx, payment.EventOrderPaid, tradeNos, at)
}

// DoneRecord is one idempotent_record of a group, final from birth.
type DoneRecord struct {
	BizType, Scope, Key, Hash string
	Result                    []byte
}

// InsertDoneRecords writes the group's records in one statement and returns the first one's
// id. payment.ErrConflict when any of them exists already (the statement writes none then).
func (tx *Tx) InsertDoneRecords(ctx context.Context, recs []DoneRecord) (int64, error) {
	q := doneRecordInsert + placeholders(len(recs), doneRecordRow)
	args := make([]any, 0, 5*len(recs))
	for _, r := range recs {
		args = append(args, r.Key, r.BizType, r.Scope, r.Hash, string(r.Result))
	}
	res, err := tx.x.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, conflict(err)
	}
	return res.LastInsertId()
}

// JournalGroup journals the group's notifications in one statement, once per (channel,
// notify_id) like Journal.
func (tx *Tx) JournalGroup(ctx context.Context, evs []payment.Event, outcome payment.Outcome, received time.Time) error {
	q := journalInsert + placeholders(len(evs), journalRow) + journalOnce
	args := make([]any, 0, 13*len(evs))
	for _, ev := range evs {
		args = append(args, journalArgs(ev, outcome, received)...)
	}
	_, err := tx.x.ExecContext(ctx, q, args...)
	return err
}

// TryTx is InTx without the retries: one attempt, whose error the caller handles (group apply
// answers a failed group by applying each of its items alone, through InTx).
func (db *DB) TryTx(ctx context.Context, fn func(tx *Tx) error) error {
	start := time.Now()
	defer func() { db.Metrics.TxDone(time.Since(start)) }()
	return db.tryTx(ctx, fn)
}

// placeholders is n copies of one row's placeholder text, comma-separated.
func placeholders(n int, one string) string {
	return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}
