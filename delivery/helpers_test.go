package delivery_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// newClock is the injected clock: it moves only when the test advances it.
func newClock() *testenv.Clock { return testenv.NewClock(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)) }

var testKey = []byte("0123456789abcdef0123456789abcdef")

// sign is Standard Webhooks' v1 signature, written here apart from the webhook package.
func sign(id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, testKey)
	fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// env is a migrated database, its raw handle for inserting events, and the repository on it.
type env struct {
	dsn string
	raw *sql.DB
	db  *repository.DB
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	dsn := testenv.NewDatabase(tb)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = raw.Close() })
	return &env{dsn: dsn, raw: raw, db: testenv.Open(tb, dsn)}
}

// ev is an event row as the outbox and its sequencer leave it.
type ev struct {
	id      string
	seq     int64
	typ     string
	tradeNo string
}

func (e ev) body() string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"timestamp":"2026-03-01T08:00:00Z","data":{"trade_no":%q}}`, e.id, e.typ, e.tradeNo)
}

// insert stores events with their seq set, a thousand rows a statement.
func (e *env) insert(tb testing.TB, evs ...ev) {
	tb.Helper()
	for len(evs) > 0 {
		n := min(len(evs), 1000)
		var b strings.Builder
		b.WriteString("INSERT INTO event (event_id, seq, type, trade_no, body, created_time) VALUES ")
		args := make([]any, 0, 6*n)
		for i, x := range evs[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, x.id, x.seq, x.typ, x.tradeNo, []byte(x.body()), time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
		}
		if _, err := e.raw.Exec(b.String(), args...); err != nil {
			tb.Fatal(err)
		}
		evs = evs[n:]
	}
}

// orders makes n orders of per events each (order.paid, then order.refunded), interleaved so
// that each order's events are apart in seq, numbered from seq first.
func orders(n, per int, first int64) []ev {
	var out []ev
	seq := first
	for k := range per {
		typ := "order.paid"
		if k > 0 {
			typ = "order.refunded"
		}
		for i := range n {
			out = append(out, ev{id: fmt.Sprintf("evt_%d", seq), seq: seq, typ: typ, tradeNo: fmt.Sprintf("T%05d", i)})
			seq++
		}
	}
	return out
}

func (e *env) count(tb testing.TB, q string, args ...any) int {
	tb.Helper()
	var n int
	if err := e.raw.QueryRow(q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

// hit is one request a sink received.
type hit struct {
	id, ts, sig, ctype string
	body               string
	code               int
	at                 time.Time // real time, on arrival
}

// sink is a receiver: answer decides each reply (200 when nil).
type sink struct {
	srv *httptest.Server
	mu  sync.Mutex
	// answer decides the reply to a request (its event id and body); called under no lock.
	answer func(id, body string) int
	hits   []hit

	// gate, when set, holds the first holdN requests until it is closed or their client gives
	// up (counted in cut).
	gate      chan struct{}
	holdN     int32
	big       bool // answer 100 KiB, not "ok"
	held, cut atomic.Int32
	// ok holds the event ids answered with a 2xx (under mu).
	ok map[string]bool
}

// newGatedSink is a sink answering 200 that holds its first n requests (sink.gate).
func newGatedSink(tb testing.TB, n int32) *sink {
	s := newSink(tb, nil)
	s.gate, s.holdN = make(chan struct{}), n
	tb.Cleanup(func() { close(s.gate) }) // before the server closes: it waits for its handlers
	return s
}

func newSink(tb testing.TB, answer func(id, body string) int) *sink {
	s := &sink{answer: answer, ok: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := hit{id: r.Header.Get("webhook-id"), ts: r.Header.Get("webhook-timestamp"), sig: r.Header.Get("webhook-signature"),
			ctype: r.Header.Get("Content-Type"), body: string(body), code: 200, at: time.Now()}
		cut := false
		if s.gate != nil && s.held.Add(1) <= s.holdN {
			select {
			case <-s.gate:
			case <-r.Context().Done():
				cut = true
			}
		}
		s.mu.Lock()
		answer := s.answer
		s.mu.Unlock()
		if answer != nil {
			h.code = answer(h.id, h.body)
		}
		if cut {
			h.code = 0 // the client gave up: no answer reached it
		}
		s.mu.Lock()
		s.hits = append(s.hits, h)
		if h.code/100 == 2 {
			s.ok[h.id] = true
		}
		s.mu.Unlock()
		if cut {
			s.cut.Add(1)
		}
		if h.code/100 == 3 {
			w.Header().Set("Location", "/elsewhere") // a client that follows comes back here
		}
		w.WriteHeader(h.code)
		if s.big {
			_, _ = io.WriteString(w, strings.Repeat("x", 100<<10)) // read a few KB at most, and go on
		} else {
			_, _ = io.WriteString(w, "ok")
		}
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *sink) setAnswer(f func(id, body string) int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

// answered counts the distinct events the sink answered with a 2xx.
func (s *sink) answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ok)
}

func (s *sink) all() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

func (s *sink) endpoint(name string, events ...string) delivery.Endpoint {
	return delivery.Endpoint{Name: name, URL: s.srv.URL + "/hook?token=secret-in-url", Events: events, Sign: sign}
}

// serve starts a dispatcher; stop ends it and waits for it.
func serve(tb testing.TB, db *repository.DB, o delivery.Options) (d *delivery.Dispatcher, stop func()) {
	tb.Helper()
	if o.Poll == 0 {
		o.Poll = 5 * time.Millisecond
	}
	if o.Shards == 0 {
		o.Shards = 4
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.Holder == "" {
		o.Holder = "test-" + testenv.Random(3)
	}
	o.Log = testenv.Logger(tb)
	d, err := delivery.New(db, o)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Serve(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	tb.Cleanup(stop)
	return d, stop
}

// registered waits until every named endpoint has its row, so that events inserted afterwards
// are after its start.
func (e *env) registered(tb testing.TB, names ...string) {
	tb.Helper()
	testenv.Until(tb, 10*time.Second, "the endpoints' rows", func() bool {
		return e.count(tb, "SELECT COUNT(*) FROM webhook_endpoint") == len(names)
	})
}

// statusCount counts the deliveries to endpoint in status.
func (e *env) statusCount(tb testing.TB, endpoint, status string) int {
	return e.count(tb, "SELECT COUNT(*) FROM webhook_delivery WHERE endpoint = ? AND status = ?", endpoint, status)
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
