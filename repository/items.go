package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/payment"
)

// A discrepancy has a life across its day's runs (sql/00021_discrepancy_life.sql): recon_item is
// the discrepancy, one per (channel, source, bill_date, line key), with a stable id and a status;
// recon_discrepancy keeps what each run found. CompleteRun keeps the items (syncItems); a person
// resolves them (ResolveDiscrepancy) and signs the day off (SignOffDay).
//
// Functions for the console and the API:
//   - ListDiscrepancies: a run's discrepancies, a page at a time, by item id;
//   - EachDiscrepancy: the same, streamed to a callback (the CSV export);
//   - GetDiscrepancy: one item;
//   - ResolveDiscrepancy: record a person's decision, audited (reconcile.ResolveDiscrepancy
//     checks the action and applies accept_channel first: call that one);
//   - OpenDiscrepancies: a day's open items (what refuses a sign-off);
//   - SignOffDay, DaySignOff, SignOffs: the day's sign-off;
//   - EachAnomaly: every anomaly, streamed (the CSV export).

// Discrepancy statuses.
const (
	StatusOpen     = "open"     // a person must look (PENDING included, until it settles)
	StatusRepaired = "repaired" // paygw applied the fix: RepairedOutcome, RepairedRunID
	StatusResolved = "resolved" // a person decided: Resolution
	StatusGone     = "gone"     // a later run no longer finds it: GoneRunID
)

// DiscrepancyStatuses lists the statuses, in their documented order.
var DiscrepancyStatuses = []string{StatusOpen, StatusRepaired, StatusResolved, StatusGone}

// Resolution is a person's decision on a discrepancy. Outcome is the apply outcome of an
// accept_channel ("" for the other actions, which move no money).
type Resolution struct {
	Action  string    `json:"action"`
	Note    string    `json:"note"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome,omitempty"`
}

// Finding is what a run found of a bill line (or of an order the bill lacks): its class, the
// payment on each side, and the repair the run made.
type Finding struct {
	Class          string `json:"class"`
	TradeNo        string `json:"trade_no"`
	ChannelTxnID   string `json:"channel_txn_id"`
	BillAmountFen  *int64 `json:"bill_amount_fen"`
	LocalAmountFen *int64 `json:"local_amount_fen"`
	Currency       string `json:"currency"`
	LocalStatus    string `json:"local_status"`
	Repair         string `json:"repair"`
	Detail         string `json:"detail,omitempty"`
}

// DiscrepancyItem is a discrepancy as one run's listing shows it: its stable ID and status, and
// the Finding as that run found it (Found), or, when that run did not find it, as the latest run
// that did (LastRunID).
type DiscrepancyItem struct {
	ID       int64  `json:"id"`
	Channel  string `json:"channel"`
	Source   string `json:"source"`
	BillDate string `json:"bill_date"`
	LineKey  string `json:"line_key"`
	Finding
	Status          string      `json:"status"`
	Found           bool        `json:"found"`
	FirstRunID      int64       `json:"first_run_id"`
	LastRunID       int64       `json:"last_run_id"`
	RepairedRunID   *int64      `json:"repaired_run_id,omitempty"`
	RepairedOutcome string      `json:"repaired_outcome,omitempty"`
	GoneRunID       *int64      `json:"gone_run_id,omitempty"`
	Resolution      *Resolution `json:"resolution,omitempty"`
	// Line is the bill line accept_channel applies (CHANNEL_ONLY, REFUND_CHANNEL_ONLY); not shown.
	Line string `json:"-"`
}

// itemRow is a recon_item row: the fields of its find as a run's row holds them (Discrepancy,
// whose ID is the item's; RunID and ItemID stay unset), and the item's life across the runs.
type itemRow struct {
	Discrepancy
	Source          string         `db:"source"`
	Status          string         `db:"status"`
	Found           bool           `db:"found"`
	FirstRunID      int64          `db:"first_run_id"`
	LastRunID       int64          `db:"last_run_id"`
	RepairedRunID   sql.NullInt64  `db:"repaired_run_id"`
	RepairedOutcome string         `db:"repaired_outcome"`
	GoneRunID       sql.NullInt64  `db:"gone_run_id"`
	ResolvedBy      sql.NullString `db:"resolved_by"`
	ResolvedAt      sql.NullTime   `db:"resolved_at"`
	ResolveAction   sql.NullString `db:"resolve_action"`
	ResolveNote     sql.NullString `db:"resolve_note"`
	ResolveOutcome  sql.NullString `db:"resolve_outcome"`
}

func nullPtr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

func (r itemRow) item() DiscrepancyItem {
	it := DiscrepancyItem{ID: r.ID, Channel: r.Channel, Source: r.Source, BillDate: r.BillDate.Format(time.DateOnly), LineKey: r.LineKey,
		Finding: Finding{Class: r.Class, TradeNo: r.TradeNo, ChannelTxnID: r.ChannelTxnID, BillAmountFen: nullPtr(r.BillAmountFen),
			LocalAmountFen: nullPtr(r.LocalAmountFen), Currency: r.Currency, LocalStatus: r.LocalStatus, Repair: r.Repair, Detail: r.Detail},
		Status: r.Status, Found: r.Found, FirstRunID: r.FirstRunID, LastRunID: r.LastRunID, RepairedRunID: nullPtr(r.RepairedRunID),
		RepairedOutcome: r.RepairedOutcome, GoneRunID: nullPtr(r.GoneRunID), Line: r.Line.String}
	if r.ResolvedAt.Valid {
		it.Resolution = &Resolution{Action: r.ResolveAction.String, Note: r.ResolveNote.String, By: r.ResolvedBy.String,
			At: r.ResolvedAt.Time.UTC(), Outcome: r.ResolveOutcome.String}
	}
	return it
}

// itemColumns reads an item as the run of its last find saw it (found: the item's own row).
const itemColumns = `i.id, i.channel, i.source, i.bill_date, i.line_key, i.class, i.trade_no, i.channel_txn_id, i.bill_amount_fen,
	i.local_amount_fen, i.currency, i.local_status, i.repair, i.detail, i.line, i.status, 1 AS found, i.first_run_id, i.last_run_id,
	i.repaired_run_id, i.repaired_outcome, i.gone_run_id, i.resolved_by, i.resolved_at, i.resolve_action, i.resolve_note,
	i.resolve_outcome`

// runItemColumns reads an item as run d's row found it, or as the item holds it when d has none.
const runItemColumns = `i.id, i.channel, i.source, i.bill_date, i.line_key,
	IF(d.id IS NULL, i.class, d.class) AS class, IF(d.id IS NULL, i.trade_no, d.trade_no) AS trade_no,
	IF(d.id IS NULL, i.channel_txn_id, d.channel_txn_id) AS channel_txn_id,
	IF(d.id IS NULL, i.bill_amount_fen, d.bill_amount_fen) AS bill_amount_fen,
	IF(d.id IS NULL, i.local_amount_fen, d.local_amount_fen) AS local_amount_fen,
	IF(d.id IS NULL, i.currency, d.currency) AS currency, IF(d.id IS NULL, i.local_status, d.local_status) AS local_status,
	IF(d.id IS NULL, i.repair, d.repair) AS repair, IF(d.id IS NULL, i.detail, d.detail) AS detail, i.line, i.status,
	(d.id IS NOT NULL) AS found, i.first_run_id, i.last_run_id, i.repaired_run_id, i.repaired_outcome, i.gone_run_id,
	i.resolved_by, i.resolved_at, i.resolve_action, i.resolve_note, i.resolve_outcome`

// settledSQL is true for a row of run d whose repair settled it (reconcile's settled, PENDING
// aside): a CHANNEL_ONLY applied, a REFUND_CHANNEL_ONLY refunded.
const settledSQL = `((d.class = 'CHANNEL_ONLY' AND d.repair = 'APPLIED') OR (d.class = 'REFUND_CHANNEL_ONLY' AND d.repair = 'REFUNDED'))`

// syncItems makes the rows of run r, which is completing, the day's items, in its transaction:
//   - a row whose line key is new is a new item: repaired when its repair settled it, else open;
//   - a row of a known item updates it to what r found: repaired when settled; open again when
//     it was repaired or gone (opened_run_id); a resolved item stays resolved;
//   - a trusted run's day: an open item r did not find is gone (an untrusted bill is no evidence
//     that it went);
//   - the day signed off and r found something new (a new item, or one opened again): the day
//     is reopened, with its reconciliation.reopened event.
func syncItems(ctx context.Context, tx *Tx, r ReconRun, trusted bool, now time.Time) (Completed, error) {
	var out Completed
	day := r.BillDate.Format(time.DateOnly)
	const upsert = `INSERT INTO recon_item (channel, source, bill_date, line_key, class, trade_no, channel_txn_id, bill_amount_fen,
			local_amount_fen, currency, local_status, repair, detail, line, status, first_run_id, last_run_id, opened_run_id,
			repaired_run_id, repaired_outcome)
		SELECT d.channel, ?, d.bill_date, d.line_key, d.class, d.trade_no, d.channel_txn_id, d.bill_amount_fen, d.local_amount_fen,
			d.currency, d.local_status, d.repair, d.detail, d.line, IF(` + settledSQL + `, 'repaired', 'open'), d.run_id, d.run_id, NULL,
			IF(` + settledSQL + `, d.run_id, NULL), IF(` + settledSQL + `, d.repair, '')
		FROM recon_discrepancy d WHERE d.run_id = ? ORDER BY d.id
		ON DUPLICATE KEY UPDATE
			opened_run_id = IF(recon_item.status IN ('repaired', 'gone') AND VALUES(status) = 'open', VALUES(last_run_id), recon_item.opened_run_id),
			repaired_run_id = IF(recon_item.status <> 'resolved' AND VALUES(status) = 'repaired', VALUES(last_run_id), recon_item.repaired_run_id),
			repaired_outcome = IF(recon_item.status <> 'resolved' AND VALUES(status) = 'repaired', VALUES(repaired_outcome), recon_item.repaired_outcome),
			status = IF(recon_item.status = 'resolved', recon_item.status, VALUES(status)),
			class = VALUES(class), trade_no = VALUES(trade_no), channel_txn_id = VALUES(channel_txn_id),
			bill_amount_fen = VALUES(bill_amount_fen), local_amount_fen = VALUES(local_amount_fen), currency = VALUES(currency),
			local_status = VALUES(local_status), repair = VALUES(repair), detail = VALUES(detail), line = COALESCE(VALUES(line), recon_item.line),
			last_run_id = VALUES(last_run_id)`
	if _, err := tx.x.ExecContext(ctx, upsert, r.Source, r.ID); err != nil {
		return out, err
	}
	const link = `UPDATE recon_discrepancy d JOIN recon_item i
		ON i.channel = d.channel AND i.source = ? AND i.bill_date = d.bill_date AND i.line_key = d.line_key
		SET d.item_id = i.id WHERE d.run_id = ?`
	if _, err := tx.x.ExecContext(ctx, link, r.Source, r.ID); err != nil {
		return out, err
	}
	if trusted {
		const gone = `UPDATE recon_item SET status = 'gone', gone_run_id = ?
			WHERE channel = ? AND source = ? AND bill_date = ? AND status = 'open' AND last_run_id <> ?`
		if _, err := tx.x.ExecContext(ctx, gone, r.ID, r.Channel, r.Source, day, r.ID); err != nil {
			return out, err
		}
	}
	const changed = `SELECT COUNT(*) FROM recon_item WHERE channel = ? AND source = ? AND bill_date = ? AND first_run_id = ?`
	if err := tx.x.GetContext(ctx, &out.New, changed, r.Channel, r.Source, day, r.ID); err != nil {
		return out, err
	}
	var opened int
	const reopenedItems = `SELECT COUNT(*) FROM recon_item WHERE channel = ? AND source = ? AND bill_date = ? AND opened_run_id = ?`
	if err := tx.x.GetContext(ctx, &opened, reopenedItems, r.Channel, r.Source, day, r.ID); err != nil {
		return out, err
	}
	if out.New+opened == 0 {
		return out, nil
	}
	var err error
	out.Reopened, err = reopenDay(ctx, tx, r, out.New+opened, now)
	return out, err
}

// Day sign-off statuses.
const (
	DaySignedOff = "signed_off"
	DayReopened  = "reopened"
)

// SignOff is a channel's day as a person signed it off, and whether a later run reopened it.
type SignOff struct {
	Channel       string     `json:"channel" db:"channel"`
	BillDate      string     `json:"bill_date" db:"-"`
	Status        string     `json:"status" db:"status"`
	SignedOffBy   string     `json:"signed_off_by" db:"signed_off_by"`
	SignedOffAt   time.Time  `json:"signed_off_at" db:"signed_off_at"`
	Note          string     `json:"note" db:"note"`
	ReopenedAt    *time.Time `json:"reopened_at,omitempty" db:"-"`
	ReopenedRunID *int64     `json:"reopened_run_id,omitempty" db:"-"`
	ReopenCount   int        `json:"reopen_count" db:"reopen_count"`
}

// signOffRow is a recon_signoff row: the sign-off, with the columns SignOff shows otherwise.
type signOffRow struct {
	SignOff
	BillDate      time.Time     `db:"bill_date"`
	ReopenedAt    sql.NullTime  `db:"reopened_at"`
	ReopenedRunID sql.NullInt64 `db:"reopened_run_id"`
}

func (r signOffRow) signOff() SignOff {
	s := r.SignOff
	s.BillDate, s.SignedOffAt, s.ReopenedRunID = r.BillDate.Format(time.DateOnly), s.SignedOffAt.UTC(), nullPtr(r.ReopenedRunID)
	if r.ReopenedAt.Valid {
		t := r.ReopenedAt.Time.UTC()
		s.ReopenedAt = &t
	}
	return s
}

const signOffColumns = `channel, bill_date, status, signed_off_by, signed_off_at, note, reopened_at, reopened_run_id, reopen_count`

// reopenDay reopens r's day when it is signed off: the sign-off is kept, marked reopened by r,
// and a reconciliation.reopened event is written in the same transaction.
func reopenDay(ctx context.Context, tx *Tx, r ReconRun, found int, now time.Time) (bool, error) {
	day := r.BillDate.Format(time.DateOnly)
	var s signOffRow
	err := tx.x.GetContext(ctx, &s, `SELECT `+signOffColumns+` FROM recon_signoff WHERE channel = ? AND bill_date = ? FOR UPDATE`, r.Channel, day)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if s.Status != DaySignedOff {
		return false, nil
	}
	now = now.UTC().Truncate(time.Millisecond)
	const q = `UPDATE recon_signoff SET status = 'reopened', reopened_at = ?, reopened_run_id = ?, reopen_count = reopen_count + 1
		WHERE channel = ? AND bill_date = ?`
	if _, err := tx.x.ExecContext(ctx, q, now, r.ID, r.Channel, day); err != nil {
		return false, err
	}
	id := newEventID()
	const ev = `INSERT INTO event (event_id, type, trade_no, body, created_time) VALUES (?, ?, '',
		JSON_OBJECT('id', ?, 'type', ?, 'timestamp', ?, 'data', JSON_OBJECT('channel', ?, 'bill_date', ?, 'source', ?, 'run_id', ?,
			'discrepancies', ?, 'signed_off_by', ?, 'signed_off_at', ?)), ?)`
	_, err = tx.x.ExecContext(ctx, ev, id, payment.EventReconciliationReopened, id, payment.EventReconciliationReopened,
		now.Format(time.RFC3339Nano), r.Channel, day, r.Source, r.ID, found, s.SignedOffBy,
		s.SignedOffAt.UTC().Format(time.RFC3339Nano), now)
	return err == nil, err
}

// ListDiscrepancies pages through run runID's discrepancies in item id order after cursor (an
// item id), filtered by class (as the run found it) when given: every item of the run's day and
// source that this run or an earlier one found, each with its status, so that a re-run still
// shows what an earlier run repaired. A run that is not complete lists nothing.
// payment.ErrNotFound if there is no such run.
func (db *DB) ListDiscrepancies(ctx context.Context, runID int64, class string, cursor int64, limit int) ([]DiscrepancyItem, error) {
	run, err := db.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if run.Status != RunComplete {
		return []DiscrepancyItem{}, nil
	}
	const q = `SELECT ` + runItemColumns + ` FROM recon_item i
		LEFT JOIN recon_discrepancy d ON d.run_id = ? AND d.item_id = i.id
		WHERE i.channel = ? AND i.source = ? AND i.bill_date = ? AND i.first_run_id <= ? AND i.id > ?
		  AND (? = '' OR IF(d.id IS NULL, i.class, d.class) = ?)
		ORDER BY i.id LIMIT ?`
	return selectAll(ctx, db, itemRow.item, q, runID, run.Channel, run.Source, run.BillDate.Format(time.DateOnly), runID, cursor,
		class, class, limit)
}

// EachDiscrepancy calls fn for each of run runID's discrepancies (ListDiscrepancies), in item id
// order, reading a page at a time: memory stays flat whatever the run's size.
func (db *DB) EachDiscrepancy(ctx context.Context, runID int64, class string, fn func(DiscrepancyItem) error) error {
	page := func(cursor int64, limit int) ([]DiscrepancyItem, error) {
		return db.ListDiscrepancies(ctx, runID, class, cursor, limit)
	}
	return eachPage(page, func(d DiscrepancyItem) int64 { return d.ID }, fn)
}

// GetDiscrepancy reads one item as its latest find saw it; payment.ErrNotFound if there is none.
func (db *DB) GetDiscrepancy(ctx context.Context, id int64) (DiscrepancyItem, error) {
	var r itemRow
	err := db.x.GetContext(ctx, &r, `SELECT `+itemColumns+` FROM recon_item i WHERE i.id = ?`, id)
	return r.item(), notFound(err)
}

// ResolveDiscrepancy records res on the open item id and appends e with the item before and
// after, in one transaction. payment.ErrNotFound if there is no such item; payment.ErrConflict,
// with the item as it stands, if it is not open (resolved, repaired or gone). It moves no money:
// an accept_channel's apply is made before, by reconcile.ResolveDiscrepancy, whose outcome res
// carries.
func (db *DB) ResolveDiscrepancy(ctx context.Context, id int64, res Resolution, e access.Entry) (DiscrepancyItem, error) {
	var out DiscrepancyItem
	err := db.InTx(ctx, func(tx *Tx) error {
		var before itemRow
		if err := tx.x.GetContext(ctx, &before, `SELECT `+itemColumns+` FROM recon_item i WHERE i.id = ? FOR UPDATE`, id); err != nil {
			return notFound(err)
		}
		out = before.item()
		if before.Status != StatusOpen {
			return payment.ErrConflict
		}
		const q = `UPDATE recon_item SET status = 'resolved', resolved_by = ?, resolved_at = ?, resolve_action = ?, resolve_note = ?,
			resolve_outcome = ? WHERE id = ?`
		if _, err := tx.x.ExecContext(ctx, q, clip(res.By, 80), res.At.UTC(), clip(res.Action, 32), clip(res.Note, 512),
			clip(res.Outcome, 32), id); err != nil {
			return err
		}
		var after itemRow
		if err := tx.x.GetContext(ctx, &after, `SELECT `+itemColumns+` FROM recon_item i WHERE i.id = ?`, id); err != nil {
			return err
		}
		out = after.item()
		e.Before, e.After = access.State(before.item()), access.State(out)
		return tx.AppendAudit(ctx, e)
	})
	return out, err
}

// OpenItem is an open discrepancy as a refused sign-off lists it.
type OpenItem struct {
	ID    int64  `json:"id" db:"id"`
	Class string `json:"class" db:"class"`
}

// maxOpenListed bounds the open items a refused sign-off lists (all are counted).
const maxOpenListed = 1000

// OpenDiscrepancies lists up to 1000 of the open items of a channel's day (every source), in id
// order, and counts them all.
func (db *DB) OpenDiscrepancies(ctx context.Context, channel string, day time.Time) ([]OpenItem, int, error) {
	return openItems(ctx, db.x, channel, day)
}

// reader is what openItems reads with: the pool or a transaction.
type reader interface {
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

func openItems(ctx context.Context, x reader, channel string, day time.Time) ([]OpenItem, int, error) {
	var n int
	d := day.Format(time.DateOnly)
	const count = `SELECT COUNT(*) FROM recon_item WHERE channel = ? AND bill_date = ? AND status = 'open'`
	if err := x.GetContext(ctx, &n, count, channel, d); err != nil {
		return nil, 0, err
	}
	items := []OpenItem{}
	const q = `SELECT id, class FROM recon_item WHERE channel = ? AND bill_date = ? AND status = 'open' ORDER BY id LIMIT ?`
	err := x.SelectContext(ctx, &items, q, channel, d, maxOpenListed)
	return items, n, err
}

// OpenError refuses a sign-off: the day still has open discrepancies. Open lists up to 1000 of
// them; Count is how many there are.
type OpenError struct {
	Open  []OpenItem
	Count int
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("%d discrepancies of the day are open: resolve them before signing it off", e.Count)
}

// ErrNoRuns is a day without a complete run: nothing to sign off.
var ErrNoRuns = fmt.Errorf("%w: the day has no complete run", payment.ErrNotFound)

// SignOffDay signs off a channel's day and appends e, the sign-off before and after, in one
// transaction. The day's open items are read under lock: a *OpenError while any is open;
// ErrNoRuns (a payment.ErrNotFound) when the day has no complete run; payment.ErrConflict, with
// the sign-off as it stands, when the day is signed off already. A reopened day is signed off
// anew.
func (db *DB) SignOffDay(ctx context.Context, channel string, day time.Time, by, note string, at time.Time, e access.Entry) (SignOff, error) {
	var out SignOff
	d := day.Format(time.DateOnly)
	err := db.InTx(ctx, func(tx *Tx) error {
		var runs int
		const q = `SELECT COUNT(*) FROM recon_run WHERE channel = ? AND bill_date = ? AND status = 'complete'`
		if err := tx.x.GetContext(ctx, &runs, q, channel, d); err != nil {
			return err
		}
		if runs == 0 {
			return ErrNoRuns
		}
		var before *SignOff
		var row signOffRow
		err := tx.x.GetContext(ctx, &row, `SELECT `+signOffColumns+` FROM recon_signoff WHERE channel = ? AND bill_date = ? FOR UPDATE`, channel, d)
		switch {
		case err == nil:
			s := row.signOff()
			before, out = &s, s
			if s.Status == DaySignedOff {
				return payment.ErrConflict
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		// FOR UPDATE on the day's open items: a run completing now waits, or is seen.
		var locked []int64
		const lock = `SELECT id FROM recon_item WHERE channel = ? AND bill_date = ? AND status = 'open' FOR UPDATE`
		if err := tx.x.SelectContext(ctx, &locked, lock, channel, d); err != nil {
			return err
		}
		if len(locked) > 0 {
			open, n, err := openItems(ctx, tx.x, channel, day)
			if err != nil {
				return err
			}
			return &OpenError{Open: open, Count: n}
		}
		const put = `INSERT INTO recon_signoff (channel, bill_date, status, signed_off_by, signed_off_at, note) VALUES (?, ?, 'signed_off', ?, ?, ?)
			ON DUPLICATE KEY UPDATE status = 'signed_off', signed_off_by = VALUES(signed_off_by), signed_off_at = VALUES(signed_off_at),
				note = VALUES(note)`
		if _, err := tx.x.ExecContext(ctx, put, channel, d, clip(by, 80), at.UTC(), clip(note, 512)); err != nil {
			return err
		}
		if err := tx.x.GetContext(ctx, &row, `SELECT `+signOffColumns+` FROM recon_signoff WHERE channel = ? AND bill_date = ?`, channel, d); err != nil {
			return err
		}
		out = row.signOff()
		if before != nil {
			e.Before = access.State(before)
		}
		e.After = access.State(out)
		return tx.AppendAudit(ctx, e)
	})
	return out, err
}

// DaySignOff reads a channel's day's sign-off; payment.ErrNotFound if it was never signed off.
func (db *DB) DaySignOff(ctx context.Context, channel string, day time.Time) (SignOff, error) {
	var r signOffRow
	err := db.x.GetContext(ctx, &r, `SELECT `+signOffColumns+` FROM recon_signoff WHERE channel = ? AND bill_date = ?`,
		channel, day.Format(time.DateOnly))
	return r.signOff(), notFound(err)
}

// SignOffs reads the sign-offs of the days of runs, keyed by channel and day (YYYY-MM-DD), in
// one query.
func (db *DB) SignOffs(ctx context.Context, runs []ReconRun) (map[[2]string]SignOff, error) {
	out := map[[2]string]SignOff{}
	if len(runs) == 0 {
		return out, nil
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(runs))
	b.WriteString(`SELECT ` + signOffColumns + ` FROM recon_signoff WHERE (channel, bill_date) IN (`)
	for i, r := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?)")
		args = append(args, r.Channel, r.BillDate.Format(time.DateOnly))
	}
	b.WriteByte(')')
	rows, err := selectAll(ctx, db, signOffRow.signOff, b.String(), args...)
	for _, s := range rows {
		out[[2]string{s.Channel, s.BillDate}] = s
	}
	return out, err
}

// EachAnomaly calls fn for every anomaly (of kind, unresolved only when asked), in id order,
// reading a page at a time.
func (db *DB) EachAnomaly(ctx context.Context, kind string, unresolved bool, fn func(payment.Anomaly) error) error {
	page := func(cursor int64, limit int) ([]payment.Anomaly, error) {
		return db.ListAnomalies(ctx, kind, unresolved, cursor, limit)
	}
	return eachPage(page, func(a payment.Anomaly) int64 { return a.ID }, fn)
}

// eachPage calls fn for each row page reads, in id order, 500 at a time: each page starts after
// the id of the previous one's last row, so memory stays flat whatever the rows' number.
func eachPage[T any](page func(cursor int64, limit int) ([]T, error), id func(T) int64, fn func(T) error) error {
	const batch = 500
	for cursor := int64(0); ; {
		rows, err := page(cursor, batch)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
			cursor = id(r)
		}
		if len(rows) < batch {
			return nil
		}
	}
}
