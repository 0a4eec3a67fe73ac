package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"
)

// ReconRun is one bill run of a channel's day.
type ReconRun struct {
	ID         int64          `db:"id"`
	Channel    string         `db:"channel"`
	BillDate   time.Time      `db:"bill_date"`
	StartedAt  time.Time      `db:"started_at"`
	FinishedAt sql.NullTime   `db:"finished_at"`
	Lines      int            `db:"line_count"`
	BadLines   int            `db:"bad_lines"`
	Trusted    bool           `db:"trusted"`
	CountsJSON sql.NullString `db:"counts_json"`
}

const reconRunColumns = `id, channel, bill_date, started_at, finished_at, line_count, bad_lines, trusted, counts_json`

// Counts decodes the run's lines per class.
func (r ReconRun) Counts() map[string]int {
	counts := map[string]int{}
	_ = json.Unmarshal([]byte(r.CountsJSON.String), &counts) // written by FinishRun
	return counts
}

// StartRun opens the run of (channel, day) for staging: its staged lines from a previous run
// go; its discrepancies stay until ResetRun, so a bill that turns out unreadable leaves the last
// good run's rows as they were.
func (db *DB) StartRun(ctx context.Context, channel string, day time.Time, now time.Time) (int64, error) {
	var id int64
	err := db.InTx(ctx, func(tx *Tx) error {
		const upsert = `INSERT INTO recon_run (channel, bill_date, started_at) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`
		res, err := tx.x.ExecContext(ctx, upsert, channel, day.Format(time.DateOnly), now)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		_, err = tx.x.ExecContext(ctx, `DELETE FROM recon_line WHERE run_id = ?`, id)
		return err
	})
	return id, err
}

// ResetRun starts a run's classification afresh once its bill is staged whole: the previous
// run's discrepancies of the day go, and nothing else changes.
func (db *DB) ResetRun(ctx context.Context, runID int64, now time.Time) error {
	return db.InTx(ctx, func(tx *Tx) error {
		const reset = `UPDATE recon_run SET started_at = ?, finished_at = NULL, line_count = 0, bad_lines = 0, trusted = 1,
			counts_json = NULL WHERE id = ?`
		if _, err := tx.x.ExecContext(ctx, reset, now, runID); err != nil {
			return err
		}
		_, err := tx.x.ExecContext(ctx, `DELETE FROM recon_discrepancy WHERE run_id = ?`, runID)
		return err
	})
}

// BillLine is a bill line as the run stages it.
type BillLine struct {
	No           int       `db:"line_no"`
	Kind         string    `db:"kind"`
	TradeNo      string    `db:"trade_no"`
	ChannelTxnID string    `db:"channel_txn_id"`
	RefundID     string    `db:"refund_id"`
	AmountFen    int64     `db:"amount_fen"`
	Currency     string    `db:"currency"`
	Time         time.Time `db:"line_time"`
}

// StageLines inserts a batch of a run's bill lines in one statement.
func (db *DB) StageLines(ctx context.Context, runID int64, lines []BillLine) error {
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO recon_line (run_id, line_no, kind, trade_no, channel_txn_id, refund_id, amount_fen, currency, line_time) VALUES `)
	args := make([]any, 0, len(lines)*9)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, runID, l.No, l.Kind, clip(l.TradeNo, 64), clip(l.ChannelTxnID, 128), clip(l.RefundID, 128), l.AmountFen, l.Currency, l.Time)
	}
	_, err := db.x.ExecContext(ctx, b.String(), args...)
	return err
}

// PayMatch is a staged payment line and the order it names (empty when none): the order paid by
// its transaction when there is one, else the order its trade_no names.
type PayMatch struct {
	BillLine
	ByTxn        bool           `db:"by_txn"`
	OrderTradeNo sql.NullString `db:"o_trade_no"`
	OrderAmount  sql.NullInt64  `db:"o_amount_fen"`
	OrderCur     sql.NullString `db:"o_currency"`
	OrderStatus  sql.NullString `db:"o_status"`
}

// PayMatches reads a run's payment lines after line afterNo, in line order, batch at a time, each
// with its order.
func (db *DB) PayMatches(ctx context.Context, runID int64, channel string, afterNo, batch int) ([]PayMatch, error) {
	const q = `SELECT l.line_no, l.kind, l.trade_no, l.channel_txn_id, l.refund_id, l.amount_fen, l.currency, l.line_time,
			(p.trade_no IS NOT NULL) AS by_txn,
			COALESCE(p.trade_no, o.trade_no) AS o_trade_no, COALESCE(p.amount_fen, o.amount_fen) AS o_amount_fen,
			COALESCE(p.currency, o.currency) AS o_currency, COALESCE(p.status, o.status) AS o_status
		FROM recon_line l
		LEFT JOIN orders p ON p.channel = ? AND p.channel_txn_id = l.channel_txn_id
		LEFT JOIN orders o ON p.trade_no IS NULL AND o.trade_no = l.trade_no
		WHERE l.run_id = ? AND l.kind = 'PAY' AND l.line_no > ?
		ORDER BY l.line_no LIMIT ?`
	var rows []PayMatch
	err := db.x.SelectContext(ctx, &rows, q, channel, runID, afterNo, batch)
	return rows, err
}

// RefundLines reads a run's refund lines after line afterNo, in line order.
func (db *DB) RefundLines(ctx context.Context, runID int64, afterNo, batch int) ([]BillLine, error) {
	const q = `SELECT line_no, kind, trade_no, channel_txn_id, refund_id, amount_fen, currency, line_time
		FROM recon_line WHERE run_id = ? AND kind = 'REFUND' AND line_no > ? ORDER BY line_no LIMIT ?`
	var rows []BillLine
	err := db.x.SelectContext(ctx, &rows, q, runID, afterNo, batch)
	return rows, err
}

// LocalPayment is a payment this channel made to one of our orders.
type LocalPayment struct {
	ID           int64     `db:"id"`
	TradeNo      string    `db:"trade_no"`
	ChannelTxnID string    `db:"channel_txn_id"`
	AmountFen    int64     `db:"amount_fen"`
	PaidTime     time.Time `db:"paid_time"`
}

// LocalOnly reads, in key order from after id afterID, the orders the channel paid in [from, to)
// whose payment no bill line of the channel's days first..last shows.
func (db *DB) LocalOnly(ctx context.Context, channel string, from, to time.Time, first, last time.Time, afterID int64, batch int) ([]LocalPayment, error) {
	const q = `SELECT o.id, o.trade_no, o.channel_txn_id, o.amount_fen, o.paid_time FROM orders o
		WHERE o.channel = ? AND o.paid_time >= ? AND o.paid_time < ? AND o.status = 'PAID' AND o.id > ?
		  AND NOT EXISTS (SELECT 1 FROM recon_line l JOIN recon_run r ON r.id = l.run_id
			WHERE r.channel = ? AND r.bill_date BETWEEN ? AND ? AND l.kind = 'PAY' AND l.channel_txn_id = o.channel_txn_id)
		ORDER BY o.id LIMIT ?`
	var rows []LocalPayment
	err := db.x.SelectContext(ctx, &rows, q, channel, from, to, afterID, channel, first.Format(time.DateOnly), last.Format(time.DateOnly), batch)
	return rows, err
}

// RunOf reads the run of (channel, day); payment.ErrNotFound if there is none.
func (db *DB) RunOf(ctx context.Context, channel string, day time.Time) (ReconRun, error) {
	const q = `SELECT ` + reconRunColumns + ` FROM recon_run WHERE channel = ? AND bill_date = ?`
	var r ReconRun
	err := db.x.GetContext(ctx, &r, q, channel, day.Format(time.DateOnly))
	return r, notFound(err)
}

// Discrepancy is one row of recon_discrepancy.
type Discrepancy struct {
	ID             int64         `db:"id"`
	RunID          int64         `db:"run_id"`
	Channel        string        `db:"channel"`
	BillDate       time.Time     `db:"bill_date"`
	LineKey        string        `db:"line_key"`
	Class          string        `db:"class"`
	TradeNo        string        `db:"trade_no"`
	ChannelTxnID   string        `db:"channel_txn_id"`
	BillAmountFen  sql.NullInt64 `db:"bill_amount_fen"`
	LocalAmountFen sql.NullInt64 `db:"local_amount_fen"`
	LocalStatus    string        `db:"local_status"`
	Repair         string        `db:"repair"`
	Detail         string        `db:"detail"`
}

const discrepancyColumns = `id, run_id, channel, bill_date, line_key, class, trade_no, channel_txn_id, bill_amount_fen,
	local_amount_fen, local_status, repair, detail`

// PutDiscrepancy stores one discrepancy, replacing the row of the same line key of the day.
func (db *DB) PutDiscrepancy(ctx context.Context, d Discrepancy) error {
	return db.PutDiscrepancies(ctx, []Discrepancy{d})
}

// PutDiscrepancies stores rows in one statement, each replacing the row of the same line key of
// its day.
func (db *DB) PutDiscrepancies(ctx context.Context, rows []Discrepancy) error {
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO recon_discrepancy (run_id, channel, bill_date, line_key, class, trade_no, channel_txn_id,
		bill_amount_fen, local_amount_fen, local_status, repair, detail) VALUES `)
	args := make([]any, 0, len(rows)*12)
	for i, d := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, d.RunID, d.Channel, d.BillDate.Format(time.DateOnly), clip(d.LineKey, 200), d.Class, clip(d.TradeNo, 64),
			clip(d.ChannelTxnID, 128), d.BillAmountFen, d.LocalAmountFen, clip(d.LocalStatus, 16), clip(d.Repair, 32), clip(d.Detail, 256))
	}
	b.WriteString(` ON DUPLICATE KEY UPDATE run_id = VALUES(run_id), class = VALUES(class), trade_no = VALUES(trade_no),
		channel_txn_id = VALUES(channel_txn_id), bill_amount_fen = VALUES(bill_amount_fen),
		local_amount_fen = VALUES(local_amount_fen), local_status = VALUES(local_status), repair = VALUES(repair),
		detail = VALUES(detail)`)
	_, err := db.x.ExecContext(ctx, b.String(), args...)
	return err
}

// PendingOf lists the PENDING rows of a run, to settle once the next day's bill is in.
func (db *DB) PendingOf(ctx context.Context, runID int64) ([]Discrepancy, error) {
	const q = `SELECT ` + discrepancyColumns + ` FROM recon_discrepancy WHERE run_id = ? AND class = 'PENDING' ORDER BY id`
	var rows []Discrepancy
	err := db.x.SelectContext(ctx, &rows, q, runID)
	return rows, err
}

// DeleteDiscrepancy removes a row that turned out not to be one.
func (db *DB) DeleteDiscrepancy(ctx context.Context, id int64) error {
	_, err := db.x.ExecContext(ctx, `DELETE FROM recon_discrepancy WHERE id = ?`, id)
	return err
}

// TxnInRun reports whether a run staged a payment line of this transaction.
func (db *DB) TxnInRun(ctx context.Context, runID int64, txnID string) (bool, error) {
	var n int
	err := db.x.GetContext(ctx, &n, `SELECT COUNT(*) FROM recon_line WHERE run_id = ? AND kind = 'PAY' AND channel_txn_id = ?`, runID, txnID)
	return n > 0, err
}

// FinishRun stores a run's totals.
func (db *DB) FinishRun(ctx context.Context, runID int64, lines, badLines int, trusted bool, counts map[string]int, now time.Time) error {
	b, _ := json.Marshal(counts) // a map of ints: cannot fail
	const q = `UPDATE recon_run SET finished_at = ?, line_count = ?, bad_lines = ?, trusted = ?, counts_json = ? WHERE id = ?`
	_, err := db.x.ExecContext(ctx, q, now, lines, badLines, trusted, string(b), runID)
	return err
}

// Runs lists runs, newest first, filtered by channel and day when given.
func (db *DB) Runs(ctx context.Context, channel string, day *time.Time) ([]ReconRun, error) {
	q := `SELECT ` + reconRunColumns + ` FROM recon_run WHERE (? = '' OR channel = ?)`
	args := []any{channel, channel}
	if day != nil {
		q += ` AND bill_date = ?`
		args = append(args, day.Format(time.DateOnly))
	}
	q += ` ORDER BY bill_date DESC, channel LIMIT 500`
	var rows []ReconRun
	err := db.x.SelectContext(ctx, &rows, q, args...)
	return rows, err
}

// Discrepancies pages through a run's rows in id order after cursor, filtered by class when given.
func (db *DB) Discrepancies(ctx context.Context, runID int64, class string, cursor int64, limit int) ([]Discrepancy, error) {
	const q = `SELECT ` + discrepancyColumns + ` FROM recon_discrepancy
		WHERE run_id = ? AND (? = '' OR class = ?) AND id > ? ORDER BY id LIMIT ?`
	var rows []Discrepancy
	err := db.x.SelectContext(ctx, &rows, q, runID, class, class, cursor, limit)
	return rows, err
}

// GetRun reads one run; payment.ErrNotFound if there is none.
func (db *DB) GetRun(ctx context.Context, id int64) (ReconRun, error) {
	var r ReconRun
	err := db.x.GetContext(ctx, &r, `SELECT `+reconRunColumns+` FROM recon_run WHERE id = ?`, id)
	return r, notFound(err)
}
