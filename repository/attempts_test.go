package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// sql/00012_attempt_closed.sql: attempts whose last answer was a close are closed from then on;
// every other attempt stays open, so that the attempts of orders an earlier paygw closed on
// another channel's answer are asked again (issue 20, case 3).
func TestAttemptClosedMigration(t *testing.T) {
	ctx := context.Background()
	dsn, db := databaseAt(t, 9)
	testenv.Exec(t, dsn, `INSERT INTO payment_attempt (trade_no, channel, channel_ref, created_time, next_query_at, query_count,
		last_query_at, last_answer) VALUES
		('T1', 'alipay', '', '2026-01-01 10:00:00', '2026-01-01 11:00:00', 2, '2026-01-01 10:30:00.123', 'CLOSED'),
		('T1', 'wechatpay', '', '2026-01-01 10:00:00', '2026-01-01 11:00:00', 2, '2026-01-01 10:30:00', 'NOT_PAID'),
		('T2', 'stripe', 'pi_A', '2026-01-01 10:00:00', '2026-01-01 10:00:00', 0, NULL, '')`)
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrating a table with attempts: %v", err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM payment_attempt WHERE trade_no = 'T1' AND channel = 'alipay'
		AND closed_time = '2026-01-01 10:30:00.123'`); n != 1 {
		t.Fatal("the attempt answered CLOSED is not closed at its answer's time")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM payment_attempt WHERE closed_time IS NULL`); n != 2 {
		t.Fatalf("%d open attempts, want the other 2", n)
	}
}

// A deadlock on payment_attempt's AUTO-INC lock is retried like any deadlock. SeedAttempts (an
// INSERT ... SELECT) holds the table's AUTO-INC lock for the whole statement; when it meets a row
// another transaction has locked, and that transaction then inserts an attempt, each waits for
// the other. InnoDB rolls the victim back, but reports it as 1467 ("Failed to read
// auto-increment value from storage engine"), not 1213. Found by the history check
// (internal/history, TestMoneyHistories): a reconcile run failed on it under load.
func TestAttemptInsertDeadlockOnAutoIncIsRetried(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, tn := range []string{"DLA", "DLB"} { // DLA first in idx_status_create: the seeding inserts it, then meets DLB's row
		order := payment.Order{TradeNo: tn, UserID: 1, SKU: "S", Num: 1, AmountFen: 100, Currency: "CNY",
			CreateTime: now.Add(time.Duration(i-10) * time.Minute)}
		if err := db.InTx(ctx, func(tx *repository.Tx) error { return tx.InsertOrder(ctx, order, "", "", "") }); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Exec(t, dsn, `INSERT INTO payment_attempt (trade_no, channel, channel_ref, implicit, created_time, next_query_at)
		VALUES ('DLB', 'alipay', '', 1, ?, ?)`, now, now)

	seeding := make(chan error, 1)
	runs := 0
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		runs++
		if _, err := tx.CloseAttempts(ctx, "DLB", "alipay", "", now); err != nil { // locks DLB's alipay row
			return err
		}
		if runs == 1 {
			go func() {
				_, err := db.SeedAttempts(ctx, "alipay", now.Add(-time.Hour), now)
				seeding <- err
			}()
			waitForLockWait(t, dsn, "INSERT INTO payment_attempt")
		}
		return tx.InsertAttempt(ctx, payment.Attempt{TradeNo: "DLA", Channel: "stripe", ChannelRef: "pi_DL", CreatedTime: now, NextQueryAt: now})
	})
	if err != nil {
		t.Fatalf("the attempt's transaction (run %d times): %v", runs, err)
	}
	if err := <-seeding; err != nil {
		t.Fatalf("seeding: %v", err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM payment_attempt`); n != 3 {
		t.Fatalf("%d attempts, want DLB's, DLA's seeded one and DLA's stripe one", n)
	}
	t.Logf("the attempt's transaction ran %d times", runs)
}

// waitForLockWait waits until a transaction running a statement that starts with prefix waits
// for a lock.
func waitForLockWait(t *testing.T, dsn, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if testenv.Count(t, dsn, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'
			AND trx_query LIKE CONCAT(?, '%')`, prefix) > 0 {
			return
		}
	}
	t.Fatalf("no transaction running %q waits for a lock", prefix)
}
