package retention_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/retention"
)

var week = retention.Config{Records: 7 * 24 * time.Hour, Journal: 400 * 24 * time.Hour, Events: 30 * 24 * time.Hour}

// Two replicas looking every few milliseconds purge once between them: the day's lease.
func TestPurgeOnceADay(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	testenv.Exec(t, dsn, `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, create_time)
		VALUES ('old-1', 'pay_notify', 'alipay', REPEAT('0', 64), 1, UTC_TIMESTAMP(3) - INTERVAL 8 DAY),
		       ('young-1', 'pay_notify', 'alipay', REPEAT('0', 64), 1, UTC_TIMESTAMP(3) - INTERVAL 6 DAY)`)
	testenv.OldEvents(t, dsn, "old", 1, 1, 31*24*time.Hour)
	testenv.OldEvents(t, dsn, "young", 1, 2, 29*24*time.Hour)
	var log testenv.LogBuffer
	var purged atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, holder := range []string{"replica-a", "replica-b"} {
		p := retention.NewPurger(db, week, zerolog.New(&log).Level(zerolog.DebugLevel))
		p.OnPurged = func(n int64) { purged.Add(n) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Serve(ctx, 10*time.Millisecond, holder)
		}()
	}
	testenv.Until(t, 10*time.Second, "the purge", func() bool { return strings.Contains(log.String(), "purged rows past retention") })
	// Both replicas look again, at least ten times between them, and find the day taken.
	testenv.Until(t, 10*time.Second, "ten more looks", func() bool { return strings.Count(log.String(), "purge not due") >= 10 })
	cancel()
	wg.Wait()
	if n := strings.Count(log.String(), "purged rows past retention"); n != 1 {
		t.Fatalf("%d purges, want 1:\n%s", n, log.String())
	}
	if n := purged.Load(); n != 2 {
		t.Fatalf("OnPurged told of %d rows, want 2 (a record and an event)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM event WHERE event_id LIKE 'evt_young-%'`); n != 1 {
		t.Fatalf("%d events left, want the young one", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record`); n != 1 {
		t.Fatalf("%d records left, want the young one", n)
	}
}

// The sweeper fails a processing record older than the timeout, and leaves a young one.
func TestSweep(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	for key, age := range map[string]int{"stale-1": 3600, "fresh-1": 0} {
		testenv.Exec(t, dsn, fmt.Sprintf(`INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, update_time)
			VALUES (?, 'order_create', 'order-service', REPEAT('a', 64), 0, NOW(3) - INTERVAL %d SECOND)`, age), key)
	}
	var swept atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		retention.Sweep(ctx, db, 10*time.Millisecond, time.Minute, func(n int64) { swept.Add(n) }, zerolog.Nop())
	}()
	testenv.Until(t, 10*time.Second, "the sweep", func() bool { return swept.Load() == 1 })
	cancel()
	<-done
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'stale-1'`); n != 2 {
		t.Errorf("stale record status %d, want 2 (failed)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'fresh-1'`); n != 0 {
		t.Errorf("fresh record status %d, want 0 (processing)", n)
	}
}
