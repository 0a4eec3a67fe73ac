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

// Statements reads a counter of the transaction's own session (its session status), such as
// Com_insert_select: how many statements of a kind it ran.
func (tx *Tx) Statements(ctx context.Context, counter string) (int64, error) {
	var n int64
	err := tx.x.QueryRowContext(ctx, `SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
		WHERE VARIABLE_NAME = UPPER(?)`, counter).Scan(&n)
	return n, err
}

// SearchQuery is searchQuery, for the test that EXPLAINs it.
var SearchQuery = searchQuery
