package repository_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// The statements under the webhook delivery: an endpoint starts after the events there are, the
// cursor fences a second fan-out, a later event of an order waits for the earlier one's end, and
// bookkeeping applies only to the version read.
func TestWebhookDeliveryStatements(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	event := func(seq int64, trade string) repository.SequencedEvent {
		id := fmt.Sprintf("evt_%d", seq)
		testenv.Exec(t, dsn, `INSERT INTO event (event_id, seq, type, trade_no, body, created_time) VALUES (?, ?, 'order.paid', ?, '{}', ?)`,
			id, seq, trade, now)
		return repository.SequencedEvent{EventID: id, Seq: seq, Type: "order.paid", TradeNo: trade, Created: now}
	}
	event(1, "T1")
	if err := db.EnsureWebhookEndpoint(ctx, "erp", "http://a", now); err != nil {
		t.Fatal(err)
	}
	cur, err := db.WebhookCursor(ctx, "erp", 0)
	if err != nil || cur != 1 {
		t.Fatalf("cursor %d, %v: want 1, after the event already there", cur, err)
	}
	if err := db.DisableWebhookEndpoint(ctx, "erp", now); err != nil {
		t.Fatal(err)
	}
	if err := db.EnsureWebhookEndpoint(ctx, "erp", "http://b", now); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_endpoint WHERE url = 'http://b' AND disabled_time IS NULL AND start_seq = 1`); n != 1 {
		t.Fatal("a changed url does not enable the endpoint again (or moved its start)")
	}

	a, b := event(2, "T2"), event(3, "T2")
	rows := []repository.NewDelivery{{Endpoint: "erp", Event: a, Status: repository.DeliveryPending, Due: now},
		{Endpoint: "erp", Event: b, Status: repository.DeliveryPending, Due: now}}
	if err := db.FanOut(ctx, "erp", 0, 0, 3, rows); !errors.Is(err, repository.ErrFenced) {
		t.Fatalf("fan-out from a cursor not there: %v", err)
	}
	if err := db.FanOut(ctx, "erp", 0, 1, 3, rows); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueDeliveries(ctx, 0, []string{"erp"}, now, 10)
	if err != nil || len(due) != 1 || due[0].EventID != a.EventID {
		t.Fatalf("due %+v, %v: want only evt_2, evt_3 waits", due, err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_delivery WHERE event_id = 'evt_3' AND next_attempt_at IS NULL`); n != 1 {
		t.Fatal("evt_3 is not waiting")
	}
	if n, err := db.WakeWaiting(ctx, 0, now, 10); err != nil || n != 0 {
		t.Fatalf("WakeWaiting woke %d (%v) while evt_2 is pending", n, err)
	}
	stale := due[0]
	stale.Version++
	att := repository.WebhookAttempt{DeliveryID: due[0].ID, At: now, StatusCode: 200}
	if err := db.RecordAttempt(ctx, stale, att, repository.DeliveryDelivered, nil, now); !errors.Is(err, repository.ErrFenced) {
		t.Fatalf("bookkeeping at another version: %v", err)
	}
	later := now.Add(time.Minute)
	if err := db.RecordAttempt(ctx, due[0], att, repository.DeliveryDelivered, nil, later); err != nil {
		t.Fatal(err)
	}
	due, err = db.DueDeliveries(ctx, 0, []string{"erp"}, later, 10)
	if err != nil || len(due) != 1 || due[0].EventID != b.EventID {
		t.Fatalf("due %+v, %v: want evt_3 once evt_2 is delivered", due, err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_attempt`); n != 1 {
		t.Fatalf("%d attempts, want 1: the fenced one is not stored", n)
	}

	// A wake lost (as on another Galera node) is repaired.
	testenv.Exec(t, dsn, `UPDATE webhook_delivery SET next_attempt_at = NULL WHERE event_id = 'evt_3'`)
	if n, err := db.WakeWaiting(ctx, 0, later, 10); err != nil || n != 1 {
		t.Fatalf("WakeWaiting woke %d, %v; want evt_3", n, err)
	}

	// One order's deliveries, to every endpoint, with their attempts (the console's order page).
	of, err := db.DeliveriesOf(ctx, "T2")
	if err != nil || len(of) != 2 || of[0].EventID != a.EventID || of[1].EventID != b.EventID ||
		len(of[0].Attempts) != 1 || of[0].Attempts[0].StatusCode != 200 || of[0].Status != repository.DeliveryDelivered || len(of[1].Attempts) != 0 {
		t.Fatalf("DeliveriesOf(T2) = %+v, %v", of, err)
	}
	if of, err := db.DeliveriesOf(ctx, "T1"); err != nil || len(of) != 0 {
		t.Fatalf("DeliveriesOf(T1) = %+v, %v: its event came before the endpoint", of, err)
	}
}

// The purge deletes old attempts and old deliveries that ended; a pending one stays, however old.
func TestPurgeWebhookDeliveries(t *testing.T) {
	dsn, db := newDatabase(t)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	for i, status := range []string{repository.DeliveryDelivered, repository.DeliveryFailed, repository.DeliveryPending} {
		testenv.Exec(t, dsn, `INSERT INTO webhook_delivery (endpoint, event_id, seq, type, trade_no, shard, status, event_time)
			VALUES ('erp', ?, ?, 'order.paid', 'T1', 0, ?, ?)`, fmt.Sprintf("evt_%d", i), i+1, status, old)
		testenv.Exec(t, dsn, `INSERT INTO webhook_attempt (delivery_id, at, status_code, latency_ms) VALUES (LAST_INSERT_ID(), ?, 200, 1)`, old)
	}
	testenv.Exec(t, dsn, `INSERT INTO webhook_delivery (endpoint, event_id, seq, type, trade_no, shard, status, event_time)
		VALUES ('erp', 'evt_new', 9, 'order.paid', 'T2', 0, 'delivered', NOW(3))`)
	testenv.Exec(t, dsn, `INSERT INTO webhook_attempt (delivery_id, at, status_code, latency_ms) VALUES (LAST_INSERT_ID(), NOW(3), 200, 1)`)
	attempts, err := db.PurgeWebhookAttempts(context.Background(), 30*24*time.Hour, nil)
	if err != nil || attempts.Rows != 3 {
		t.Fatalf("purged %+v attempts, %v; want 3", attempts, err)
	}
	deliveries, err := db.PurgeWebhookDeliveries(context.Background(), 30*24*time.Hour, nil)
	if err != nil || deliveries.Rows != 2 {
		t.Fatalf("purged %+v deliveries, %v; want the delivered and the failed one", deliveries, err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_delivery WHERE event_id IN ('evt_2', 'evt_new')`); n != 2 {
		t.Errorf("%d of the pending and the new delivery left, want both", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_attempt`); n != 1 {
		t.Errorf("%d attempts left, want the new one", n)
	}
}
