package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PurgeBatch is the most rows one purge statement deletes.
const PurgeBatch = 1000

// PurgeLease is the job_lease row that lets one replica a day run the retention purge.
const PurgeLease = "purge"

// Purged is what one purge of a table did.
type Purged struct {
	Rows     int64 // rows deleted
	Batches  int   // DELETE statements run, each its own transaction
	MaxBatch int64 // the most rows one of them deleted
}

// purgeTable describes a table the retention purge walks.
type purgeTable struct {
	name    string
	timeCol string
	keep    string // extra condition a row must meet to go; "" for none
}

var (
	recordsTable = purgeTable{name: "idempotent_record", timeCol: "create_time",
		// Only final records: a processing one is someone's live claim, whatever its age.
		keep: fmt.Sprintf("status IN (%d, %d)", StatusSuccess, StatusFailed)}
	journalTable = purgeTable{name: "notify_journal", timeCol: "received_time"}
)

// PurgeRecords deletes the final (success or failed) idempotent_record rows created longer ago
// than olderThan, by the database's clock. Processing records stay. onBatch, when not nil, is
// called after each batch with the rows it deleted.
func (db *DB) PurgeRecords(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, recordsTable, olderThan, PurgeBatch, onBatch)
}

// PurgeJournal deletes the notify_journal rows received longer ago than olderThan, by the
// database's clock. onBatch is as for PurgeRecords.
func (db *DB) PurgeJournal(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, journalTable, olderThan, PurgeBatch, onBatch)
}

// purge walks the table by primary key, batch rows at a time: it reads the next range's id
// bounds (a primary-key range scan, no lock), then deletes the old rows of that range in one
// autocommitted statement, so no transaction holds more than batch row locks, and only for the
// moment of its DELETE. Ids grow with time, so the walk stops at the first range whose oldest
// row is within retention: every later row is younger still.
func (db *DB) purge(ctx context.Context, t purgeTable, olderThan time.Duration, batch int, onBatch func(n int64)) (Purged, error) {
	var out Purged
	var cutoff time.Time
	if err := db.x.GetContext(ctx, &cutoff, `SELECT NOW(3) - INTERVAL ? MICROSECOND`, olderThan.Microseconds()); err != nil {
		return out, err
	}
	bounds := fmt.Sprintf(`SELECT MIN(id), MAX(id), MIN(%[2]s) FROM
		(SELECT id, %[2]s FROM %[1]s WHERE id > ? ORDER BY id LIMIT %[3]d) r`, t.name, t.timeCol, batch)
	cond := ""
	if t.keep != "" {
		cond = " AND " + t.keep
	}
	del := fmt.Sprintf(`DELETE FROM %s WHERE id > ? AND id <= ? AND %s < ?%s`, t.name, t.timeCol, cond)
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var lo, hi sql.NullInt64
		var oldest sql.NullTime
		if err := db.x.QueryRowContext(ctx, bounds, after).Scan(&lo, &hi, &oldest); err != nil {
			return out, fmt.Errorf("purge %s: %w", t.name, err)
		}
		if !lo.Valid || !oldest.Time.Before(cutoff) {
			return out, nil
		}
		res, err := db.x.ExecContext(ctx, del, after, hi.Int64, cutoff)
		if err != nil {
			return out, fmt.Errorf("purge %s: %w", t.name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return out, err
		}
		out.Batches++
		out.Rows += n
		out.MaxBatch = max(out.MaxBatch, n)
		if onBatch != nil && n > 0 {
			onBatch(n)
		}
		after = hi.Int64
	}
}
