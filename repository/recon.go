package repository

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Run sources: where a run's lines came from. A day has one result per (channel, source), so a
// file in paygw's generic format never replaces the channel's own bill, nor the other way round.
const (
	SourceChannel = "channel" // the channel's own bill: downloaded, or a file in the channel's format
	SourceCSV     = "csv"     // paygw's generic CSV, whoever wrote it
)

// Run statuses. A run is all or nothing: until it is complete, nothing but the run itself reads
// what it staged, and the day's previous complete run stays the day's result.
const (
	RunRunning  = "running"
	RunFailed   = "failed" // its error kept; its lines and rows are gone
	RunComplete = "complete"
)

// ReconRun is one bill run of a channel's day.
type ReconRun struct {
	ID         int64          `db:"id"`
	Channel    string         `db:"channel"`
	BillDate   time.Time      `db:"bill_date"`
	Source     string         `db:"source"`
	Status     string         `db:"status"`
	StartedAt  time.Time      `db:"started_at"`
	FinishedAt sql.NullTime   `db:"finished_at"`
	Lines      int            `db:"line_count"`
	BadLines   int            `db:"bad_lines"`
	Trusted    bool           `db:"trusted"`
	CountsJSON sql.NullString `db:"counts_json"`
	TotalsJSON sql.NullString `db:"totals_json"`
	Error      string         `db:"error"`
}

const reconRunColumns = `id, channel, bill_date, source, status, started_at, finished_at, line_count, bad_lines, trusted,
	counts_json, totals_json, error`

// ClassTotal is how many of a run's lines fell in a class, in one currency, and their amount: the
// bill's amount where the line has one, else ours ("" and 0 for a line without an amount, such
// as BAD_LINE or SUMMARY_MISMATCH). Amounts of different currencies are never added together.
type ClassTotal struct {
	Class     string `json:"class"`
	Currency  string `json:"currency"`
	Count     int    `json:"count"`
	AmountFen int64  `json:"amount_fen"`
}

// Totals decodes the run's totals per class and currency, sorted by class then currency (none
// for a run completed before migration 00021).
func (r ReconRun) Totals() []ClassTotal {
	var t []ClassTotal
	_ = json.Unmarshal([]byte(r.TotalsJSON.String), &t) // written by CompleteRun
	return t
}

// Counts decodes the run's lines per class.
func (r ReconRun) Counts() map[string]int {
	counts := map[string]int{}
	_ = json.Unmarshal([]byte(r.CountsJSON.String), &counts) // written by CompleteRun
	return counts
}

// ErrRunLost means the run is no longer running (a later run of its day found it abandoned and
// failed it). It cannot complete; its caller stops.
var ErrRunLost = errors.New("the run is no longer running")

// StartRun opens a run of (channel, source, day) for staging, beside the day's earlier runs.
// Call it under the bill lease: a run of the same day still marked running is one whose process
// died or lost the lease, so it is failed here and its staged lines go.
func (db *DB) StartRun(ctx context.Context, channel, source string, day time.Time, now time.Time) (int64, error) {
	var id int64
	err := db.InTx(ctx, func(tx *Tx) error {
		var stale []int64
		const running = `SELECT id FROM recon_run WHERE channel = ? AND source = ? AND bill_date = ? AND status = 'running' FOR UPDATE`
		if err := tx.x.SelectContext(ctx, &stale, running, channel, source, day.Format(time.DateOnly)); err != nil {
			return err
		}
		for _, s := range stale {
			if err := failRun(ctx, tx, s, "abandoned: a later run of the day started while it was still marked running", now); err != nil {
				return err
			}
		}
		const insert = `INSERT INTO recon_run (channel, bill_date, source, status, started_at) VALUES (?, ?, ?, 'running', ?)`
		res, err := tx.x.ExecContext(ctx, insert, channel, day.Format(time.DateOnly), source, now)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// FailRun marks a running run failed with its error; its staged lines and rows go. A run that
// is no longer running is left as it is.
func (db *DB) FailRun(ctx context.Context, runID int64, reason string, now time.Time) error {
	return db.InTx(ctx, func(tx *Tx) error { return failRun(ctx, tx, runID, reason, now) })
}

func failRun(ctx context.Context, tx *Tx, runID int64, reason string, now time.Time) error {
	const q = `UPDATE recon_run SET status = 'failed', error = ?, finished_at = ? WHERE id = ? AND status = 'running'`
	res, err := tx.x.ExecContext(ctx, q, clip(reason, 512), now, runID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	return dropRows(ctx, tx, runID)
}

// DropRun removes a running run whole, as if it never started: a bill refused as another
// merchant's or another day's leaves nothing.
func (db *DB) DropRun(ctx context.Context, runID int64) error {
	return db.InTx(ctx, func(tx *Tx) error {
		if err := dropRows(ctx, tx, runID); err != nil {
			return err
		}
		_, err := tx.x.ExecContext(ctx, `DELETE FROM recon_run WHERE id = ? AND status = 'running'`, runID)
		return err
	})
}

func dropRows(ctx context.Context, tx *Tx, runID int64) error {
	if _, err := tx.x.ExecContext(ctx, `DELETE FROM recon_line WHERE run_id = ?`, runID); err != nil {
		return err
	}
	_, err := tx.x.ExecContext(ctx, `DELETE FROM recon_discrepancy WHERE run_id = ?`, runID)
	return err
}

// RunTotals is what a run found, stored when it completes.
type RunTotals struct {
	Lines, BadLines int
	Trusted         bool
	Counts          map[string]int
	Totals          []ClassTotal
}

// CompleteRun makes a running run the day's result, in one transaction:
//   - its totals are stored and it is complete (ErrRunLost if it was no longer running);
//   - an untrusted run's staged lines go: no other day's logic reads an untrusted bill;
//   - a trusted run becomes the day's evidence: the staged lines of the day's earlier runs go,
//     and the previous day's evidence run's PENDING rows are settled by this bill: dropped
//     when it shows the payment after all, LOCAL_ONLY otherwise (its counts follow).
//   - the run's rows become the day's discrepancies (recon_item, see items.go): found again,
//     new, repaired, or, for a trusted run, gone; a signed-off day the run finds something new
//     in is reopened.
func (db *DB) CompleteRun(ctx context.Context, runID int64, t RunTotals, now time.Time) error {
	_, err := db.CompleteRunReport(ctx, runID, t, now)
	return err
}

// Completed is what completing a run changed of its day's discrepancies.
type Completed struct {
	New      int  // items the run found first
	Reopened bool // the day was signed off and the run reopened it
}

// CompleteRunReport is CompleteRun, saying what the run changed of its day.
func (db *DB) CompleteRunReport(ctx context.Context, runID int64, t RunTotals, now time.Time) (Completed, error) {
	counts, _ := json.Marshal(t.Counts) // a map of ints: cannot fail
	totals, _ := json.Marshal(sortTotals(t.Totals))
	var out Completed
	err := db.InTx(ctx, func(tx *Tx) error {
		out = Completed{}
		var r ReconRun
		if err := tx.x.GetContext(ctx, &r, `SELECT `+reconRunColumns+` FROM recon_run WHERE id = ? FOR UPDATE`, runID); err != nil {
			return notFound(err)
		}
		if r.Status != RunRunning {
			return fmt.Errorf("%w: run %d is %s", ErrRunLost, runID, r.Status)
		}
		const done = `UPDATE recon_run SET status = 'complete', finished_at = ?, line_count = ?, bad_lines = ?, trusted = ?,
			counts_json = ?, totals_json = ? WHERE id = ?`
		if _, err := tx.x.ExecContext(ctx, done, now, t.Lines, t.BadLines, t.Trusted, string(counts), string(totals), runID); err != nil {
			return err
		}
		var err error
		if out, err = syncItems(ctx, tx, r, t.Trusted, now); err != nil {
			return err
		}
		if !t.Trusted {
			_, err := tx.x.ExecContext(ctx, `DELETE FROM recon_line WHERE run_id = ?`, runID)
			return err
		}
		const older = `DELETE l FROM recon_line l JOIN recon_run o ON o.id = l.run_id
			WHERE o.channel = ? AND o.source = ? AND o.bill_date = ? AND o.id <> ?`
		if _, err := tx.x.ExecContext(ctx, older, r.Channel, r.Source, r.BillDate.Format(time.DateOnly), runID); err != nil {
			return err
		}
		return settlePending(ctx, tx, r)
	})
	return out, err
}

// settlePending settles the PENDING rows of the day before r's, now that r's bill is in.
func settlePending(ctx context.Context, tx *Tx, r ReconRun) error {
	var prev ReconRun
	err := tx.x.GetContext(ctx, &prev, evidenceQuery+` FOR UPDATE`, r.Channel, r.Source, r.BillDate.AddDate(0, 0, -1).Format(time.DateOnly))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	// What moves, per currency, for the previous run's totals: its rows still go (its counts
	// and totals follow), and their items stay, gone (settled by this bill) or LOCAL_ONLY.
	const inBill = `d.run_id = ? AND d.class = 'PENDING' AND EXISTS (
		SELECT 1 FROM recon_line l WHERE l.run_id = ? AND l.kind = 'PAY' AND l.channel_txn_id = d.channel_txn_id)`
	var settled, missingRows []pendingSum
	if err := tx.x.SelectContext(ctx, &settled, `SELECT d.currency, COUNT(*) AS n, COALESCE(SUM(d.local_amount_fen), 0) AS fen
		FROM recon_discrepancy d WHERE `+inBill+` GROUP BY d.currency`, prev.ID, r.ID); err != nil {
		return err
	}
	const gone = `UPDATE recon_item i JOIN recon_discrepancy d ON d.item_id = i.id
		SET i.status = 'gone', i.gone_run_id = ? WHERE i.status = 'open' AND ` + inBill
	if _, err := tx.x.ExecContext(ctx, gone, r.ID, prev.ID, r.ID); err != nil {
		return err
	}
	res, err := tx.x.ExecContext(ctx, `DELETE d FROM recon_discrepancy d WHERE `+inBill, prev.ID, r.ID)
	if err != nil {
		return err
	}
	dropped, _ := res.RowsAffected()
	if err := tx.x.SelectContext(ctx, &missingRows, `SELECT currency, COUNT(*) AS n, COALESCE(SUM(local_amount_fen), 0) AS fen
		FROM recon_discrepancy WHERE run_id = ? AND class = 'PENDING' GROUP BY currency`, prev.ID); err != nil {
		return err
	}
	const toLocal = `UPDATE recon_item i JOIN recon_discrepancy d ON d.item_id = i.id SET i.class = 'LOCAL_ONLY'
		WHERE d.run_id = ? AND d.class = 'PENDING' AND i.class = 'PENDING'`
	if _, err := tx.x.ExecContext(ctx, toLocal, prev.ID); err != nil {
		return err
	}
	res, err = tx.x.ExecContext(ctx, `UPDATE recon_discrepancy SET class = 'LOCAL_ONLY' WHERE run_id = ? AND class = 'PENDING'`, prev.ID)
	if err != nil {
		return err
	}
	missing, _ := res.RowsAffected()
	if dropped+missing == 0 {
		return nil
	}
	totals := prev.Totals()
	for _, p := range settled {
		totals = addTotal(totals, "PENDING", p.Currency, -p.N, -p.Fen)
	}
	for _, p := range missingRows {
		totals = addTotal(totals, "PENDING", p.Currency, -p.N, -p.Fen)
		totals = addTotal(totals, "LOCAL_ONLY", p.Currency, p.N, p.Fen)
	}
	if prev.TotalsJSON.Valid {
		tb, _ := json.Marshal(sortTotals(totals))
		if _, err := tx.x.ExecContext(ctx, `UPDATE recon_run SET totals_json = ? WHERE id = ?`, string(tb), prev.ID); err != nil {
			return err
		}
	}
	counts := prev.Counts()
	counts["PENDING"] -= int(dropped + missing)
	counts["LOCAL_ONLY"] += int(missing)
	for class, n := range counts {
		if n <= 0 {
			delete(counts, class)
		}
	}
	b, _ := json.Marshal(counts)
	_, err = tx.x.ExecContext(ctx, `UPDATE recon_run SET counts_json = ? WHERE id = ?`, string(b), prev.ID)
	return err
}

type pendingSum struct {
	Currency string `db:"currency"`
	N        int    `db:"n"`
	Fen      int64  `db:"fen"`
}

// addTotal adds n lines and fen to class's total in currency; a total that falls to none goes.
func addTotal(totals []ClassTotal, class, currency string, n int, fen int64) []ClassTotal {
	for i := range totals {
		if totals[i].Class == class && totals[i].Currency == currency {
			totals[i].Count += n
			totals[i].AmountFen += fen
			if totals[i].Count <= 0 {
				return slices.Delete(totals, i, i+1)
			}
			return totals
		}
	}
	if n <= 0 {
		return totals
	}
	return append(totals, ClassTotal{Class: class, Currency: currency, Count: n, AmountFen: fen})
}

// sortTotals orders totals by class then currency, never nil (stored as []).
func sortTotals(t []ClassTotal) []ClassTotal {
	if t == nil {
		return []ClassTotal{}
	}
	slices.SortFunc(t, func(a, b ClassTotal) int {
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Currency, b.Currency))
	})
	return t
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
	Currency     string    `db:"currency"`
	PaidTime     time.Time `db:"paid_time"`
}

// LocalOnly reads, in key order from after id afterID, the orders the channel paid in [from, to)
// whose payment no PAY line of the runs runIDs shows (the running run's own, and its neighbour
// days' evidence runs).
func (db *DB) LocalOnly(ctx context.Context, channel string, from, to time.Time, runIDs []int64, afterID int64, batch int) ([]LocalPayment, error) {
	const q = `SELECT o.id, o.trade_no, o.channel_txn_id, o.amount_fen, o.currency, o.paid_time FROM orders o
		WHERE o.channel = ? AND o.paid_time >= ? AND o.paid_time < ? AND o.status = 'PAID' AND o.id > ?
		  AND NOT EXISTS (SELECT 1 FROM recon_line l WHERE l.run_id IN (?) AND l.kind = 'PAY' AND l.channel_txn_id = o.channel_txn_id)
		ORDER BY o.id LIMIT ?`
	var rows []LocalPayment
	err := selectIn(ctx, db.x, &rows, q, channel, from, to, afterID, runIDs, batch)
	return rows, err
}

// evidenceQuery selects the evidence run of (channel, source, bill_date): its latest complete,
// trusted run, the one whose lines other days' logic reads.
const evidenceQuery = `SELECT ` + reconRunColumns + ` FROM recon_run
	WHERE channel = ? AND source = ? AND bill_date = ? AND status = 'complete' AND trusted = 1 ORDER BY id DESC LIMIT 1`

// EvidenceRun reads the day's evidence run (its latest complete, trusted run);
// payment.ErrNotFound if it has none. Its staged lines are kept until a later one replaces it.
func (db *DB) EvidenceRun(ctx context.Context, channel, source string, day time.Time) (ReconRun, error) {
	var r ReconRun
	err := db.x.GetContext(ctx, &r, evidenceQuery, channel, source, day.Format(time.DateOnly))
	return r, notFound(err)
}

// RunOf reads the result of (channel, source, day): its latest complete run, trusted or not;
// payment.ErrNotFound if it has none.
func (db *DB) RunOf(ctx context.Context, channel, source string, day time.Time) (ReconRun, error) {
	const q = `SELECT ` + reconRunColumns + ` FROM recon_run
		WHERE channel = ? AND source = ? AND bill_date = ? AND status = 'complete' ORDER BY id DESC LIMIT 1`
	var r ReconRun
	err := db.x.GetContext(ctx, &r, q, channel, source, day.Format(time.DateOnly))
	return r, notFound(err)
}

// Discrepancy is one row of recon_discrepancy: a discrepancy as one run found it. ItemID names
// the discrepancy across the day's runs (recon_item, DiscrepancyItem); it is set when the run
// completes.
type Discrepancy struct {
	ID             int64         `db:"id"`
	RunID          int64         `db:"run_id"`
	ItemID         sql.NullInt64 `db:"item_id"`
	Channel        string        `db:"channel"`
	BillDate       time.Time     `db:"bill_date"`
	LineKey        string        `db:"line_key"`
	Class          string        `db:"class"`
	TradeNo        string        `db:"trade_no"`
	ChannelTxnID   string        `db:"channel_txn_id"`
	BillAmountFen  sql.NullInt64 `db:"bill_amount_fen"`
	LocalAmountFen sql.NullInt64 `db:"local_amount_fen"`
	Currency       string        `db:"currency"`
	LocalStatus    string        `db:"local_status"`
	Repair         string        `db:"repair"`
	Detail         string        `db:"detail"`
	// Line is the bill line of a CHANNEL_ONLY or REFUND_CHANNEL_ONLY (JSON, see reconcile's
	// BillEvent): what accepting the channel's side applies.
	Line sql.NullString `db:"line"`
}

const discrepancyColumns = `id, run_id, item_id, channel, bill_date, line_key, class, trade_no, channel_txn_id, bill_amount_fen,
	local_amount_fen, currency, local_status, repair, detail, line`

// PutDiscrepancy stores one discrepancy, replacing the run's row of the same line key.
func (db *DB) PutDiscrepancy(ctx context.Context, d Discrepancy) error {
	return db.PutDiscrepancies(ctx, []Discrepancy{d})
}

// PutDiscrepancies stores rows in one statement, each replacing its run's row of the same line
// key.
func (db *DB) PutDiscrepancies(ctx context.Context, rows []Discrepancy) error {
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO recon_discrepancy (run_id, channel, bill_date, line_key, class, trade_no, channel_txn_id,
		bill_amount_fen, local_amount_fen, currency, local_status, repair, detail, line) VALUES `)
	args := make([]any, 0, len(rows)*14)
	for i, d := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, d.RunID, d.Channel, d.BillDate.Format(time.DateOnly), clip(d.LineKey, 200), d.Class, clip(d.TradeNo, 64),
			clip(d.ChannelTxnID, 128), d.BillAmountFen, d.LocalAmountFen, clip(d.Currency, 3), clip(d.LocalStatus, 16), clip(d.Repair, 32),
			clip(d.Detail, 256), d.Line)
	}
	b.WriteString(` ON DUPLICATE KEY UPDATE run_id = VALUES(run_id), class = VALUES(class), trade_no = VALUES(trade_no),
		channel_txn_id = VALUES(channel_txn_id), bill_amount_fen = VALUES(bill_amount_fen),
		local_amount_fen = VALUES(local_amount_fen), currency = VALUES(currency), local_status = VALUES(local_status),
		repair = VALUES(repair), detail = VALUES(detail), line = VALUES(line)`)
	_, err := db.x.ExecContext(ctx, b.String(), args...)
	return err
}

// Runs lists runs of every status, newest day first and the day's latest run first, filtered by
// channel and day when given.
func (db *DB) Runs(ctx context.Context, channel string, day *time.Time) ([]ReconRun, error) {
	q := `SELECT ` + reconRunColumns + ` FROM recon_run WHERE (? = '' OR channel = ?)`
	args := []any{channel, channel}
	if day != nil {
		q += ` AND bill_date = ?`
		args = append(args, day.Format(time.DateOnly))
	}
	q += ` ORDER BY bill_date DESC, channel, id DESC LIMIT 500`
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
