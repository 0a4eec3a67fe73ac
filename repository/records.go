package repository

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"time"
)

// Record statuses, as idempotent_record.status stores them.
const (
	StatusProcessing = 0
	StatusSuccess    = 1
	StatusFailed     = 2
)

// Biz types of idempotent_record rows.
const (
	BizOrderCreate  = "order_create"
	BizPayNotify    = "pay_notify"
	BizRefundNotify = "refund_notify"
)

// Record is an idempotent_record: (Key, BizType, Scope) is uk_idem_key. It belongs to storage
// (no domain type stands for it); ResultJSON and ResponseCode are what a final record replays.
type Record struct {
	ID           int64
	Key          string
	BizType      string
	Scope        string
	RequestHash  string
	Status       int
	ResultJSON   string
	ResponseCode int    // 0 while processing
	LockToken    string // the claim's owner (the create's request); "" for records final from birth
	CreateTime   time.Time
	UpdateTime   time.Time
}

// recordRow is one idempotent_record row as MySQL returns it.
type recordRow struct {
	ID           int64          `db:"id"`
	Key          string         `db:"idem_key"`
	BizType      string         `db:"biz_type"`
	Scope        string         `db:"scope"`
	RequestHash  string         `db:"request_hash"`
	Status       int            `db:"status"`
	ResultJSON   sql.NullString `db:"result_json"`
	ResponseCode sql.NullInt32  `db:"response_code"`
	LockToken    sql.NullString `db:"lock_token"`
	CreateTime   time.Time      `db:"create_time"`
	UpdateTime   time.Time      `db:"update_time"`
}

const recordColumns = `id, idem_key, biz_type, scope, request_hash, status, result_json, response_code,
	lock_token, create_time, update_time`

func (r recordRow) record() Record {
	return Record{
		ID: r.ID, Key: r.Key, BizType: r.BizType, Scope: r.Scope, RequestHash: r.RequestHash, Status: r.Status,
		ResultJSON: r.ResultJSON.String, ResponseCode: int(r.ResponseCode.Int32), LockToken: r.LockToken.String, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime,
	}
}

// IdemDigest is idempotent_record.idem_digest, the column uk_idem_key is on: the first 16 bytes
// of SHA-256 over biz_type and scope, each prefixed by its length in bytes, then idem_key (the
// server computes the same for every row it stores, sql/00009_compact_idem_key.sql). Lookups name
// it so that the unique index finds the row, and the readable columns as well.
func IdemDigest(bizType, scope, key string) []byte {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(bizType), bizType, len(scope), scope, key))
	return sum[:16]
}

// GetRecord reads a record outside any transaction, so it sees the latest committed row (on
// Galera, of any node: a causal read). Returns payment.ErrNotFound if there is none.
func (db *DB) GetRecord(ctx context.Context, bizType, scope, key string) (Record, error) {
	const q = `SELECT ` + recordColumns + ` FROM idempotent_record
		WHERE idem_digest = ? AND idem_key = ? AND biz_type = ? AND scope = ?`
	var r recordRow
	if err := db.x.GetContext(ctx, &r, db.causalRead(q), IdemDigest(bizType, scope, key), key, bizType, scope); err != nil {
		return Record{}, notFound(err)
	}
	return r.record(), nil
}

// Claim inserts a processing record owned by token and commits it at once, before any business
// work. Returns payment.ErrConflict if the key already has a record.
func (db *DB) Claim(ctx context.Context, bizType, scope, key, hash, token string) (int64, error) {
	const q = `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, lock_token)
		VALUES (?, ?, ?, ?, 0, ?)`
	res, err := db.x.ExecContext(ctx, q, key, bizType, scope, hash, token)
	if err != nil {
		return 0, conflict(err)
	}
	return res.LastInsertId()
}

// TakeOver hands a failed record to a new owner. Returns ErrFenced if it is no longer failed
// (another request took it first).
func (db *DB) TakeOver(ctx context.Context, id int64, hash, token string) error {
	const q = `UPDATE idempotent_record SET status = 0, lock_token = ?, result_json = NULL, response_code = NULL
		WHERE id = ? AND status = 2 AND request_hash = ?`
	res, err := db.x.ExecContext(ctx, q, token, id, hash)
	return oneRow(res, err)
}

// FailClaim gives up a processing claim we own so that a retry may take it over at once.
// Returns ErrFenced if the claim is no longer ours.
func (db *DB) FailClaim(ctx context.Context, id int64, token string) error {
	const q = `UPDATE idempotent_record SET status = 2 WHERE id = ? AND status = 0 AND lock_token = ?`
	res, err := db.x.ExecContext(ctx, q, id, token)
	return oneRow(res, err)
}

// SweepProcessing fails every processing record untouched for longer than timeout, by the
// database's clock so replicas agree. It returns how many it failed.
func (db *DB) SweepProcessing(ctx context.Context, timeout time.Duration) (int64, error) {
	const q = `UPDATE idempotent_record SET status = 2
		WHERE status = 0 AND update_time < NOW(3) - INTERVAL ? MICROSECOND`
	res, err := db.x.ExecContext(ctx, q, timeout.Microseconds())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// CompleteRecord stores the final result of a claim we own, inside the business transaction.
// Returns ErrFenced if the sweeper (or a new owner) took the claim meanwhile: the caller must
// roll back.
func (tx *Tx) CompleteRecord(ctx context.Context, id int64, token string, code int, result []byte) error {
	const q = `UPDATE idempotent_record SET status = 1, response_code = ?, result_json = ?
		WHERE id = ? AND status = 0 AND lock_token = ?`
	res, err := tx.x.ExecContext(ctx, q, code, string(result), id, token)
	return oneRow(res, err)
}

// InsertDoneRecord writes a record that is final from birth (a payment's or a refund's) and
// returns its id. Returns payment.ErrConflict if the key already has one.
func (tx *Tx) InsertDoneRecord(ctx context.Context, bizType, scope, key, hash string, result []byte) (int64, error) {
	res, err := tx.x.ExecContext(ctx, doneRecordInsert+doneRecordRow, key, bizType, scope, hash, string(result))
	if err != nil {
		return 0, conflict(err)
	}
	return res.LastInsertId()
}

// The INSERT of records final from birth, in parts: one doneRecordRow per record
// (InsertDoneRecords writes several).
const (
	doneRecordInsert = `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, result_json, response_code) VALUES `
	doneRecordRow    = `(?, ?, ?, ?, 1, ?, 200)`
)

// CompleteRecordAs is CompleteRecord for a claim that turns out to answer another request: the
// record takes that request's hash and result, so that request's retries get its answer and
// ours is told the key was reused. Returns ErrFenced as CompleteRecord does.
func (tx *Tx) CompleteRecordAs(ctx context.Context, id int64, token, hash string, code int, result []byte) error {
	const q = `UPDATE idempotent_record SET status = 1, request_hash = ?, response_code = ?, result_json = ?
		WHERE id = ? AND status = 0 AND lock_token = ?`
	res, err := tx.x.ExecContext(ctx, q, hash, code, string(result), id, token)
	return oneRow(res, err)
}

func oneRow(res interface{ RowsAffected() (int64, error) }, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrFenced
	}
	return nil
}
