package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

const wait = 20 * time.Second

// The first attempt is at once, retry i after exactly Schedule[i-1] more, and none after the
// schedule: the delivery is failed. Every request is Standard Webhooks' shape.
func TestRetryScheduleExact(t *testing.T) {
	e := newEnv(t)
	clk := newClock()
	s := newSink(t, func(string, string) int { return 500 })
	s.big = true
	d, _ := serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Now: clk.Now})
	e.registered(t, "erp")
	x := ev{id: "evt_1", seq: 1, typ: "order.paid", tradeNo: "T1"}
	e.insert(t, x)
	attempts := func() int { return e.count(t, "SELECT COUNT(*) FROM webhook_attempt") }
	testenv.Until(t, wait, "the first attempt", func() bool { return attempts() == 1 })

	at := clk.Now()
	want := []time.Time{at}
	for i, w := range delivery.DefaultSchedule {
		clk.Advance(w - time.Millisecond)
		time.Sleep(60 * time.Millisecond) // a dozen polls: a retry made too early is made in them
		if n := attempts(); n != i+1 {
			t.Fatalf("%d attempts a millisecond before retry %d is due, want %d", n, i+1, i+1)
		}
		clk.Advance(time.Millisecond)
		at = at.Add(w)
		want = append(want, at)
		testenv.Until(t, wait, fmt.Sprintf("retry %d", i+1), func() bool { return attempts() == i+2 })
	}
	testenv.Until(t, wait, "failed", func() bool { return e.statusCount(t, "erp", repository.DeliveryFailed) == 1 })
	clk.Advance(100 * time.Hour)
	time.Sleep(60 * time.Millisecond)
	if n := attempts(); n != len(want) {
		t.Fatalf("%d attempts after the schedule ended, want %d", n, len(want))
	}

	page, err := d.List(context.Background(), delivery.Query{Endpoint: "erp"})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("List: %+v, %v", page, err)
	}
	got := page.Deliveries[0]
	if got.Status != repository.DeliveryFailed || got.NextAttemptAt != nil || got.EventID != x.id || got.Type != x.typ {
		t.Errorf("delivery %+v", got)
	}
	for i, a := range got.Attempts {
		if !a.At.Equal(want[i]) || a.StatusCode != 500 || a.Error == "" {
			t.Errorf("attempt %d: %+v, want at %s with 500", i, a, want[i])
		}
	}
	hits := s.all()
	if len(hits) != len(want) {
		t.Fatalf("the sink saw %d requests, want %d", len(hits), len(want))
	}
	for i, h := range hits {
		if h.id != x.id || h.ts != unix(want[i]) || h.sig != sign(x.id, want[i], []byte(x.body())) ||
			h.ctype != "application/json" || h.body != x.body() {
			t.Errorf("request %d: %+v", i, h)
		}
	}
}

// settle waits until no delivery is due at the clock's time: every due POST has been made and
// recorded.
func settle(t *testing.T, e *env, clk *testenv.Clock, names []string, shards int) {
	t.Helper()
	testenv.Until(t, wait, "no delivery due", func() bool {
		for shard := range shards {
			due, err := e.db.DueDeliveries(context.Background(), shard, names, clk.Now(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(due) > 0 {
				return false
			}
		}
		return true
	})
}

// An endpoint down for hours gets everything once it is up, and each order's events in order:
// no order.refunded is even tried before its order.paid was delivered.
func TestDownForHoursThenUp(t *testing.T) {
	e := newEnv(t)
	clk := newClock()
	var down atomic.Bool
	down.Store(true)
	s := newSink(t, func(string, string) int {
		if down.Load() {
			return 503
		}
		return 204
	})
	names := []string{"erp"}
	serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Now: clk.Now})
	e.registered(t, names...)
	evs := orders(40, 2, 1) // 40 orders, each paid then refunded
	e.insert(t, evs...)
	for elapsed := time.Duration(0); elapsed < 8*time.Hour; elapsed += 10 * time.Minute {
		settle(t, e, clk, names, 4)
		clk.Advance(10 * time.Minute)
	}
	settle(t, e, clk, names, 4)
	for _, h := range s.all() {
		if !strings.Contains(h.body, `"order.paid"`) {
			t.Fatalf("%s was tried while its order's order.paid was not delivered", h.id)
		}
	}
	down.Store(false)
	clk.Advance(10 * time.Hour)
	testenv.Until(t, wait, "every event delivered", func() bool {
		return e.statusCount(t, "erp", repository.DeliveryDelivered) == len(evs)
	})
	checkOrdered(t, s.all(), evs)
}

// checkOrdered checks the sink saw each event delivered exactly once and, per order, no request
// for an event before the delivery of the order's earlier events.
func checkOrdered(t *testing.T, hits []hit, evs []ev) {
	t.Helper()
	byID := map[string]ev{}
	for _, x := range evs {
		byID[x.id] = x
	}
	delivered := map[string]int{}
	lastDone := map[string]int64{} // trade_no -> seq of its last delivered event
	for _, h := range hits {
		x, ok := byID[h.id]
		if !ok {
			t.Fatalf("unknown event %s", h.id)
		}
		for _, y := range evs {
			if y.tradeNo == x.tradeNo && y.seq < x.seq && y.seq > lastDone[x.tradeNo] {
				t.Fatalf("%s (seq %d) arrived before %s (seq %d) of its order was delivered", x.id, x.seq, y.id, y.seq)
			}
		}
		if h.code/100 == 2 {
			delivered[h.id]++
			lastDone[x.tradeNo] = max(lastDone[x.tradeNo], x.seq)
		}
	}
	for _, x := range evs {
		if delivered[x.id] != 1 {
			t.Errorf("%s delivered %d times, want 1", x.id, delivered[x.id])
		}
	}
}

// A 410 Gone disables the endpoint: its deliveries become disabled, later events are not sent
// to it, the other endpoint gets everything; a redelivery to it by name enables it again.
func Test410Disables(t *testing.T) {
	e := newEnv(t)
	gone := newSink(t, func(string, string) int { return 410 })
	ok := newSink(t, nil)
	ok.big = true
	m := metrics.New("test")
	d, _ := serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{gone.endpoint("gone"), ok.endpoint("ok")},
		Metrics: m, Backlog: 10 * time.Millisecond})
	e.registered(t, "gone", "ok")
	e.insert(t, orders(20, 1, 1)...)
	testenv.Until(t, wait, "ok delivered, gone disabled", func() bool {
		return e.statusCount(t, "ok", repository.DeliveryDelivered) == 20 && e.statusCount(t, "gone", repository.DeliveryDisabled) == 20
	})
	tried := len(gone.all())
	if tried < 1 || tried > 4*delivery.DefaultParallel { // at most what the shards had in flight
		t.Fatalf("the gone endpoint saw %d requests", tried)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM webhook_endpoint WHERE name = 'gone' AND disabled_time IS NOT NULL"); n != 1 {
		t.Fatal("the endpoint is not marked disabled")
	}
	// Its backlog reads 0 (nothing pending): the disabled gauge says it.
	testenv.Until(t, wait, "the disabled gauge", func() bool {
		return gathered(t, m, "paygw_webhook_endpoint_disabled", "gone", "") == 1 &&
			gathered(t, m, "paygw_webhook_endpoint_disabled", "ok", "") == 0
	})
	e.insert(t, orders(20, 1, 21)...)
	testenv.Until(t, wait, "the later events", func() bool {
		return e.statusCount(t, "ok", repository.DeliveryDelivered) == 40 && e.statusCount(t, "gone", repository.DeliveryDisabled) == 40
	})
	time.Sleep(50 * time.Millisecond)
	if n := len(gone.all()); n != tried {
		t.Fatalf("the disabled endpoint got %d more requests", n-tried)
	}

	ctx := context.Background()
	gone.setAnswer(nil)
	names, err := d.Redeliver(ctx, "evt_25", "gone")
	if err != nil || !slices.Equal(names, []string{"gone"}) {
		t.Fatalf("Redeliver: %v, %v", names, err)
	}
	testenv.Until(t, wait, "the redelivery", func() bool { return e.statusCount(t, "gone", repository.DeliveryDelivered) == 1 })
	testenv.Until(t, wait, "the gauge clears", func() bool { return gathered(t, m, "paygw_webhook_endpoint_disabled", "gone", "") == 0 })
	if n := e.statusCount(t, "gone", repository.DeliveryDisabled); n != 39 {
		t.Errorf("%d deliveries disabled after enabling, want the 39 others", n)
	}
	if _, err := d.Redeliver(ctx, "evt_25", "nope"); !errors.Is(err, delivery.ErrUnknownEndpoint) {
		t.Errorf("unknown endpoint: %v", err)
	}
	if _, err := d.Redeliver(ctx, "evt_nope", ""); !errors.Is(err, payment.ErrNotFound) {
		t.Errorf("unknown event: %v", err)
	}
	names, err = d.Redeliver(ctx, "evt_3", "")
	if err != nil || !slices.Equal(names, []string{"gone", "ok"}) {
		t.Fatalf("Redeliver to all: %v, %v", names, err)
	}
	testenv.Until(t, wait, "evt_3 again to both", func() bool { return countID(gone.all(), "evt_3", 200) == 1 && countID(ok.all(), "evt_3", 200) == 2 })
}

func countID(hits []hit, id string, code int) int {
	n := 0
	for _, h := range hits {
		if h.id == id && h.code == code {
			n++
		}
	}
	return n
}

// An order's later events wait while its first one fails, and go once it has failed for good;
// another order's event does not wait.
func TestOrderWaitsForFailingFirst(t *testing.T) {
	e := newEnv(t)
	clk := newClock()
	s := newSink(t, func(id, _ string) int {
		if id == "evt_1" {
			return 500
		}
		return 200
	})
	serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Now: clk.Now,
		Schedule: []time.Duration{time.Second, 2 * time.Second}})
	e.registered(t, "erp")
	evs := []ev{{"evt_1", 1, "order.paid", "T1"}, {"evt_2", 2, "order.paid", "T2"}, {"evt_3", 3, "order.refunded", "T1"},
		{"evt_4", 4, "order.refunded", "T1"}}
	e.insert(t, evs...)
	testenv.Until(t, wait, "T2 delivered, T1 tried", func() bool {
		hits := s.all()
		return countID(hits, "evt_2", 200) == 1 && countID(hits, "evt_1", 500) == 1
	})
	time.Sleep(50 * time.Millisecond)
	clk.Advance(time.Second)
	testenv.Until(t, wait, "retry 1", func() bool { return countID(s.all(), "evt_1", 500) == 2 })
	time.Sleep(50 * time.Millisecond)
	if n := countID(s.all(), "evt_3", 200); n != 0 {
		t.Fatal("evt_3 went before evt_1 failed")
	}
	clk.Advance(2 * time.Second)
	testenv.Until(t, wait, "T1's later events", func() bool { return e.statusCount(t, "erp", repository.DeliveryDelivered) == 3 })
	var order []string
	for _, h := range s.all() {
		order = append(order, h.id)
	}
	if want := []string{"evt_1", "evt_1", "evt_1", "evt_3", "evt_4"}; !slices.Equal(slices.DeleteFunc(order, func(id string) bool {
		return id == "evt_2"
	}), want) {
		t.Errorf("T1's requests in the order %v, want %v", order, want)
	}
	if n := e.statusCount(t, "erp", repository.DeliveryFailed); n != 1 {
		t.Errorf("%d failed, want evt_1", n)
	}
}

// Two replicas on one database deliver every event exactly once (nothing was killed), never the
// same one at the same time, each order in order.
func TestTwoReplicas(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	inFlight := map[string]bool{}
	var overlap atomic.Int32
	s := newSink(t, func(id, _ string) int {
		mu.Lock()
		if inFlight[id] {
			overlap.Add(1)
		}
		inFlight[id] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		delete(inFlight, id)
		mu.Unlock()
		return 200
	})
	o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Shards: 8}
	serve(t, e.db, o)
	serve(t, e.db, o)
	e.registered(t, "erp")
	evs := orders(100, 4, 1)
	e.insert(t, evs...)
	testenv.Until(t, wait, "every event delivered", func() bool {
		return e.statusCount(t, "erp", repository.DeliveryDelivered) == len(evs)
	})
	if n := overlap.Load(); n > 0 {
		t.Fatalf("%d events were POSTed twice at once", n)
	}
	checkOrdered(t, s.all(), evs)
	holders := e.count(t, "SELECT COUNT(DISTINCT holder) FROM job_lease WHERE name LIKE 'webhook_delivery_%' AND holder <> ''")
	if holders != 2 {
		t.Errorf("the shards are held by %d replicas, want both", holders)
	}
}

// Replicas share the shards: one alone holds them all, a second that comes is given half, and
// when it stops the first takes them back. Events sent meanwhile all arrive, each once.
func TestReplicasShareShards(t *testing.T) {
	e := newEnv(t)
	s := newSink(t, nil)
	o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Shards: 4, LeaseTTL: 600 * time.Millisecond}
	held := func(holder string) int {
		return e.count(t, "SELECT COUNT(*) FROM job_lease WHERE name LIKE 'webhook_delivery_%' AND holder = ? AND expires_at > NOW(3)", holder)
	}
	o.Holder = "a"
	serve(t, e.db, o)
	testenv.Until(t, wait, "a holds every shard", func() bool { return held("a") == 4 })
	e.registered(t, "erp")
	evs := orders(50, 2, 1)
	e.insert(t, evs[:50]...)
	o.Holder = "b"
	_, stopB := serve(t, e.db, o)
	testenv.Until(t, wait, "two shards each", func() bool { return held("a") == 2 && held("b") == 2 })
	e.insert(t, evs[50:]...)
	testenv.Until(t, wait, "every event delivered", func() bool {
		return e.statusCount(t, "erp", repository.DeliveryDelivered) == len(evs)
	})
	stopB()
	testenv.Until(t, wait, "a holds every shard again", func() bool { return held("a") == 4 })
	checkOrdered(t, s.all(), evs)
}

// A replica stopped in the middle of a batch loses nothing and repeats nothing: the POSTs it has
// in flight finish and are recorded before it gives the shard's lease up, and the next holder
// sends the rest.
func TestStoppedMidBatch(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	var arrived atomic.Int32
	s := newSink(t, func(string, string) int {
		arrived.Add(1)
		<-gate
		return 200
	})
	o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Shards: 1, Parallel: 4}
	_, stopA := serve(t, e.db, o)
	e.registered(t, "erp")
	evs := orders(20, 1, 1)
	e.insert(t, evs...)
	testenv.Until(t, wait, "four POSTs in flight", func() bool { return arrived.Load() == 4 })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stopA()
	}()
	time.Sleep(50 * time.Millisecond)
	if n := arrived.Load(); n != 4 {
		t.Fatalf("%d POSTs after the stop began, want the 4 in flight", n)
	}
	close(gate)
	<-stopped
	if n := e.statusCount(t, "erp", repository.DeliveryDelivered); n != 4 {
		t.Fatalf("%d delivered when the stopped replica let go, want its 4 in flight", n)
	}
	serve(t, e.db, o)
	testenv.Until(t, wait, "every event delivered", func() bool {
		return e.statusCount(t, "erp", repository.DeliveryDelivered) == len(evs)
	})
	if n := e.count(t, "SELECT COUNT(*) FROM webhook_attempt"); n != len(evs) {
		t.Errorf("%d attempts recorded, want %d", n, len(evs))
	}
	checkOrdered(t, s.all(), evs) // each exactly once
}

// A replica that loses its lease mid-batch (as when it hangs past the lease) stops its POSTs at
// once and records none of them; the next holder sends every event, those cut short again.
func TestLeaseLostMidBatch(t *testing.T) {
	e := newEnv(t)
	s := newGatedSink(t, 4)
	o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Shards: 1, Parallel: 4, LeaseTTL: 600 * time.Millisecond}
	_, stopA := serve(t, e.db, o)
	e.registered(t, "erp")
	evs := orders(20, 1, 1)
	e.insert(t, evs...)
	testenv.Until(t, wait, "four POSTs in flight", func() bool { return s.held.Load() == 4 })
	testenv.Exec(t, e.dsn, `UPDATE job_lease SET holder = 'thief', expires_at = NOW(3) + INTERVAL 1 HOUR WHERE name = 'webhook_delivery_0'`)
	// The holder renews every 200 ms, finds the lease another's, and cuts its POSTs (their own
	// timeout is 10 s: the wait below ends long before).
	testenv.Until(t, 5*time.Second, "the four POSTs cut", func() bool { return s.cut.Load() == 4 })
	stopA()
	if n := e.count(t, "SELECT COUNT(*) FROM webhook_attempt"); n != 0 {
		t.Fatalf("%d attempts recorded by a holder that lost the lease", n)
	}
	if n := s.held.Load(); n != 4 {
		t.Fatalf("%d POSTs by a holder that lost the lease, want the 4 cut", n)
	}
	testenv.Exec(t, e.dsn, `UPDATE job_lease SET holder = '', expires_at = NOW(3) - INTERVAL 1 SECOND WHERE name = 'webhook_delivery_0'`)
	serve(t, e.db, o)
	testenv.Until(t, wait, "every event delivered", func() bool {
		return e.statusCount(t, "erp", repository.DeliveryDelivered) == len(evs)
	})
	seen := map[string]int{}
	for _, h := range s.all() {
		if h.code == 200 {
			seen[h.id]++
		}
	}
	for _, x := range evs {
		if seen[x.id] != 1 {
			t.Errorf("%s answered %d times by the next holder, want 1", x.id, seen[x.id])
		}
	}
}

// An endpoint receives the events after it was first seen (no backfill), only of its types; one
// added later starts after the events there are then.
func TestFanOutNoBackfill(t *testing.T) {
	e := newEnv(t)
	e.insert(t, orders(3, 1, 1)...) // before any endpoint
	s := newSink(t, nil)
	_, stop := serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("all"), s.endpoint("paid", "order.paid")}})
	e.registered(t, "all", "paid")
	e.insert(t, orders(2, 2, 4)...) // seq 4, 5 paid; 6, 7 refunded
	testenv.Until(t, wait, "the new events", func() bool {
		return e.statusCount(t, "all", repository.DeliveryDelivered) == 4 && e.statusCount(t, "paid", repository.DeliveryDelivered) == 2
	})
	if n := e.count(t, "SELECT COUNT(*) FROM webhook_delivery WHERE seq <= 3 OR (endpoint = 'paid' AND type <> 'order.paid')"); n != 0 {
		t.Errorf("%d deliveries of events before the endpoint or of types it does not take", n)
	}
	stop()
	s2 := newSink(t, nil)
	serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("all"), s.endpoint("paid", "order.paid"), s2.endpoint("late")}})
	e.registered(t, "all", "paid", "late")
	e.insert(t, orders(1, 1, 8)...)
	testenv.Until(t, wait, "seq 8 to late", func() bool { return e.statusCount(t, "late", repository.DeliveryDelivered) == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := len(s2.all()); n != 1 {
		t.Errorf("the late endpoint got %d events, want only seq 8", n)
	}
}

// No answer in time and no connection are attempts with status 0 and an error that does not
// carry the url (which may hold the merchant's token); a redirect is an answer, not followed.
func TestNoAnswer(t *testing.T) {
	e := newEnv(t)
	slow := newSink(t, func(string, string) int { time.Sleep(300 * time.Millisecond); return 200 })
	moved := newSink(t, func(string, string) int { return 307 })
	dead := delivery.Endpoint{Name: "dead", URL: "http://127.0.0.1:1/hook?token=secret-in-url", Sign: sign}
	serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{slow.endpoint("slow"), dead, moved.endpoint("moved")},
		Client: &http.Client{Timeout: 100 * time.Millisecond}, Schedule: []time.Duration{time.Hour}})
	e.registered(t, "slow", "dead", "moved")
	e.insert(t, orders(1, 1, 1)...)
	testenv.Until(t, wait, "three attempts", func() bool { return e.count(t, "SELECT COUNT(*) FROM webhook_attempt") == 3 })
	rows, err := e.db.Deliveries(context.Background(), repository.DeliveryFilter{Limit: 10})
	if err != nil || len(rows) != 3 {
		t.Fatalf("%d deliveries, %v", len(rows), err)
	}
	for _, r := range rows {
		a := r.Attempts[0]
		want := 0
		if r.Endpoint == "moved" {
			want = 307
		}
		if r.Status != repository.DeliveryPending || a.StatusCode != want || a.Error == "" || strings.Contains(a.Error, "secret-in-url") {
			t.Errorf("%s: %s, attempt %+v", r.Endpoint, r.Status, a)
		}
	}
	if n := len(moved.all()); n != 1 {
		t.Errorf("the redirecting endpoint saw %d requests, want 1", n)
	}
}

// List pages by cursor and filters by endpoint and status; bad queries are refused.
func TestList(t *testing.T) {
	e := newEnv(t)
	ok := newSink(t, nil)
	bad := newSink(t, func(string, string) int { return 500 })
	m := metrics.New("test")
	d, _ := serve(t, e.db, delivery.Options{Endpoints: []delivery.Endpoint{ok.endpoint("ok"), bad.endpoint("bad")},
		Schedule: []time.Duration{time.Hour}, Metrics: m, Backlog: 10 * time.Millisecond})
	e.registered(t, "ok", "bad")
	e.insert(t, orders(5, 1, 1)...)
	testenv.Until(t, wait, "tried", func() bool {
		return e.statusCount(t, "ok", repository.DeliveryDelivered) == 5 && e.count(t, "SELECT COUNT(*) FROM webhook_attempt") == 10
	})
	// An attempt is counted and timed just after it is recorded: the metrics may trail the rows.
	testenv.Eventually(t, wait, func() error {
		for _, c := range []struct {
			endpoint, result string
			want             float64
		}{{"ok", metrics.WebhookDelivered, 5}, {"ok", metrics.WebhookRetry, 0}, {"bad", metrics.WebhookRetry, 5}, {"bad", metrics.WebhookFailed, 0}} {
			if got := gathered(t, m, "paygw_webhook_deliveries_total", c.endpoint, c.result); got != c.want {
				return fmt.Errorf("deliveries{%s,%s} = %v, want %v", c.endpoint, c.result, got, c.want)
			}
		}
		if n := gathered(t, m, "paygw_webhook_attempt_duration_seconds", "bad", ""); n != 5 {
			return fmt.Errorf("%v POSTs to bad timed, want 5", n)
		}
		return nil
	})
	testenv.Until(t, wait, "the backlog gauge", func() bool {
		return gathered(t, m, "paygw_webhook_oldest_undelivered_seconds", "bad", "") > 0 &&
			gathered(t, m, "paygw_webhook_oldest_undelivered_seconds", "ok", "") == 0
	})
	ctx := context.Background()
	var all []delivery.Delivery
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := d.List(ctx, delivery.Query{Cursor: cursor, Limit: 3})
		if err != nil || pages > 4 {
			t.Fatalf("List: %v after %d pages", err, pages)
		}
		all = append(all, page.Deliveries...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 10 {
		t.Fatalf("%d deliveries over the pages, want 10", len(all))
	}
	page, err := d.List(ctx, delivery.Query{Endpoint: "bad", Status: repository.DeliveryPending})
	if err != nil || len(page.Deliveries) != 5 || page.NextCursor != "" {
		t.Fatalf("bad pending: %+v, %v", page, err)
	}
	for _, v := range page.Deliveries {
		if v.Endpoint != "bad" || v.NextAttemptAt == nil || len(v.Attempts) != 1 || v.Attempts[0].StatusCode != 500 {
			t.Errorf("%+v", v)
		}
	}
	for name, q := range map[string]delivery.Query{
		"status": {Status: "lost"}, "cursor": {Cursor: "x1"}, "limit": {Limit: 501},
	} {
		if _, err := d.List(ctx, q); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// gathered reads a webhook family's value for endpoint (and result, if not ""): a counter's or
// gauge's value, a histogram's count.
func gathered(t *testing.T, m *metrics.Metrics, family, endpoint, result string) float64 {
	t.Helper()
	found := -1.0
	testenv.Series(t, m, family, func(labels map[string]string, v float64) {
		if found == -1 && labels["endpoint"] == endpoint && (result == "" || labels["result"] == result) {
			found = v
		}
	})
	return found
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "1", "0", "-1", "+5", "007", "9223372036854775807", "9223372036854775808", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := delivery.ParseCursor(s)
		if err != nil {
			return
		}
		if s == "" && id != 0 || s != "" && (id <= 0 || fmt.Sprint(id) != s) {
			t.Fatalf("ParseCursor(%q) = %d", s, id)
		}
	})
}
