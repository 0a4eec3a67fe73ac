package handlers

import (
	"errors"
	"testing"
	"time"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
)

// sharedGuard is a guard on the test Redis under prefix: gateways given the same prefix share
// Redis as deployments with the same redis config do.
func sharedGuard(t *testing.T, prefix string) *guard.Guard {
	t.Helper()
	g := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix, Timeout: 3 * time.Second}, testenv.Logger(t))
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func sharedPrefix() string { return "paygw-test:" + testenv.Random(6) + ":" }

// wantPaidOnce insists the order is PAID with exactly one payment record in its database.
func (h *harness) wantPaidOnce(tradeNo string) {
	h.t.Helper()
	if o := h.order(tradeNo); o.Status != "PAID" {
		h.t.Fatalf("order %s is %s, want PAID", tradeNo, o.Status)
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 1 {
		h.t.Fatalf("pay_notify records = %d, want 1", n)
	}
}

// Two deployments, each with its own database, share one Redis and one prefix. The same
// notification reaches both: each database applies it once, and neither's markers answer for
// the other.
func TestTwoDatabasesShareRedis(t *testing.T) {
	prefix := sharedPrefix()
	a := newHarness(t, options{guardOverride: sharedGuard(t, prefix), watch: time.Hour})
	b := newHarness(t, options{guardOverride: sharedGuard(t, prefix), watch: time.Hour})
	tradeNo := a.seedOrder(1999)
	b.seedOrderNo(tradeNo, 1999)
	body := alipayBody(t, alipayPayment(tradeNo, 1999))
	for _, h := range []*harness{a, b, a, b} {
		wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	}
	a.wantPaidOnce(tradeNo)
	b.wantPaidOnce(tradeNo)
}

// The database goes back in time under a Redis that does not: a dump taken before a payment is
// loaded back. The channel's redelivery must apply the payment again, not be answered from the
// markers of the lost commit; paygw finds the rollback at start, and while running within its
// check interval.
func TestRestoredDatabaseAppliesAgain(t *testing.T) {
	for name, restart := range map[string]bool{"found at a restart": true, "found while running": false} {
		t.Run(name, func(t *testing.T) {
			prefix := sharedPrefix()
			watch := 100 * time.Millisecond
			if restart {
				watch = time.Hour // only the restarted gateway's start-up check may find it
			}
			h := newHarness(t, options{guardOverride: sharedGuard(t, prefix), watch: watch})
			tradeNo := h.seedOrder(1999)
			backup := testenv.Dump(t, h.dsn)
			body := alipayBody(t, alipayPayment(tradeNo, 1999))
			wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
			h.wantPaidOnce(tradeNo)
			before := h.guard.Namespace()

			testenv.Restore(t, h.dsn, backup)
			if o := h.order(tradeNo); o.Status != "WAIT_PAY" {
				t.Fatalf("after the restore the order is %s, want WAIT_PAY", o.Status)
			}
			if restart {
				h = newHarness(t, options{dsn: h.dsn, guardOverride: sharedGuard(t, prefix), watch: time.Hour})
			} else {
				testenv.Eventually(t, 10*time.Second, func() error {
					if h.guard.Namespace() == before {
						return errors.New("the rollback was not found")
					}
					return nil
				})
			}
			if h.guard.Namespace() == before {
				t.Fatal("still on the epoch of the lost commits")
			}
			wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
			h.wantPaidOnce(tradeNo)
		})
	}
}

// A rollback the checks cannot see: after the restore, new records push the largest record id
// back up to the high-water mark before any check runs. Redis then vouches for a payment the
// database lost; `paygw markers flush` (a new epoch) is the operator's way out.
func TestMarkersFlushRecoversAnUnseenRestore(t *testing.T) {
	h := newHarness(t, options{guardOverride: sharedGuard(t, sharedPrefix()), watch: time.Hour})
	tradeNo := h.seedOrder(1999)
	backup := testenv.Dump(t, h.dsn)
	body := alipayBody(t, alipayPayment(tradeNo, 1999))
	wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	high := h.count(`SELECT MAX(id) FROM idempotent_record`)

	testenv.Restore(t, h.dsn, backup)
	for h.count(`SELECT COALESCE(MAX(id), 0) FROM idempotent_record`) < high {
		h.exec(`INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status)
			VALUES (?, 'order_create', 'other-service', REPEAT('0', 64), 1)`, testenv.Random(8))
	}
	if err := h.watcher.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	if o := h.order(tradeNo); o.Status != "WAIT_PAY" {
		t.Fatalf("order is %s: the checks saw this restore after all, so this test shows nothing", o.Status)
	}

	if _, err := h.db.BumpEpoch(t.Context()); err != nil { // what `paygw markers flush` runs
		t.Fatal(err)
	}
	if err := h.watcher.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReply(t, h.post("/notify/alipay", body), 200, alipaySuccess)
	h.wantPaidOnce(tradeNo)
}
