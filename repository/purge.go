package repository

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"
)

// PurgeBatch is the most rows one purge statement deletes.
const PurgeBatch = 1000

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
	marked  bool   // the purge records the largest id it may delete first (markRecords)
	// keepTop names a column whose highest value's row stays, whatever its age: the event with
	// the highest seq, so that numbering goes on from it after a purge of every other event.
	keepTop string
}

var (
	recordsTable = purgeTable{name: "idempotent_record", timeCol: "create_time",
		// Only final records: a processing one is someone's live claim, whatever its age.
		keep:   fmt.Sprintf("status IN (%d, %d)", StatusSuccess, StatusFailed),
		marked: true}
	journalTable = purgeTable{name: "notify_journal", timeCol: "received_time"}
	eventsTable  = purgeTable{name: "event", timeCol: "created_time",
		// Only numbered events: an unnumbered one has not been in the feed yet.
		keep: "seq IS NOT NULL", keepTop: "seq"}
)

// PurgeRecords deletes the final (success or failed) idempotent_record rows created longer ago
// than olderThan, by the database's clock. Processing records stay. It never lowers
// RecordHighWater: before it deletes anything, it records the largest id it may delete.
// onBatch, when not nil, is called after each batch with the rows it deleted.
func (db *DB) PurgeRecords(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, recordsTable, olderThan, PurgeBatch, onBatch)
}

// PurgeJournal deletes the notify_journal rows received longer ago than olderThan, by the
// database's clock. onBatch is as for PurgeRecords.
func (db *DB) PurgeJournal(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, journalTable, olderThan, PurgeBatch, onBatch)
}

// PurgeEvents deletes the numbered outbox events written longer ago than olderThan, by the
// database's clock; events the sequencer has not numbered yet stay, and so does the one with the
// highest seq, whatever its age: the sequencer numbers on from it, so a feed cursor or a webhook
// cursor never points past a numbering that restarted at 1. onBatch is as for PurgeRecords.
func (db *DB) PurgeEvents(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, eventsTable, olderThan, PurgeBatch, onBatch)
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
	if t.keepTop != "" {
		var high sql.NullInt64
		if err := db.x.GetContext(ctx, &high, fmt.Sprintf(`SELECT MAX(%s) FROM %s`, t.keepTop, t.name)); err != nil {
			return out, fmt.Errorf("purge %s: %w", t.name, err)
		}
		if high.Valid {
			cond += fmt.Sprintf(" AND %s < %d", t.keepTop, high.Int64)
		}
	}
	top := int64(math.MaxInt64) // nothing above it is deleted
	if t.marked {
		var err error
		if top, err = db.markRecords(ctx); err != nil {
			return out, fmt.Errorf("purge %s: %w", t.name, err)
		}
	}
	del := fmt.Sprintf(`DELETE FROM %s WHERE id > ? AND id <= LEAST(?, ?) AND %s < ?%s`, t.name, t.timeCol, cond)
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
		res, err := db.x.ExecContext(ctx, del, after, hi.Int64, top, cutoff)
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

// markRecords raises db_identity.purged_record_id to the largest idempotent_record id now, and
// returns that id: the purge deletes nothing above it (rows committed later are younger than any
// cutoff anyway). The mark commits before the first DELETE, so at every moment the larger of it
// and MAX(id) is at least what it was: a purge never lowers RecordHighWater. changed_time is the
// epoch's, and stays.
func (db *DB) markRecords(ctx context.Context) (int64, error) {
	var top int64
	if err := db.x.GetContext(ctx, &top, `SELECT COALESCE(MAX(id), 0) FROM idempotent_record`); err != nil {
		return 0, err
	}
	const q = `UPDATE db_identity SET purged_record_id = GREATEST(purged_record_id, ?), changed_time = changed_time WHERE id = 1`
	if _, err := db.x.ExecContext(ctx, q, top); err != nil {
		return 0, err
	}
	return top, nil
}

// RecordHighWater is the largest idempotent_record id this database knows it committed: its
// largest row, or the largest id a retention purge may have deleted, whichever is larger. A
// purge never lowers it (markRecords); a database that went back in time (a restore, a
// failover to a replica that missed commits) shows an older one. Like Identity it is a causal
// read: on Galera, another node's commit that a high-water mark already vouches for must not
// look like a database gone back in time.
func (db *DB) RecordHighWater(ctx context.Context) (int64, error) {
	const q = `SELECT GREATEST(COALESCE((SELECT MAX(id) FROM idempotent_record), 0), purged_record_id)
		FROM db_identity WHERE id = 1`
	var n int64
	err := db.x.GetContext(ctx, &n, db.causalRead(q))
	return n, notFound(err)
}
