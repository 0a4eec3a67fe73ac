package handlers

// Faults on the wire: an in-process toxiproxy sits between the gateway and MariaDB, and between
// the gateway and Redis, and breaks the connections the way real networks break them. Every case
// checks the same three things: no double (one PAID transition, one record), nothing lost (the
// redelivery is answered with success) and a bounded latency (inside the channel's deadline).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// alipayDeadline is the Alipay channel's apply deadline (channels.Alipay.ApplyTimeout): every
// answer in this file must come well inside it.
const alipayDeadline = 8 * time.Second

// wireProxy is one toxiproxy proxy, run fully in-process.
type wireProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

func newWireProxy(t *testing.T, name, upstream string) *wireProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Collection.Remove(name) })
	return &wireProxy{t: t, p: p}
}

func (w *wireProxy) addr() string { return w.p.Listen }

// add installs a toxic; it is in force on every link, old and new, when add returns.
func (w *wireProxy) add(name, typ, stream, attrs string) {
	w.t.Helper()
	if err := w.tryAdd(name, typ, stream, attrs); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wireProxy) tryAdd(name, typ, stream, attrs string) error {
	_, err := w.p.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"` + name + `","type":"` + typ + `","stream":"` + stream + `","attributes":` + attrs + `}`))
	return err
}

// remove takes a toxic off; toxiproxy logs through the context's zerolog logger.
func (w *wireProxy) remove(name string) {
	w.t.Helper()
	if err := w.tryRemove(name); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wireProxy) tryRemove(name string) error {
	return w.p.Toxics.RemoveToxic(zerolog.Nop().WithContext(context.Background()), name)
}

// commitTrap makes the next COMMIT ambiguous. The MySQL driver reaches MariaDB through the
// proxy over a dialer of this test's own, which only watches what the client writes. When an
// armed trap sees the COM_QUERY "COMMIT" packet go out, it first installs a limit_data toxic of
// 0 bytes on the proxy's downstream direction, then lets the packet through. The client is
// synchronous, so every earlier answer has been read: the first downstream bytes after that
// moment are COMMIT's own OK. MariaDB has committed by the time it sends them, and toxiproxy
// drops them and closes the connection. The client sees the connection die after COMMIT was
// sent and before its answer: the outcome is unknown to it, committed in fact. The toxic is
// taken off again as soon as the client's read fails, so the requests that follow (and the
// redelivery) find a healthy wire.
type commitTrap struct {
	proxy *wireProxy
	armed atomic.Bool
	skip  atomic.Int32 // COMMITs an armed trap lets through before it springs
	fired atomic.Int32 // COMMITs whose answer was cut
}

const commitCut = "commit-cut"

// isCommit: a MySQL packet (3-byte length, sequence number) carrying COM_QUERY (0x03) "COMMIT".
func isCommit(b []byte) bool {
	return len(b) >= 11 && b[4] == 0x03 && strings.EqualFold(string(b[5:11]), "COMMIT")
}

type trapConn struct {
	net.Conn
	trap   *commitTrap
	sprung atomic.Bool
}

func (c *trapConn) Write(b []byte) (int, error) {
	if isCommit(b) && c.trap.armed.Load() && c.trap.skip.Add(-1) < 0 && c.trap.armed.CompareAndSwap(true, false) {
		if err := c.trap.proxy.tryAdd(commitCut, "limit_data", "downstream", `{"bytes":0}`); err != nil {
			return 0, err
		}
		c.sprung.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *trapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.sprung.CompareAndSwap(true, false) {
		c.trap.fired.Add(1)
		_ = c.trap.proxy.tryRemove(commitCut)
	}
	return n, err
}

// wireDSN is a fresh test database reached through a MariaDB proxy, and the trap on its wire.
func wireDSN(t *testing.T) (string, *wireProxy, *commitTrap) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := newWireProxy(t, "mariadb", cfg.Addr)
	trap := &commitTrap{proxy: px}
	network := "wire_" + testenv.Random(4)
	mysql.RegisterDialContext(network, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &trapConn{Conn: conn, trap: trap}, nil
	})
	t.Cleanup(func() { mysql.DeregisterDialContext(network) })
	cfg.Net, cfg.Addr = network, px.addr()
	return cfg.FormatDSN(), px, trap
}

// wireGuard is a guard on the test Redis reached through a proxy, with the given timeout, and a
// direct client on the same Redis to look at its keys.
func wireGuard(t *testing.T, timeout time.Duration) (*guard.Guard, *wireProxy, *redis.Client, string) {
	t.Helper()
	testenv.Guard(t) // fails loudly when Redis is not there
	px := newWireProxy(t, "redis", testenv.RedisAddr())
	prefix := "paygw-test:" + testenv.Random(6) + ":"
	g := guard.New(guard.Options{Addr: px.addr(), Prefix: prefix, Timeout: timeout}, testenv.Logger(t))
	t.Cleanup(func() { _ = g.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return g, px, rdb, prefix
}

// markers lists the done markers the guard holds under prefix.
func markers(t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), prefix+"*done:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// timed sends and reports how long the answer took.
func timed(fn func() response) (response, time.Duration) {
	start := time.Now()
	r := fn()
	return r, time.Since(start)
}

func wantWithin(t *testing.T, what string, took, limit time.Duration) {
	t.Helper()
	t.Logf("%s: %v (limit %v)", what, took.Round(time.Millisecond), limit) // the figures in docs/reliability.md
	if took >= limit {
		t.Fatalf("%s took %v, want under %v", what, took, limit)
	}
}

// An ambiguous COMMIT on a payment, then on a refund of it: the answer is "retry", no done
// marker stands for the unknown outcome, and the redelivery finds the committed record and is
// answered with success. One record, one PAID transition, the refund counted once.
func TestWireAmbiguousCommit(t *testing.T) {
	dsn, _, trap := wireDSN(t)
	g, _, rdb, prefix := wireGuard(t, 3*time.Second)
	h := newHarness(t, options{dsn: dsn, guardOverride: g})
	tn := h.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}

	trap.armed.Store(true)
	r, took := timed(func() response { return h.send("alipay", pay) })
	if trap.fired.Load() != 1 {
		t.Fatalf("the COMMIT's answer was cut %d times, want 1", trap.fired.Load())
	}
	wantChannelReply(t, "alipay", r, payment.ReplyRetry)
	wantWithin(t, "the answer to an ambiguous COMMIT", took, alipayDeadline)
	if m := markers(t, rdb, prefix); len(m) != 0 {
		t.Fatalf("done markers after an unknown outcome: %v", m)
	}
	// The commit did happen: the order is PAID once already, by the attempt answered "retry".
	h.wantPaidOnce(tn)

	for range 2 { // the redelivery, and one more
		r, took = timed(func() response { return h.send("alipay", pay) })
		wantChannelReply(t, "alipay", r, payment.ReplySuccess)
		wantWithin(t, "a redelivery", took, alipayDeadline)
	}
	h.wantPaidOnce(tn)
	if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'APPLIED'`, tn); n != 1 {
		t.Fatalf("APPLIED journal rows = %d, want 1", n)
	}

	refund := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 500}
	before := len(markers(t, rdb, prefix))
	trap.armed.Store(true)
	r, took = timed(func() response { return h.send("alipay", refund) })
	if trap.fired.Load() != 2 {
		t.Fatalf("the refund's COMMIT answer was not cut (%d cuts)", trap.fired.Load())
	}
	wantChannelReply(t, "alipay", r, payment.ReplyRetry)
	wantWithin(t, "the answer to a refund's ambiguous COMMIT", took, alipayDeadline)
	if m := markers(t, rdb, prefix); len(m) != before {
		t.Fatalf("done markers after the refund's unknown outcome: %v (had %d)", m, before)
	}
	for range 2 {
		r, took = timed(func() response { return h.send("alipay", refund) })
		wantChannelReply(t, "alipay", r, payment.ReplySuccess)
		wantWithin(t, "a refund's redelivery", took, alipayDeadline)
	}
	if o := h.order(tn); o.RefundedFen != 500 {
		t.Fatalf("refunded_fen = %d, want 500 (the refund counted once)", o.RefundedFen)
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'refund_notify'`); n != 1 {
		t.Fatalf("refund records = %d, want 1", n)
	}
}

// Latency to MariaDB beyond the guard's TTL: the guard expires while the first delivery is still
// in its transaction, a twin takes the guard and enters too, and the unique key holds: one
// record, one PAID transition, and neither answer loses the payment.
func TestWireMariaDBSlowerThanGuardTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	dsn, db, _ := wireDSN(t)
	g, _, rdb, prefix := wireGuard(t, 3*time.Second)
	h := newHarness(t, options{dsn: dsn, guardOverride: g, guardTTL: ttl})
	tn := h.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}

	// Every answer from MariaDB arrives 150 ms late: the transaction's round trips add up to
	// well over the guard's 300 ms.
	db.add("slow", "latency", "downstream", `{"latency":150}`)
	first := make(chan struct {
		r    response
		took time.Duration
	}, 1)
	go func() {
		r, took := timed(func() response { return h.send("alipay", pay) })
		first <- struct {
			r    response
			took time.Duration
		}{r, took}
	}()
	// The first delivery takes the guard, and the guard's TTL ends while the delivery is still in
	// its transaction: wait for each, not for a guessed time.
	guards := func() int {
		keys, err := rdb.Keys(context.Background(), prefix+"*lock:*"+tn+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if guards() == 0 {
			return errors.New("the first delivery has not taken the guard")
		}
		return nil
	})
	testenv.Eventually(t, 5*time.Second, func() error {
		select {
		case <-first:
			t.Fatal("the first delivery finished inside the guard's TTL: the latency is too small to test anything")
		default:
		}
		if guards() != 0 {
			return errors.New("the guard has not expired")
		}
		return nil
	})
	// The guard has expired under the first delivery: anyone may take it now.
	l, err := g.Acquire(context.Background(), "trade:"+tn, time.Second)
	if err != nil || l == nil {
		t.Fatalf("the guard is still held past its TTL (%v): the twin would not enter", err)
	}
	l.Release(context.Background())

	r2, took2 := timed(func() response { return h.send("alipay", pay) })
	f := <-first
	db.remove("slow")
	for i, res := range []struct {
		r    response
		took time.Duration
	}{f, {r2, took2}} {
		wantChannelReply(t, "alipay", res.r, payment.ReplySuccess)
		wantWithin(t, "delivery "+itoa(int64(i)), res.took, alipayDeadline)
	}
	h.wantPaidOnce(tn)
	if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'APPLIED'`, tn); n != 1 {
		t.Fatalf("APPLIED journal rows = %d, want 1", n)
	}
}

// Redis slow (every answer later than the guard's timeout) and Redis black-holed (a timeout
// toxic: the bytes go in and nothing comes back): the guard reports unavailable after its
// timeout, the gateway carries on with MySQL, and concurrent duplicates still apply once.
func TestWireRedisSlowOrBlackHoled(t *testing.T) {
	const budget = 200 * time.Millisecond // the guard's Redis timeout (dial, read, write)
	for _, tc := range []struct{ name, typ, stream, attrs string }{
		{"slow", "latency", "downstream", `{"latency":1000}`},
		{"black-holed", "timeout", "upstream", `{"timeout":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, rpx, _, _ := wireGuard(t, budget)
			h := newHarness(t, options{guardOverride: g})
			if err := g.Ping(context.Background()); err != nil {
				t.Fatalf("guard through the proxy: %v", err)
			}
			rpx.add(tc.name, tc.typ, tc.stream, tc.attrs)
			for i := range 3 {
				tn := h.seedOrder(1999)
				pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}
				start := time.Now()
				replies := together(4, func() response { return h.send("alipay", pay) })
				took := time.Since(start)
				for _, r := range replies {
					wantChannelReply(t, "alipay", r, payment.ReplySuccess)
				}
				// The Redis budget once, plus the database's own time: nowhere near the
				// 1 s latency or the black hole.
				wantWithin(t, "four duplicates with Redis "+tc.name, took, budget+700*time.Millisecond)
				if o := h.order(tn); o.Status != payment.OrderPaid {
					t.Fatalf("order %s is %s", tn, o.Status)
				}
				if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'APPLIED'`, tn); n != 1 {
					t.Fatalf("APPLIED journal rows = %d, want 1", n)
				}
				if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != i+1 {
					t.Fatalf("pay_notify records = %d after %d payments", n, i+1)
				}
			}
			if err := g.Ping(context.Background()); err == nil {
				t.Fatal("the guard answered through the fault: the toxic did nothing")
			}
			if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 3 {
				t.Fatalf("pay_notify records = %d, want 3 (one per payment)", n)
			}
		})
	}
}

// An ambiguous COMMIT on an idempotent create: the business transaction (stock taken, order
// inserted, the key's record completed) committed, but the client saw its connection die. The
// answer is a retryable error, the claim is not failed over the committed record (FailClaim is
// fenced on a processing record), and the client's retry with the same key replays the one
// order: one order, stock taken once.
func TestWireAmbiguousCommitOnCreate(t *testing.T) {
	dsn, _, trap := wireDSN(t)
	g, _, rdb, prefix := wireGuard(t, 3*time.Second)
	h := newHarness(t, options{dsn: dsn, guardOverride: g})
	h.putStock("A-100", 10, 1999)

	trap.armed.Store(true)
	r, took := timed(func() response { return h.create(testToken, "wire-key-1", orderBody) })
	if trap.fired.Load() != 1 {
		t.Fatalf("the COMMIT's answer was cut %d times, want 1", trap.fired.Load())
	}
	if r.code < 500 {
		t.Fatalf("an ambiguous COMMIT answered %d %s, want a retryable 5xx", r.code, r.body)
	}
	wantWithin(t, "the answer to an ambiguous COMMIT", took, alipayDeadline)
	if m := markers(t, rdb, prefix); len(m) != 0 {
		t.Fatalf("done markers after an unknown outcome: %v", m)
	}
	if n := h.count(`SELECT COUNT(*) FROM orders WHERE idem_key = 'wire-key-1'`); n != 1 {
		t.Fatalf("orders for the key after the cut COMMIT = %d, want 1 (it did commit)", n)
	}

	var tradeNo string
	for i := range 2 { // the client's retry with the same key, and one more
		r, took = timed(func() response { return h.create(testToken, "wire-key-1", orderBody) })
		if r.code != 201 {
			t.Fatalf("retry %d: %d %s, want the replayed 201", i, r.code, r.body)
		}
		wantWithin(t, "a retry", took, alipayDeadline)
		var o struct {
			TradeNo string `json:"trade_no"`
		}
		if err := json.Unmarshal([]byte(r.body), &o); err != nil || o.TradeNo == "" {
			t.Fatalf("retry %d: %s (%v)", i, r.body, err)
		}
		if tradeNo != "" && o.TradeNo != tradeNo {
			t.Fatalf("retries answered two orders: %s and %s", tradeNo, o.TradeNo)
		}
		tradeNo = o.TradeNo
	}
	if n := h.count(`SELECT COUNT(*) FROM orders`); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	if n := h.stockNum("A-100"); n != 9 {
		t.Fatalf("stock = %d, want 9 (taken once)", n)
	}
}

// MySQL half-open connections: a timeout toxic swallows everything MariaDB sends, so a
// connection of the pool looks alive and never answers (a peer gone without a FIN or RST). The
// notification caught on it is answered "retry" at the channel's deadline, which cancels the
// query and has the driver close that connection. Once the network is back, the pool recovers
// on its own (no restart, the same DB handle): the redelivery is applied at once, and once.
func TestWireMySQLHalfOpen(t *testing.T) {
	dsn, db, _ := wireDSN(t)
	h := newHarness(t, options{dsn: dsn})
	tn := h.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}

	db.add("half-open", "timeout", "downstream", `{"timeout":0}`)
	r, took := timed(func() response { return h.send("alipay", pay) })
	wantChannelReply(t, "alipay", r, payment.ReplyRetry)
	t.Logf("a delivery on a half-open connection: %v", took.Round(time.Millisecond))
	if took < alipayDeadline-time.Second || took > alipayDeadline+2*time.Second {
		t.Fatalf("answered after %v: want about the channel's %v deadline", took, alipayDeadline)
	}
	db.remove("half-open")

	for range 2 {
		r, took = timed(func() response { return h.send("alipay", pay) })
		wantChannelReply(t, "alipay", r, payment.ReplySuccess)
		wantWithin(t, "a delivery after the network came back", took, time.Second)
	}
	h.wantPaidOnce(tn)
}

// A database that refuses writes: the gateway's connections are read-only sessions
// (tx_read_only=1, refused by MariaDB itself with 1792, for every user, without changing the
// shared test server's global read_only). Every notification is answered "retry", never
// success, and nothing is written; once a gateway with a writable database gets the
// redelivery, the payment is applied once.
func TestWireReadOnlyDatabaseNeverAnswersSuccess(t *testing.T) {
	dsn, _, _ := wireDSN(t)
	writable := newHarness(t, options{dsn: dsn})
	tn := writable.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}

	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_read_only"] = "1"
	ro := newHarness(t, options{dsn: cfg.FormatDSN()})
	ro.wantRetries(pay, "a refused write")
	if records, journal, _ := writable.rows(tn); records != 0 || journal != 0 {
		t.Fatalf("a read-only database holds %d records, %d journal rows", records, journal)
	}
	if o := writable.order(tn); o.Status != payment.OrderWaitPay {
		t.Fatalf("order is %s", o.Status)
	}
	wantChannelReply(t, "alipay", writable.send("alipay", pay), payment.ReplySuccess)
	writable.wantPaidOnce(tn)
}

// /readyz is red while the database refuses writes, and green again on a writable one.
func TestWireReadOnlyDatabaseIsNotReady(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"tx_read_only": "1"}
	for _, tc := range []struct {
		dsn  string
		code int
		want string
	}{
		{cfg.FormatDSN(), 503, `"mysql":"read_only"`},
		{dsn, 200, `"status":"ready"`},
	} {
		h := newHarness(t, options{dsn: tc.dsn})
		if r := h.do("GET", "/readyz", "", nil, ""); r.code != tc.code || !strings.Contains(r.body, tc.want) {
			t.Fatalf("readyz = %d %s, want %d with %s", r.code, r.body, tc.code, tc.want)
		}
	}
}

// A database that refuses writes for want of space. MariaDB itself raises 1114 ("The table is
// full", what InnoDB answers when a tablespace cannot grow) from a trigger on idempotent_record,
// so the error comes over the real protocol in the middle of the apply transaction. Every
// notification is answered "retry", nothing is written, and /readyz is red for storageFullHold
// (a ping or a read cannot see a full disk). Once there is space again the redelivery is applied
// once, and /readyz is green after the hold.
func TestWireDiskFullNeverAnswersSuccess(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}
	root, err := sql.Open("mysql", h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec(`CREATE TRIGGER disk_full BEFORE INSERT ON idempotent_record FOR EACH ROW
		SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1114, MESSAGE_TEXT = 'The table ''idempotent_record'' is full'`); err != nil {
		t.Fatal(err)
	}
	if r := h.do("GET", "/readyz", "", nil, ""); r.code != 200 {
		t.Fatalf("readyz before any write failed = %d %s", r.code, r.body)
	}
	h.wantRetries(pay, "a write refused for want of space")
	if records, journal, _ := h.rows(tn); records != 0 || journal != 0 {
		t.Fatalf("a full database holds %d records, %d journal rows", records, journal)
	}
	if o := h.order(tn); o.Status != payment.OrderWaitPay {
		t.Fatalf("order is %s after refused writes", o.Status)
	}
	if r := h.do("GET", "/readyz", "", nil, ""); r.code != 503 || !strings.Contains(r.body, `"mysql":"full"`) {
		t.Fatalf("readyz after a full-disk refusal = %d %s, want 503 with \"mysql\":\"full\"", r.code, r.body)
	}

	if _, err := root.Exec(`DROP TRIGGER disk_full`); err != nil {
		t.Fatal(err)
	}
	wantChannelReply(t, "alipay", h.send("alipay", pay), payment.ReplySuccess)
	h.wantPaidOnce(tn)
	h.later.Store(int64(storageFullHold))
	if r := h.do("GET", "/readyz", "", nil, ""); r.code != 200 {
		t.Fatalf("readyz %s after the last refusal = %d %s, want 200", storageFullHold, r.code, r.body)
	}
}

// The issue's own fence: SET GLOBAL read_only=1 on the server. It cannot be tried on the shared
// test server (every other test's /readyz would go red), so the test runs a MariaDB of its own.
// paygw connects as an ordinary user: MariaDB exempts users with READ_ONLY ADMIN (root) from
// read_only. Every notification is answered "retry" while the server is fenced, /readyz is red,
// and the redelivery after the fence is lifted is applied once.
func TestWireGlobalReadOnly(t *testing.T) {
	rootDSN := testenv.NewDatabaseOn(t, testenv.OwnMariaDB(t, 3409))
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	root, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	user, password := "paygw_app_"+testenv.Random(4), testenv.Secret(t, "app-"+testenv.Random(12))
	for _, q := range []string{
		"CREATE USER '" + user + "'@'127.0.0.1' IDENTIFIED BY '" + password + "'",
		"GRANT ALL ON " + cfg.DBName + ".* TO '" + user + "'@'127.0.0.1'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = root.Exec("SET GLOBAL read_only = 0") })
	cfg.User, cfg.Passwd = user, password
	h := newHarness(t, options{dsn: cfg.FormatDSN()})
	tn := h.seedOrder(1999)
	pay := simulate.Payment{TradeNo: tn, AmountFen: 1999}

	if _, err := root.Exec("SET GLOBAL read_only = 1"); err != nil {
		t.Fatal(err)
	}
	h.wantRetries(pay, "a write refused by read_only")
	if r := h.do("GET", "/readyz", "", nil, ""); r.code != 503 || !strings.Contains(r.body, `"mysql":"read_only"`) {
		t.Fatalf("readyz on a read_only server = %d %s, want 503 with \"mysql\":\"read_only\"", r.code, r.body)
	}
	if o := h.order(tn); o.Status != payment.OrderWaitPay {
		t.Fatalf("order is %s on a read_only server", o.Status)
	}

	if _, err := root.Exec("SET GLOBAL read_only = 0"); err != nil {
		t.Fatal(err)
	}
	if r := h.do("GET", "/readyz", "", nil, ""); r.code != 200 {
		t.Fatalf("readyz after the fence was lifted = %d %s", r.code, r.body)
	}
	wantChannelReply(t, "alipay", h.send("alipay", pay), payment.ReplySuccess)
	h.wantPaidOnce(tn)
}

// An ambiguous COMMIT on a group: several payments applied in one transaction, whose COMMIT's
// answer is cut. The one lane is held by a payment stuck on a row lock while four others queue
// behind it; when the lock goes, the stuck payment commits (the trap lets that COMMIT through)
// and the four go to MySQL as one group, whose COMMIT the trap cuts. The group did commit; its
// payments are then applied alone, find their committed records, and are answered success,
// never before. Each order is PAID once, with one record and one APPLIED journal row, and the
// redeliveries are repeats.
func TestWireAmbiguousCommitOnGroup(t *testing.T) {
	dsn, _, trap := wireDSN(t)
	h := newHarness(t, options{dsn: dsn, redisDown: true})
	h.applier.SetGroupLanes(1)
	stuck := h.seedOrder(100)
	nos := []string{h.seedOrder(1001), h.seedOrder(1002), h.seedOrder(1003), h.seedOrder(1004)}

	hold := holdRow(t, dsn, "SELECT trade_no FROM orders WHERE trade_no = ? FOR UPDATE", stuck)
	answers := make([]response, len(nos)+1)
	var wg sync.WaitGroup
	send := func(i int, tn string, fen int64) {
		defer wg.Done()
		answers[i] = h.send("alipay", simulate.Payment{TradeNo: tn, AmountFen: fen})
	}
	wg.Add(1)
	go send(len(nos), stuck, 100)
	testenv.EventuallyEvery(t, 3*time.Second, innodbTRXPause, func() error {
		if h.count("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'") == 0 {
			return errors.New("the stuck payment does not wait for its row lock")
		}
		return nil
	})
	for i, tn := range nos {
		wg.Add(1)
		go send(i, tn, int64(1001+i))
	}
	testenv.Eventually(t, 3*time.Second, func() error {
		if n := h.applier.Queued(); n != len(nos) {
			return fmt.Errorf("%d of %d payments queued", n, len(nos))
		}
		return nil
	})

	cutSecondCommit(t, trap, hold, &wg) // the stuck payment's COMMIT passes; the group's is cut
	for _, r := range answers {
		wantChannelReply(t, "alipay", r, payment.ReplySuccess)
	}
	paidOnce := func() {
		t.Helper()
		for _, tn := range append(nos, stuck) {
			if o := h.order(tn); o.Status != payment.OrderPaid {
				t.Fatalf("%s is %s", tn, o.Status)
			}
			if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND outcome = 'APPLIED'`, tn); n != 1 {
				t.Fatalf("%s: %d APPLIED journal rows, want 1", tn, n)
			}
		}
		if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != len(nos)+1 {
			t.Fatalf("pay_notify records = %d, want %d", n, len(nos)+1)
		}
	}
	paidOnce()
	for i, tn := range nos {
		wantChannelReply(t, "alipay", h.send("alipay", simulate.Payment{TradeNo: tn, AmountFen: int64(1001 + i)}), payment.ReplySuccess)
	}
	paidOnce()
}

// A group of creates whose COMMIT is sent and whose answer is lost (the connection reset after
// it): the group did commit. Its creates run alone, find their records final under their own
// lock tokens, and answer with what the group stored: every create 201 with its order, each
// key one order, no unit taken twice, and every repeat replays the same body.
func TestWireAmbiguousCommitOnCreateGroup(t *testing.T) {
	dsn, _, trap := wireDSN(t)
	h := newHarness(t, options{dsn: dsn})
	h.orders.SetGroupLanes(1)
	h.putStock("HOT", 10, 500)
	const body = `{"user_id":7,"sku":"HOT","num":1}`

	hold := holdRow(t, dsn, "SELECT num FROM stock WHERE sku = 'HOT' FOR UPDATE")
	keys := []string{"lead", "g-1", "g-2", "g-3", "g-4"}
	answers := make([]response, len(keys))
	var wg sync.WaitGroup
	send := func(i int) {
		defer wg.Done()
		answers[i] = h.create(testToken, keys[i], body)
	}
	wg.Add(1)
	go send(0)
	testenv.EventuallyEvery(t, 3*time.Second, innodbTRXPause, func() error {
		if h.count("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'") == 0 {
			return errors.New("the lead create does not wait for the SKU's row")
		}
		return nil
	})
	for i := 1; i < len(keys); i++ {
		wg.Add(1)
		go send(i)
	}
	testenv.Eventually(t, 3*time.Second, func() error {
		if n := h.orders.Queued(); n != len(keys)-1 {
			return fmt.Errorf("%d of %d creates queued", n, len(keys)-1)
		}
		return nil
	})

	cutSecondCommit(t, trap, hold, &wg) // the lead's COMMIT passes; the group's is cut
	for i, r := range answers {
		if r.code != 201 {
			t.Fatalf("create %s: %d %s", keys[i], r.code, r.body)
		}
	}
	if n := h.count("SELECT COUNT(*) FROM orders"); n != len(keys) {
		t.Fatalf("%d orders, want %d", n, len(keys))
	}
	if n := h.count("SELECT num FROM stock WHERE sku = 'HOT'"); n != 10-len(keys) {
		t.Fatalf("stock %d, want %d", n, 10-len(keys))
	}
	for i, k := range keys {
		if again := h.create(testToken, k, body); again.code != 201 || again.body != answers[i].body {
			t.Fatalf("repeat of %s: %d %s, want the first answer %s", k, again.code, again.body, answers[i].body)
		}
	}
}

// holdRow takes a row lock on a connection of its own, in a transaction the test rolls back to
// let the waiters through (or that ends with the test).
func holdRow(t *testing.T, dsn, query string, args ...any) *sql.Tx {
	t.Helper()
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	hold, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Rollback() })
	var v any
	if err := hold.QueryRow(query, args...).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return hold
}

// cutSecondCommit arms the trap for the second COMMIT from now (the first passes: the one that
// waited for hold's lock; the second is the group's queued behind it), releases hold, waits for
// every sender, and checks that exactly that COMMIT's answer was cut.
func cutSecondCommit(t *testing.T, trap *commitTrap, hold *sql.Tx, senders *sync.WaitGroup) {
	t.Helper()
	trap.skip.Store(1)
	trap.armed.Store(true)
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	senders.Wait()
	if trap.fired.Load() != 1 {
		t.Fatalf("COMMIT answers cut: %d, want the group's", trap.fired.Load())
	}
}

// innodbTRXPause spaces reads of INNODB_TRX: InnoDB refreshes it only when it was last read over
// 100 ms ago.
const innodbTRXPause = 120 * time.Millisecond

// wantRetries delivers pay three times and wants "retry" each time, within a second: what a
// database that refuses writes must answer.
func (h *harness) wantRetries(pay simulate.Payment, what string) {
	h.t.Helper()
	for range 3 {
		r, took := timed(func() response { return h.send("alipay", pay) })
		wantChannelReply(h.t, "alipay", r, payment.ReplyRetry)
		wantWithin(h.t, what, took, time.Second)
	}
}
