package repository

import (
	"context"
	"database/sql"
	"time"
	"unicode/utf8"

	"github.com/paygw/paygw/payment"
)

// notificationRow is one notify_journal row, without the raw body.
type notificationRow struct {
	Channel       string    `db:"channel"`
	Source        string    `db:"source"`
	NotifyID      string    `db:"notify_id"`
	TradeNo       string    `db:"trade_no"`
	ChannelTxnID  string    `db:"channel_txn_id"`
	Event         string    `db:"event"`
	ChannelStatus string    `db:"channel_status"`
	AmountFen     int64     `db:"amount_fen"`
	Currency      string    `db:"currency"`
	Subject       string    `db:"subject"`
	Outcome       string    `db:"outcome"`
	ReceivedTime  time.Time `db:"received_time"`
}

func (r notificationRow) notification() payment.Notification {
	return payment.Notification{
		Channel: r.Channel, Source: payment.Source(r.Source), NotifyID: r.NotifyID, TradeNo: r.TradeNo, ChannelTxnID: r.ChannelTxnID,
		Event: payment.Kind(r.Event), ChannelStatus: r.ChannelStatus, AmountFen: r.AmountFen,
		Currency: r.Currency, Subject: r.Subject, Outcome: payment.Outcome(r.Outcome), ReceivedTime: r.ReceivedTime,
	}
}

// anomalyRow is one anomaly row.
type anomalyRow struct {
	ID                int64          `db:"id"`
	Kind              string         `db:"kind"`
	TradeNo           string         `db:"trade_no"`
	Channel           string         `db:"channel"`
	ChannelTxnID      string         `db:"channel_txn_id"`
	AmountFen         int64          `db:"amount_fen"`
	Currency          string         `db:"currency"`
	ExpectedAmountFen sql.NullInt64  `db:"expected_amount_fen"`
	Detail            string         `db:"detail"`
	Status            string         `db:"status"`
	CreatedTime       time.Time      `db:"created_time"`
	ResolvedBy        sql.NullString `db:"resolved_by"`
	ResolvedAt        sql.NullTime   `db:"resolved_at"`
	ResolveNote       sql.NullString `db:"resolve_note"`
}

const anomalyColumns = `id, kind, trade_no, channel, channel_txn_id, amount_fen, currency, expected_amount_fen,
	detail, status, created_time, resolved_by, resolved_at, resolve_note`

func (r anomalyRow) anomaly() payment.Anomaly {
	a := payment.Anomaly{
		ID: r.ID, Kind: payment.Outcome(r.Kind), TradeNo: r.TradeNo, Channel: r.Channel, ChannelTxnID: r.ChannelTxnID,
		AmountFen: r.AmountFen, Currency: r.Currency, Detail: r.Detail, Status: r.Status, CreatedTime: r.CreatedTime,
	}
	if r.ExpectedAmountFen.Valid {
		v := r.ExpectedAmountFen.Int64
		a.ExpectedAmountFen = &v
	}
	if r.ResolvedAt.Valid {
		t := r.ResolvedAt.Time
		a.ResolvedAt = &t
	}
	a.ResolvedBy, a.ResolveNote = r.ResolvedBy.String, r.ResolveNote.String
	return a
}

// Journal records a verified notification's first delivery inside the apply transaction; a
// retry of the same notify id leaves the first row as it is.
func (tx *Tx) Journal(ctx context.Context, ev payment.Event, outcome payment.Outcome, received time.Time) error {
	return journal(ctx, tx.x, ev, outcome, received)
}

// Journal records a notification on its own, for a repeat that reached us with a notify id not
// seen before (TRADE_FINISHED after TRADE_SUCCESS): nothing else changes, so no transaction.
func (db *DB) Journal(ctx context.Context, ev payment.Event, outcome payment.Outcome, received time.Time) error {
	return journal(ctx, db.x, ev, outcome, received)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// journal inserts once per (channel, notify_id). ON DUPLICATE KEY keeps the first row without
// INSERT IGNORE's habit of turning other errors (truncation) into warnings.
func journal(ctx context.Context, x execer, ev payment.Event, outcome payment.Outcome, received time.Time) error {
	_, err := x.ExecContext(ctx, journalInsert+journalRow+journalOnce, journalArgs(ev, outcome, received)...)
	return err
}

// The journal's INSERT, in parts: one journalRow per notification (JournalGroup writes several).
const (
	journalInsert = `INSERT INTO notify_journal (channel, source, notify_id, trade_no, channel_txn_id, event,
		channel_status, amount_fen, currency, subject, raw_body, outcome, received_time) VALUES `
	journalRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	journalOnce = ` ON DUPLICATE KEY UPDATE id = id`
)

// journalArgs are one journalRow's values.
func journalArgs(ev payment.Event, outcome payment.Outcome, received time.Time) []any {
	source := ev.Source
	if source == "" {
		source = payment.SourceNotify
	}
	return []any{ev.Channel, string(source), ev.NotifyID, ev.TradeNo, ev.ChannelTxnID, string(ev.Kind),
		clip(ev.Status, 64), ev.AmountFen, ev.Currency, clip(ev.Subject, 256), ev.Raw, string(outcome), received}
}

// Seen reports, in one statement, whether an event's idempotent_record exists and whether this
// notification is journalled: what a repeat needs to know when Redis cannot tell.
func (db *DB) Seen(ctx context.Context, bizType, channel, key, notifyID string) (recorded, journalled bool, err error) {
	const q = `SELECT
		EXISTS (SELECT 1 FROM idempotent_record WHERE idem_digest = ? AND idem_key = ? AND biz_type = ? AND scope = ?),
		EXISTS (SELECT 1 FROM notify_journal WHERE channel = ? AND notify_id = ?)`
	err = db.x.QueryRowContext(ctx, q, IdemDigest(bizType, channel, key), key, bizType, channel, channel, notifyID).Scan(&recorded, &journalled)
	return recorded, journalled, err
}

// FlagAnomaly records an anomaly once per (kind, channel, channel txn id), and with a new one of
// an order its payment.anomaly event, stamped a.CreatedTime: the anomaly's own amount, currency,
// channel and transaction, beside the order's other fields.
func (tx *Tx) FlagAnomaly(ctx context.Context, a payment.Anomaly) error {
	const q = `INSERT INTO anomaly (kind, trade_no, channel, channel_txn_id, amount_fen, currency,
		expected_amount_fen, detail, created_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE id = id`
	detail := clip(a.Detail, 512)
	res, err := tx.x.ExecContext(ctx, q, string(a.Kind), a.TradeNo, a.Channel, a.ChannelTxnID, a.AmountFen, a.Currency,
		a.ExpectedAmountFen, detail, a.CreatedTime)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected() // 1: inserted; 0: flagged before
	if err != nil || n != 1 || a.TradeNo == "" {
		return err
	}
	return tx.insertEvent(ctx, payment.EventPaymentAnomaly, a.TradeNo, a.CreatedTime,
		bound("amount_fen", a.AmountFen), bound("currency", a.Currency), bound("channel", a.Channel),
		bound("channel_txn_id", a.ChannelTxnID), bound("kind", string(a.Kind)),
		bound("expected_amount_fen", a.ExpectedAmountFen), bound("detail", detail))
}

// LockPaymentAnomaly reads, with a row lock, the anomaly of a payment that was recorded but not
// applied (AMOUNT_MISMATCH, PAID_AFTER_CLOSE, DUPLICATE_PAYMENT). payment.ErrNotFound if none.
func (tx *Tx) LockPaymentAnomaly(ctx context.Context, channel, txnID string) (payment.Anomaly, error) {
	const q = `SELECT ` + anomalyColumns + ` FROM anomaly WHERE channel = ? AND channel_txn_id = ?
		AND kind IN ('AMOUNT_MISMATCH', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT') ORDER BY id LIMIT 1 FOR UPDATE`
	var r anomalyRow
	if err := tx.x.GetContext(ctx, &r, q, channel, txnID); err != nil {
		return payment.Anomaly{}, notFound(err)
	}
	return r.anomaly(), nil
}

// MarkAnomalyRefunded says the payment an anomaly is about has been refunded by the channel.
func (tx *Tx) MarkAnomalyRefunded(ctx context.Context, kind payment.Outcome, channel, txnID string) error {
	const q = `UPDATE anomaly SET status = 'refunded' WHERE kind = ? AND channel = ? AND channel_txn_id = ?`
	_, err := tx.x.ExecContext(ctx, q, string(kind), channel, txnID)
	return err
}

// ListAnomalies pages through anomalies in id order after cursor: of kind when given, and only
// unresolved ones when unresolved.
func (db *DB) ListAnomalies(ctx context.Context, kind string, unresolved bool, cursor int64, limit int) ([]payment.Anomaly, error) {
	const q = `SELECT ` + anomalyColumns + ` FROM anomaly WHERE (? = '' OR kind = ?) AND (NOT ? OR resolved_at IS NULL)
		AND id > ? ORDER BY id LIMIT ?`
	return selectAll(ctx, db, anomalyRow.anomaly, q, kind, kind, unresolved, cursor, limit)
}

// ResolveAnomaly records that a person resolved an anomaly. payment.ErrNotFound for an unknown
// id, payment.ErrConflict when it was resolved already.
func (db *DB) ResolveAnomaly(ctx context.Context, id int64, by, note string, at time.Time) (payment.Anomaly, error) {
	const q = `UPDATE anomaly SET resolved_by = ?, resolved_at = ?, resolve_note = ? WHERE id = ? AND resolved_at IS NULL`
	res, err := db.x.ExecContext(ctx, q, by, at, clip(note, 512), id)
	if err != nil {
		return payment.Anomaly{}, err
	}
	var a anomalyRow
	if err := db.x.GetContext(ctx, &a, `SELECT `+anomalyColumns+` FROM anomaly WHERE id = ?`, id); err != nil {
		return payment.Anomaly{}, notFound(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return payment.Anomaly{}, err
	} else if n == 0 {
		return a.anomaly(), payment.ErrConflict
	}
	return a.anomaly(), nil
}

// Notifications lists the journal of one trade_no, oldest first.
func (db *DB) Notifications(ctx context.Context, tradeNo string) ([]payment.Notification, error) {
	const q = `SELECT channel, source, notify_id, trade_no, channel_txn_id, event, channel_status, amount_fen,
		currency, subject, outcome, received_time FROM notify_journal WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, notificationRow.notification, q, tradeNo)
}

// Anomalies lists the anomalies of one trade_no, oldest first.
func (db *DB) Anomalies(ctx context.Context, tradeNo string) ([]payment.Anomaly, error) {
	const q = `SELECT ` + anomalyColumns + ` FROM anomaly WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, anomalyRow.anomaly, q, tradeNo)
}

// clip cuts an informational field to its column's width (channel_status is VARCHAR(64)): a long
// channel status word must not make a verified notification fail to journal, forever.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
