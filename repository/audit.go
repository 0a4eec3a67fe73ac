package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/payment"
)

func appendAudit(ctx context.Context, x execer, e access.Entry) error {
	const q = `INSERT INTO audit_log (at, actor, role, action, target, request_id, before_state, after_state)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := x.ExecContext(ctx, q, e.At.UTC(), clip(e.Actor, 80), string(e.Role), clip(e.Action, 64),
		clip(e.Target, 191), clip(e.RequestID, 128), nullJSON(e.Before), nullJSON(e.After))
	return err
}

func nullJSON(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

// AppendAudit appends e to the audit trail on its own, right after a change that was not one
// transaction of ours.
func (db *DB) AppendAudit(ctx context.Context, e access.Entry) error {
	return appendAudit(ctx, db.x, e)
}

// AppendAudit appends e in the transaction of the change it records.
func (tx *Tx) AppendAudit(ctx context.Context, e access.Entry) error {
	return appendAudit(ctx, tx.x, e)
}

// AuditQuery selects audit rows: of one target and/or one actor ("" for any), after the row id
// Cursor, at most Limit of them, oldest first.
type AuditQuery struct {
	Target, Actor string
	Cursor        int64
	Limit         int
}

type auditRow struct {
	ID        int64          `db:"id"`
	At        time.Time      `db:"at"`
	Actor     string         `db:"actor"`
	Role      string         `db:"role"`
	Action    string         `db:"action"`
	Target    string         `db:"target"`
	RequestID string         `db:"request_id"`
	Before    sql.NullString `db:"before_state"`
	After     sql.NullString `db:"after_state"`
}

func (r auditRow) entry() access.Entry {
	e := access.Entry{ID: r.ID, At: r.At, Actor: r.Actor, Role: access.Role(r.Role), Action: r.Action,
		Target: r.Target, RequestID: r.RequestID}
	if r.Before.Valid {
		e.Before = json.RawMessage(r.Before.String)
	}
	if r.After.Valid {
		e.After = json.RawMessage(r.After.String)
	}
	return e
}

// Audit lists audit rows by q. The (target, id) and (actor, id) indexes serve each filter.
func (db *DB) Audit(ctx context.Context, q AuditQuery) ([]access.Entry, error) {
	const sel = `SELECT id, at, actor, role, action, target, request_id, before_state, after_state FROM audit_log
		WHERE (? = '' OR target = ?) AND (? = '' OR actor = ?) AND id > ? ORDER BY id LIMIT ?`
	return selectAll(ctx, db, auditRow.entry, sel, q.Target, q.Target, q.Actor, q.Actor, q.Cursor, q.Limit)
}

// PutStockAudited sets a SKU's stock and appends e, with the row before and after, in one
// transaction.
func (db *DB) PutStockAudited(ctx context.Context, s payment.Stock, e access.Entry) error {
	return db.InTx(ctx, func(tx *Tx) error {
		before, err := lockStock(ctx, tx.x, s.SKU)
		if err != nil {
			return err
		}
		if err := putStock(ctx, tx.x, s); err != nil {
			return err
		}
		e.Before, e.After = before, access.State(s)
		return tx.AppendAudit(ctx, e)
	})
}

// lockStock is the SKU's row as JSON, locked; nil when there is none.
func lockStock(ctx context.Context, x *sqlx.Tx, sku string) (json.RawMessage, error) {
	const q = `SELECT sku, num, price_fen, currency FROM stock WHERE sku = ? FOR UPDATE`
	var r stockRow
	err := x.GetContext(ctx, &r, q, sku)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return access.State(payment.Stock{SKU: r.SKU, Num: r.Num, PriceFen: r.PriceFen, Currency: r.Currency}), nil
}

// ResolveAnomalyAudited is ResolveAnomaly with e appended, the anomaly before and after, in the
// same transaction. The same errors.
func (db *DB) ResolveAnomalyAudited(ctx context.Context, id int64, by, note string, at time.Time, e access.Entry) (payment.Anomaly, error) {
	var out payment.Anomaly
	err := db.InTx(ctx, func(tx *Tx) error {
		var before anomalyRow
		if err := tx.x.GetContext(ctx, &before, `SELECT `+anomalyColumns+` FROM anomaly WHERE id = ? FOR UPDATE`, id); err != nil {
			return notFound(err)
		}
		out = before.anomaly()
		if before.ResolvedAt.Valid {
			return payment.ErrConflict
		}
		const q = `UPDATE anomaly SET resolved_by = ?, resolved_at = ?, resolve_note = ? WHERE id = ?`
		if _, err := tx.x.ExecContext(ctx, q, by, at, clip(note, 512), id); err != nil {
			return err
		}
		var after anomalyRow
		if err := tx.x.GetContext(ctx, &after, `SELECT `+anomalyColumns+` FROM anomaly WHERE id = ?`, id); err != nil {
			return err
		}
		out = after.anomaly()
		e.Before, e.After = access.State(before.anomaly()), access.State(out)
		return tx.AppendAudit(ctx, e)
	})
	return out, err
}
