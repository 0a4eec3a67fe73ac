package repository

import "context"

// MigrateTo runs the migrations up to version and no further (a database as an older paygw left it).
func (db *DB) MigrateTo(ctx context.Context, version int64) error {
	p, err := db.migrator()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
