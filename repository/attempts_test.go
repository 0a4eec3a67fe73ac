package repository_test

import (
	"context"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
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
