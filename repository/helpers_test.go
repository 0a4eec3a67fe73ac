package repository_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// newDatabase is a new database, migrated, and its DSN, to put rows in or read them by hand.
func newDatabase(t *testing.T) (string, *repository.DB) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	return dsn, testenv.Open(t, dsn)
}

// databaseAt is a new database migrated up to version and no further, as an older paygw left
// it: the schema a later migration meets. It returns the DSN too, to put rows in by hand.
func databaseAt(t *testing.T, version int64) (string, *repository.DB) {
	t.Helper()
	dsn := testenv.EmptyDatabase(t)
	db := testenv.Open(t, dsn)
	if err := db.MigrateTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// rawDB is a plain connection to dsn, closed when the test ends: for what the repository does
// not show (information_schema, EXPLAIN, a migration run by hand).
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}
