package repository

import (
	"context"
	"database/sql"
	"time"
)

// EnsureLease adds the named job's job_lease row, free, unless it exists: a job that came after
// the migration that made the table takes its lease with TakeLease like the others.
func (db *DB) EnsureLease(ctx context.Context, name string) error {
	const q = `INSERT IGNORE INTO job_lease (name, holder, expires_at) VALUES (?, '', '1970-01-01 00:00:01')`
	_, err := db.x.ExecContext(ctx, q, name)
	return err
}

// Lease is a job_lease row: who holds the named job's lease, since when and until when.
type Lease struct {
	Name      string       `db:"name"`
	Holder    string       `db:"holder"`
	TakenAt   sql.NullTime `db:"taken_at"` // NULL for a row no TakeLease has taken since migration 00011
	ExpiresAt time.Time    `db:"expires_at"`
}

// Held reports whether the lease is held by someone at now (the database's clock).
func (l Lease) Held(now time.Time) bool { return l.Holder != "" && l.ExpiresAt.After(now) }

// ReadLease reads the named lease and the database's clock; payment.ErrNotFound if it has no row.
func (db *DB) ReadLease(ctx context.Context, name string) (Lease, time.Time, error) {
	var row struct {
		Lease
		Now time.Time `db:"now"`
	}
	const q = `SELECT name, holder, taken_at, expires_at, NOW(3) AS now FROM job_lease WHERE name = ?`
	err := db.x.GetContext(ctx, &row, q, name)
	return row.Lease, row.Now, notFound(err)
}
