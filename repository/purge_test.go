package repository_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// Rows past retention go in batches of at most 1,000; processing records, younger rows,
// anomalies and the journal within its own retention stay.
func TestPurgeRecordsInBatches(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	const week = 168 * time.Hour
	testenv.OldRecords(t, dsn, "old-ok", 2300, repository.StatusSuccess, 10*24*time.Hour)
	testenv.OldRecords(t, dsn, "old-failed", 200, repository.StatusFailed, 9*24*time.Hour)
	testenv.OldRecords(t, dsn, "old-processing", 7, repository.StatusProcessing, 10*24*time.Hour)
	testenv.OldRecords(t, dsn, "young", 30, repository.StatusSuccess, 6*24*time.Hour)
	testenv.OldRecords(t, dsn, "now", 5, repository.StatusSuccess, 0)
	testenv.Exec(t, dsn, `INSERT INTO anomaly (kind, trade_no, channel, channel_txn_id, amount_fen, currency, detail, created_time)
		VALUES ('AMOUNT_MISMATCH', 'P1', 'alipay', 'T1', 1, 'CNY', 'old', UTC_TIMESTAMP(3) - INTERVAL 900 DAY)`)

	var hooked atomic.Int64
	got, err := db.PurgeRecords(ctx, week, func(n int64) { hooked.Add(n) })
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 2500 {
		t.Errorf("purged %d rows, want 2500", got.Rows)
	}
	if got.MaxBatch > repository.PurgeBatch || got.Batches < 3 {
		t.Errorf("batches %d, largest %d: want at least 3 of at most %d", got.Batches, got.MaxBatch, repository.PurgeBatch)
	}
	if hooked.Load() != 2500 {
		t.Errorf("the hook counted %d, want 2500", hooked.Load())
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'old-ok-%' OR idem_key LIKE 'old-failed-%'`: 0,
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'old-processing-%'`:                         7,
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'young-%' OR idem_key LIKE 'now-%'`:         35,
		`SELECT COUNT(*) FROM anomaly`: 1,
	} {
		if n := testenv.Count(t, dsn, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}

	// Nothing left to do: no DELETE past the first range of young rows.
	again, err := db.PurgeRecords(ctx, week, nil)
	if err != nil || again.Rows != 0 {
		t.Fatalf("second purge: %+v, %v; want nothing", again, err)
	}
}

// The walk stops at the first range of rows within retention, and finds old rows anywhere
// before it, across gaps in the ids.
func TestPurgeAcrossIDGaps(t *testing.T) {
	dsn, db := newDatabase(t)
	testenv.OldRecords(t, dsn, "a", 1500, repository.StatusSuccess, 200*time.Hour)
	testenv.Exec(t, dsn, `ALTER TABLE idempotent_record AUTO_INCREMENT = 1000000`)
	testenv.OldRecords(t, dsn, "b", 1200, repository.StatusFailed, 100*time.Hour)
	testenv.OldRecords(t, dsn, "c", 10, repository.StatusSuccess, time.Hour)
	got, err := db.PurgeRecords(context.Background(), 72*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 2700 || got.MaxBatch > repository.PurgeBatch {
		t.Fatalf("purge: %+v, want 2700 rows in batches of at most %d", got, repository.PurgeBatch)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record`); n != 10 {
		t.Fatalf("%d rows left, want the 10 young ones", n)
	}
}

func TestPurgeJournal(t *testing.T) {
	dsn, db := newDatabase(t)
	testenv.OldJournal(t, dsn, "old", 1001, 401*24*time.Hour)
	testenv.OldJournal(t, dsn, "young", 3, 399*24*time.Hour)
	got, err := db.PurgeJournal(context.Background(), 9600*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 1001 || got.Batches != 2 || got.MaxBatch > repository.PurgeBatch {
		t.Fatalf("purge: %+v, want 1001 rows in 2 batches", got)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM notify_journal WHERE notify_id LIKE 'young-%'`); n != 3 {
		t.Fatalf("young journal rows left: %d, want 3", n)
	}
}

// On a quiet deployment every record is past retention and the purge deletes them all. It must
// not lower RecordHighWater (what the restore detector compares with the markers' mark), nor
// touch the epoch's changed_time; a record committed later raises it as before.
func TestPurgeKeepsRecordHighWater(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	testenv.OldRecords(t, dsn, "old", 1500, repository.StatusSuccess, 30*24*time.Hour)
	testenv.OldRecords(t, dsn, "older", 3, repository.StatusFailed, 40*24*time.Hour) // larger ids, older times
	testenv.Exec(t, dsn, `UPDATE db_identity SET changed_time = '2001-02-03 04:05:06.789' WHERE id = 1`)
	before, err := db.RecordHighWater(ctx)
	if err != nil || before == 0 {
		t.Fatalf("RecordHighWater %d, %v", before, err)
	}
	for pass := range 2 { // the next day's purge of the still quiet table too
		got, err := db.PurgeRecords(ctx, 7*24*time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(1503 * (1 - pass)); got.Rows != want {
			t.Errorf("pass %d purged %d rows, want %d", pass, got.Rows, want)
		}
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record`); n != 0 {
			t.Errorf("pass %d left %d records, want none", pass, n)
		}
		if after, err := db.RecordHighWater(ctx); err != nil || after != before {
			t.Fatalf("pass %d: RecordHighWater %d, %v; want %d as before the purge", pass, after, err, before)
		}
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM db_identity WHERE changed_time = '2001-02-03 04:05:06.789' AND epoch = 1`); n != 1 {
		t.Error("the purge changed the epoch or its changed_time")
	}
	testenv.OldRecords(t, dsn, "next", 1, repository.StatusSuccess, 0)
	if after, err := db.RecordHighWater(ctx); err != nil || after <= before {
		t.Fatalf("after a new record: RecordHighWater %d, %v; want above %d", after, err, before)
	}
}
