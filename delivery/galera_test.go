package delivery_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/outbox"
	"github.com/paygw/paygw/repository"
)

// galeraEnvs opens one env per node of a new database on the test's Galera cluster.
func galeraEnvs(t *testing.T) []*env {
	t.Helper()
	var envs []*env
	for _, dsn := range testenv.GaleraDatabase(t) {
		raw, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Close() })
		envs = append(envs, &env{dsn: dsn, raw: raw, db: testenv.Open(t, dsn)})
	}
	return envs
}

// rows prints a small query's rows, for a failure's message.
func (e *env) rows(t *testing.T, q string) string {
	t.Helper()
	rs, err := e.raw.Query(q)
	if err != nil {
		return err.Error()
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	var out []string
	for rs.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return err.Error()
		}
		var row []string
		for _, v := range vals {
			row = append(row, string(v))
		}
		out = append(out, strings.Join(row, " "))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// insertUnnumbered commits events as the outbox does, without a seq: the sequencer numbers them.
func (e *env) insertUnnumbered(t *testing.T, evs []ev) {
	t.Helper()
	for _, x := range evs {
		if _, err := e.raw.Exec(`INSERT INTO event (event_id, type, trade_no, body, created_time) VALUES (?, ?, ?, ?, NOW(3))`,
			x.id, x.typ, x.tradeNo, []byte(x.body())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGaleraReplicasOnThreeNodes runs a replica on each node of a Galera cluster (each writes
// to its own node, as in production): each has a sequencer and a dispatcher, and events commit
// on every node, an order's refund after its payment. The leases keep the replicas off each
// other's rows, so: every event reaches the endpoint exactly once (nothing was killed), each
// order's in order, the shards are spread over the replicas, and certification fails rarely.
func TestGaleraReplicasOnThreeNodes(t *testing.T) {
	envs := galeraEnvs(t)
	s := newSink(t, nil)
	conflicts := func() int {
		return testenv.GaleraCounter(t, "wsrep_local_cert_failures") + testenv.GaleraCounter(t, "wsrep_local_bf_aborts")
	}
	atStart := conflicts()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("erp")}, Shards: 8}
	for i, e := range envs {
		holder := fmt.Sprintf("node%d", i+1)
		o.Holder = holder
		serve(t, e.db, o)
		seq := outbox.New(e.db, testenv.Logger(t))
		wg.Go(func() { seq.Serve(ctx, holder) })
	}
	for _, e := range envs {
		e.registered(t, "erp")
	}
	// The replicas race for the leases and the endpoint's row once, at start; then they settle.
	testenv.Until(t, 30*time.Second, "every lease held", func() bool {
		return envs[0].count(t, "SELECT COUNT(*) FROM job_lease WHERE (name LIKE 'webhook_delivery_%' OR name = 'outbox') AND holder <> '' AND expires_at > NOW(3)") == 9
	})
	settled := conflicts()
	evs := orders(200, 3, 1) // the payments, then two refunds of each order
	start := time.Now()
	for k := range 3 {
		step := evs[k*200 : (k+1)*200]
		for i, e := range envs { // a third of the step committed on each node
			var mine []ev
			for j, x := range step {
				if j%len(envs) == i {
					mine = append(mine, x)
				}
			}
			e.insertUnnumbered(t, mine)
		}
		for _, e := range envs { // every node has the step before the next one commits
			e.count(t, "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM event")
		}
	}
	delivered := func() int {
		return envs[0].count(t, "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM webhook_delivery WHERE status = ?",
			repository.DeliveryDelivered)
	}
	for delivered() < len(evs) {
		if time.Since(start) > time.Minute {
			t.Fatalf("%d of %d events delivered after a minute: deliveries by status %s, cursors %s, leases %s", delivered(), len(evs),
				envs[0].rows(t, "SELECT status, COUNT(*) FROM webhook_delivery GROUP BY status"),
				envs[0].rows(t, "SELECT shard, seq FROM webhook_cursor ORDER BY shard"),
				envs[0].rows(t, "SELECT name, holder, expires_at > NOW(3) FROM job_lease ORDER BY name"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	// Order them by the seq the sequencers gave.
	for i := range evs {
		evs[i].seq = int64(envs[0].count(t, "SELECT seq FROM event WHERE event_id = ?", evs[i].id))
	}
	checkOrdered(t, s.all(), evs)
	working := conflicts() - settled
	holders := envs[0].count(t, "SELECT COUNT(DISTINCT holder) FROM job_lease WHERE name LIKE 'webhook_delivery_%' AND holder <> ''")
	t.Logf("%d events delivered by 3 replicas on 3 nodes in %s: %d requests, shards held by %d replicas; "+
		"certification failures and brute-force aborts: %d while the leases settled, %d while delivering",
		len(evs), took.Round(time.Millisecond), len(s.all()), holders, settled-atStart, working)
	if holders < 2 {
		t.Errorf("the shards are held by %d replica(s), want them spread", holders)
	}
	// A storm would be a conflict per delivery or worse; the leases keep the replicas apart.
	if working > len(evs)/30 {
		t.Errorf("%d certification failures and brute-force aborts while delivering %d events: a certification storm",
			working, len(evs))
	}
}
