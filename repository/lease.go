package repository

import "context"

// EnsureLease adds the named job's job_lease row, free, unless it exists: a job that came after
// the migration that made the table takes its lease with TakeLease like the others.
func (db *DB) EnsureLease(ctx context.Context, name string) error {
	const q = `INSERT IGNORE INTO job_lease (name, holder, expires_at) VALUES (?, '', '1970-01-01 00:00:01')`
	_, err := db.x.ExecContext(ctx, q, name)
	return err
}
