package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/simulate"
)

var purgedLine = regexp.MustCompile(`purged (\d+) (\w+) row\(s\) older than \S+ in (\d+) batch\(es\) of at most 1000`)

// `paygw purge` deletes final records past idempotency.retention and journal rows past
// journal.retention, 1,000 at most per statement, and says how many.
func TestPurgeCommand(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	testenv.OldRecords(t, dsn, "old", 2500, 1, 8*24*time.Hour)
	testenv.OldRecords(t, dsn, "stuck", 3, 0, 8*24*time.Hour) // processing: someone's claim, kept
	testenv.OldRecords(t, dsn, "young", 10, 2, 6*24*time.Hour)
	testenv.OldJournal(t, dsn, "old", 5, 401*24*time.Hour)
	testenv.OldJournal(t, dsn, "young", 4, 399*24*time.Hour)
	testenv.OldEvents(t, dsn, "old", 6, 1, 31*24*time.Hour)
	testenv.OldEvents(t, dsn, "young", 2, 100, 29*24*time.Hour)
	// Webhook deliveries of 31 days ago: the delivered one and its attempt go, the pending one stays.
	for i, status := range []string{"delivered", "pending"} {
		testenv.Exec(t, dsn, `INSERT INTO webhook_delivery (endpoint, event_id, seq, type, trade_no, shard, status, event_time)
			VALUES ('erp', ?, ?, 'order.paid', 'P1', 0, ?, UTC_TIMESTAMP(3) - INTERVAL 31 DAY)`, fmt.Sprintf("evt_old-%d", i), i+1, status)
		testenv.Exec(t, dsn, `INSERT INTO webhook_attempt (delivery_id, at, status_code, latency_ms)
			VALUES (LAST_INSERT_ID(), UTC_TIMESTAMP(3) - INTERVAL 31 DAY, 200, 1)`)
	}
	testenv.Exec(t, dsn, `INSERT INTO anomaly (kind, trade_no, channel, channel_txn_id, amount_fen, currency, detail, created_time)
		VALUES ('AMOUNT_MISMATCH', 'P1', 'alipay', 'T1', 1, 'CNY', 'old', UTC_TIMESTAMP(3) - INTERVAL 900 DAY)`)
	path := writeConfig(t, settings{dsn: dsn})

	r := runPaygw(t, nil, "purge", "--config", path)
	if r.code != 0 {
		t.Fatalf("purge: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := map[string][2]string{}
	for _, m := range purgedLine.FindAllStringSubmatch(r.stdout, -1) {
		got[m[2]] = [2]string{m[1], m[3]}
	}
	want := map[string][2]string{"idempotent_record": {"2500", "3"}, "notify_journal": {"5", "1"}, "event": {"6", "1"},
		"webhook_attempt": {"2", "1"}, "webhook_delivery": {"1", "1"}}
	if !maps.Equal(got, want) {
		t.Fatalf("purge output (rows, batches) %v, want %v:\n%s", got, want, r.stdout)
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'old-%'`:   0,
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'stuck-%'`: 3,
		`SELECT COUNT(*) FROM idempotent_record WHERE idem_key LIKE 'young-%'`: 10,
		`SELECT COUNT(*) FROM notify_journal WHERE notify_id LIKE 'young-%'`:   4,
		`SELECT COUNT(*) FROM notify_journal WHERE notify_id LIKE 'old-%'`:     0,
		`SELECT COUNT(*) FROM anomaly`:                                         1,
		`SELECT COUNT(*) FROM event`:                                           2,
		`SELECT COUNT(*) FROM webhook_delivery WHERE status = 'pending'`:       1,
		`SELECT COUNT(*) FROM webhook_delivery`:                                1,
		`SELECT COUNT(*) FROM webhook_attempt`:                                 0,
	} {
		if n := testenv.Count(t, dsn, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}

	// A longer retention from the environment keeps the young rows of a second run too.
	r = runPaygw(t, []string{"PAYGW_IDEMPOTENCY__RETENTION=72h"}, "purge", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "purged 10 idempotent_record row(s) older than 72h0m0s") {
		t.Fatalf("purge at 72h: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// --json: one document, the same counts.
	testenv.OldRecords(t, dsn, "json", 1001, 2, 8*24*time.Hour)
	js := runPaygw(t, nil, "purge", "--config", path, "--json")
	var purged struct {
		Tables map[string]struct {
			Rows             int64  `json:"rows"`
			Batches          int    `json:"batches"`
			OlderThan        string `json:"older_than"`
			OlderThanSeconds int64  `json:"older_than_seconds"`
		} `json:"tables"`
		BatchMax int `json:"batch_max"`
	}
	decodeJSON(t, js, &purged)
	rec, jour := purged.Tables["idempotent_record"], purged.Tables["notify_journal"]
	if js.code != 0 || purged.BatchMax != 1000 || rec.Rows != 1001 || rec.Batches != 2 || rec.OlderThan != "168h0m0s" ||
		rec.OlderThanSeconds != 7*24*3600 || jour.Rows != 0 || jour.OlderThan != "9600h0m0s" || len(purged.Tables) != len(want) {
		t.Fatalf("purge --json: exit %d, %+v\nstdout:\n%s\nstderr:\n%s", js.code, purged, js.stdout, js.stderr)
	}

	// Below the channels' retry window: refused, naming the key.
	r = runPaygw(t, []string{"PAYGW_IDEMPOTENCY__RETENTION=24h"}, "purge", "--config", path)
	if r.code == 0 || !strings.Contains(r.stderr, "idempotency.retention") {
		t.Fatalf("purge at 24h: exit %d, stderr %q; want a refusal naming idempotency.retention", r.code, r.stderr)
	}
}

// serve purges once at start under the day's lease; a restart within the day does not purge
// again, whichever replica held it.
func TestServePurgesDaily(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	testenv.OldRecords(t, dsn, "old", 1200, 1, 8*24*time.Hour)
	addr := freeAddr(t)
	path := writeConfig(t, settings{addr: addr, dsn: dsn, logLevel: "debug", extra: "reconcile:\n  query_interval: 0s\n"})
	s := startServer(t, path, addr)
	waitFor(t, 10*time.Second, s, "serve purged the old records", func() bool {
		return testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record`) == 0
	})
	waitFor(t, 10*time.Second, s, "serve logged the purge", func() bool {
		return strings.Contains(s.out.String(), `"purged rows past retention"`)
	})
	s.stop()
	if !strings.Contains(s.out.String(), `"idempotent_records":1200`) || !strings.Contains(s.out.String(), `"record_batches":2`) {
		t.Errorf("the purge log line does not say 1200 records in 2 batches:\n%s", s.out)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM job_lease WHERE name = 'purge' AND expires_at > UTC_TIMESTAMP(3) + INTERVAL 23 HOUR`); n != 1 {
		t.Fatalf("the purge lease is not held for the day (%d rows)", n)
	}

	testenv.OldRecords(t, dsn, "later", 5, 1, 8*24*time.Hour)
	s2 := startServer(t, path, addr)
	// The restart looks at start, finds the day's lease held, and purges nothing.
	waitFor(t, 10*time.Second, s2, "the restart looked at the purge lease", func() bool {
		return strings.Contains(s2.out.String(), `"purge not due: the day's lease is held"`)
	})
	s2.stop()
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record`); n != 5 {
		t.Fatalf("a restart within the day purged again: %d records left, want 5", n)
	}
}

// After the records are purged, a repeated payment notification still answers success and
// changes nothing (the order is PAID by that transaction), and the idempotent create still
// answers the original order.
func TestRepeatsAfterPurge(t *testing.T) {
	dir, man := sandbox.Keys(t)
	signers, err := simulate.LoadSigners(dir)
	if err != nil {
		t.Fatal(err)
	}
	channelsYAML, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.NewDatabase(t)
	addr := freeAddr(t)
	token := newToken(t)
	// Redis down: every repeat is decided by MySQL alone, without a done marker.
	path := writeConfig(t, settings{addr: addr, dsn: dsn, token: token, redisAddr: "127.0.0.1:1",
		extra: string(channelsYAML) + "reconcile:\n  query_interval: 0s\n"})
	s := startServer(t, path, addr)
	if r := s.do("PUT", "/v1/stock/A-1", token, nil, `{"num":10,"price_fen":1999}`); r.code != http.StatusOK {
		t.Fatalf("PUT stock: %d %s", r.code, r.body)
	}
	key := map[string]string{"Idempotency-Key": "purge-1"}
	const orderBody = `{"user_id":7,"sku":"A-1","num":1}`
	orig := s.do("POST", "/v1/orders", token, key, orderBody)
	if orig.code != http.StatusCreated {
		t.Fatalf("create: %d %s", orig.code, orig.body)
	}
	m := regexp.MustCompile(`"trade_no":"([^"]+)"`).FindStringSubmatch(orig.body)
	if m == nil {
		t.Fatalf("no trade_no in %s", orig.body)
	}
	tradeNo := m[1]
	msg, err := signers["alipay"].Sign(simulate.Payment{TradeNo: tradeNo, AmountFen: 1999})
	if err != nil {
		t.Fatal(err)
	}
	url := simulate.NotifyURL(s.url, "alipay")
	if r := simulate.Send(t.Context(), s.client, url, msg); r.Kind() != "success" {
		t.Fatalf("first notification: %s", r)
	}
	state := func() string {
		return fmt.Sprint(
			testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = ? AND status = 'PAID' AND channel = 'alipay'`, tradeNo),
			testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders`),
			testenv.Count(t, dsn, `SELECT COUNT(DISTINCT channel_txn_id) FROM orders WHERE channel_txn_id IS NOT NULL`),
			testenv.Count(t, dsn, `SELECT COUNT(*) FROM notify_journal`),
			testenv.Count(t, dsn, `SELECT COUNT(*) FROM anomaly`),
			testenv.Count(t, dsn, `SELECT num FROM stock WHERE sku = 'A-1'`))
	}
	before := state()
	if before != "1 1 1 1 0 9" {
		t.Fatalf("after the payment: %s, want the order PAID once", before)
	}
	getPaid := func() string {
		return fmt.Sprint(testenv.Count(t, dsn, `SELECT CAST(UNIX_TIMESTAMP(paid_time) * 1000 AS SIGNED) FROM orders WHERE trade_no = ?`, tradeNo))
	}
	paidTime := getPaid()

	// Eight days later: the records are past the week's retention.
	testenv.Exec(t, dsn, `UPDATE idempotent_record SET create_time = create_time - INTERVAL 8 DAY`)
	r := runPaygw(t, nil, "purge", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "purged 2 idempotent_record row(s)") {
		t.Fatalf("purge: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	for i := 0; i < 2; i++ {
		if r := simulate.Send(t.Context(), s.client, url, msg); r.Kind() != "success" {
			t.Fatalf("repeat %d after the purge: %s, want success", i+1, r)
		}
	}
	if after := state(); after != before {
		t.Fatalf("the repeats after the purge changed the books: %s, was %s", after, before)
	}
	if getPaid() != paidTime {
		t.Fatal("the repeats after the purge changed paid_time")
	}
	again := s.do("POST", "/v1/orders", token, key, orderBody)
	if again.code != orig.code || !strings.Contains(again.body, `"trade_no":"`+tradeNo+`"`) {
		t.Fatalf("create after the purge: %d %s, want the original order %s", again.code, again.body, tradeNo)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders`); n != 1 {
		t.Fatalf("orders after the create's retry: %d, want 1", n)
	}
	s.stop()
}
