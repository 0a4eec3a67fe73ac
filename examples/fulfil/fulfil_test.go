package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/webhook"
)

// consumer is the example running in-process (run, as main calls it) on a fresh database.
type consumer struct {
	url    string
	dsn    string
	key    webhook.Secret
	client *http.Client
}

func startConsumer(t *testing.T) consumer {
	t.Helper()
	secret := testenv.WebhookSecret(t)
	dsn := testenv.EmptyDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	// The test's own transport: under 32 concurrent requests it may dial a connection it never
	// sends on, and the server's Shutdown waits 5 s for such a new connection unless the client
	// closes it first.
	client := &http.Client{Transport: &http.Transport{}}
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--dsn", dsn, "--secrets", secret}, io.Discard, ready)
	}()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return consumer{url: "http://" + addr + "/webhooks", dsn: dsn, key: webhook.MustParseSecret(secret), client: client}
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	return consumer{}
}

// event is a paygw event body.
func event(id, typ, tradeNo string, refundedFen int64) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":%q,"timestamp":"2026-12-04T10:00:00Z","data":{"trade_no":%q,"user_id":7,`+
		`"status":"PAID","amount_fen":1999,"currency":"CNY","refunded_fen":%d,"channel":"alipay"}}`, id, typ, tradeNo, refundedFen)
}

// deliver POSTs body signed at ts, as paygw's dispatcher does; a redelivery is signed anew.
func (c consumer) deliver(t *testing.T, id string, ts time.Time, body []byte, keys ...webhook.Secret) int {
	t.Helper()
	if keys == nil {
		keys = []webhook.Secret{c.key}
	}
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header = webhook.Headers(id, ts, body, keys...)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.client.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func (c consumer) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return testenv.Count(t, c.dsn, q, args...)
}

// TestConcurrentDuplicatesApplyOnce: 32 deliveries of one order.paid at once, half of them
// redeliveries signed a second later, all answer 204 and the order ships once. Each answer comes
// after a commit: the rows are there, from another connection, as soon as the first 204 is.
func TestConcurrentDuplicatesApplyOnce(t *testing.T) {
	c := startConsumer(t)
	body := event("evt_paid1", "order.paid", "T100", 0)
	now := time.Now()
	var wg sync.WaitGroup
	codes := make([]int, 32)
	for i := range codes {
		wg.Go(func() { codes[i] = c.deliver(t, "evt_paid1", now.Add(time.Duration(i%2)*time.Second), body) })
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusNoContent {
			t.Fatalf("delivery %d: %d, want 204 (%v)", i, code, codes)
		}
	}
	if n := c.count(t, `SELECT COUNT(*) FROM fulfilment WHERE trade_no = 'T100' AND event_id = 'evt_paid1' AND amount_fen = 1999`); n != 1 {
		t.Fatalf("fulfilments = %d, want 1", n)
	}
	if n := c.count(t, `SELECT COUNT(*) FROM webhook_receipt`); n != 1 {
		t.Fatalf("receipts = %d, want 1", n)
	}
}

// TestEventsOfOneOrder: refunds raise the refunded total once each, in any order of arrival; a
// second order.paid event for the same order does not ship it twice; other types are received.
func TestEventsOfOneOrder(t *testing.T) {
	c := startConsumer(t)
	now := time.Now()
	for _, d := range []struct {
		id, typ  string
		refunded int64
	}{
		{"evt_p", "order.paid", 0},
		{"evt_r2", "order.refunded", 800}, // the second refund arrives first
		{"evt_r1", "order.refunded", 500},
		{"evt_r2", "order.refunded", 800}, // and again
		{"evt_p2", "order.paid", 0},
		{"evt_a", "payment.anomaly", 0},
	} {
		if code := c.deliver(t, d.id, now, event(d.id, d.typ, "T200", d.refunded)); code != http.StatusNoContent {
			t.Fatalf("%s: %d", d.id, code)
		}
	}
	if n := c.count(t, `SELECT COUNT(*) FROM fulfilment WHERE trade_no = 'T200' AND event_id = 'evt_p' AND refunded_fen = 800`); n != 1 {
		t.Fatal("T200 is not fulfilled once by evt_p with 800 refunded")
	}
	if n := c.count(t, `SELECT COUNT(*) FROM webhook_receipt`); n != 5 {
		t.Fatalf("receipts = %d, want 5", n)
	}
}

// TestRefusedAndFailed: what does not verify is 400 and changes nothing; when our own database
// fails the answer is 500 (paygw retries) and the receipt rolls back with the change, so the
// retry applies it.
func TestRefusedAndFailed(t *testing.T) {
	c := startConsumer(t)
	body := event("evt_x", "order.paid", "T300", 0)
	for name, code := range map[string]int{
		"another secret": c.deliver(t, "evt_x", time.Now(), body, webhook.MustParseSecret(testenv.WebhookSecret(t))),
		"too old":        c.deliver(t, "evt_x", time.Now().Add(-10*time.Minute), body),
		"id mismatch":    c.deliver(t, "evt_y", time.Now(), body),
	} {
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}
	if n := c.count(t, `SELECT COUNT(*) FROM webhook_receipt`); n != 0 {
		t.Fatalf("receipts after refusals = %d", n)
	}

	testenv.Exec(t, c.dsn, `DROP TABLE fulfilment`)
	if code := c.deliver(t, "evt_x", time.Now(), body); code != http.StatusInternalServerError {
		t.Fatalf("with the fulfilment table gone: %d, want 500", code)
	}
	if n := c.count(t, `SELECT COUNT(*) FROM webhook_receipt`); n != 0 {
		t.Fatal("a receipt committed without its change")
	}
	db, err := sql.Open("mysql", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	if code := c.deliver(t, "evt_x", time.Now(), body); code != http.StatusNoContent {
		t.Fatalf("the retry: %d, want 204", code)
	}
	if n := c.count(t, `SELECT COUNT(*) FROM fulfilment WHERE trade_no = 'T300'`); n != 1 {
		t.Fatal("the retry did not fulfil T300")
	}
}

func TestRunRefusesABadSecret(t *testing.T) {
	err := run(context.Background(), []string{"--dsn", "root@tcp(127.0.0.1:1)/x", "--secrets", "whsec_c2hvcnQ="}, io.Discard, nil)
	if err == nil || err.Error() == "" {
		t.Fatal("a malformed secret was accepted")
	}
}
