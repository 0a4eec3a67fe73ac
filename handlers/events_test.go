package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/outbox"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// feedPage is a GET /v1/events answer with each event's bytes as served.
type feedPage struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"next_cursor"`
}

func (h *harness) feed(query string) feedPage {
	h.t.Helper()
	r := h.do("GET", "/v1/events?"+query, testToken, nil, "")
	if r.code != 200 {
		h.t.Fatalf("GET /v1/events?%s: %d %s", query, r.code, r.body)
	}
	var p feedPage
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		h.t.Fatalf("feed %s: %v", r.body, err)
	}
	return p
}

// sequence numbers every committed event, as the sequencer's holder does.
func (h *harness) sequence() {
	h.t.Helper()
	if _, err := outbox.New(h.db, testenv.Logger(h.t)).Pass(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func eventOf(t *testing.T, raw json.RawMessage) (typ, tradeNo string) {
	t.Helper()
	var e struct {
		Type string `json:"type"`
		Data struct {
			TradeNo string `json:"trade_no"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e.Type, e.Data.TradeNo
}

// The feed serves each event's stored bytes, in commit order, and pages by next_cursor; a page
// with nothing new keeps the cursor.
func TestFeedServesStoredEventsInOrder(t *testing.T) {
	h := newHarness(t, options{})
	var paid []string
	for range 3 {
		tn := h.seedOrder(500)
		if r := h.notifyAlipay(alipayPayment(tn, 500)); r.body != "success" {
			t.Fatalf("notify: %d %s", r.code, r.body)
		}
		paid = append(paid, tn)
	}
	closed := h.seedOrder(700)
	if r := h.notifyAlipay(closedPayment(closed, 700)); r.body != "success" {
		t.Fatalf("close: %d %s", r.code, r.body)
	}
	if p := h.feed(""); len(p.Events) != 0 || p.NextCursor == "" {
		t.Fatalf("feed before the sequencer ran: %+v, want no event and a cursor", p)
	}
	h.sequence()
	stored, err := h.db.EventsOf(context.Background(), paid[0])
	if err != nil || len(stored) != 1 {
		t.Fatalf("EventsOf: %v %v", stored, err)
	}
	p := h.feed("limit=2")
	if len(p.Events) != 2 || string(p.Events[0]) != string(stored[0].Body) {
		t.Fatalf("first page: %d events, first %s; want 2, first the stored %s", len(p.Events), p.Events[0], stored[0].Body)
	}
	p2 := h.feed("limit=2&after=" + p.NextCursor)
	all := append(p.Events, p2.Events...)
	var got []string
	for _, e := range all {
		typ, tn := eventOf(t, e)
		got = append(got, typ+" "+tn)
	}
	want := []string{"order.paid " + paid[0], "order.paid " + paid[1], "order.paid " + paid[2], "order.closed " + closed}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("feed\n%v\nwant\n%v", got, want)
	}
	if p3 := h.feed("after=" + p2.NextCursor); len(p3.Events) != 0 || p3.NextCursor != p2.NextCursor {
		t.Fatalf("past the end: %+v, want no event and the same cursor %s", p3, p2.NextCursor)
	}
	if p := h.feed("type=order.closed"); len(p.Events) != 1 {
		t.Fatalf("type=order.closed: %d events, want 1", len(p.Events))
	}
	// A filter that matches nothing still moves the cursor past what it read.
	if p := h.feed("type=payment.anomaly,order.refunded"); len(p.Events) != 0 || p.NextCursor != p2.NextCursor {
		t.Fatalf("type=payment.anomaly,order.refunded: %d events, cursor %s; want none, cursor %s", len(p.Events), p.NextCursor, p2.NextCursor)
	}
}

// A type filter behind a long stretch of other events reads it in bounded windows: up to
// feedMaxWindows of them in one request, then an empty page whose cursor says how far they went.
func TestFeedFilterReadsInWindows(t *testing.T) {
	h := newHarness(t, options{})
	paid, near, far := h.seedOrder(500), h.seedOrder(600), h.seedOrder(700)
	if r := h.notifyAlipay(alipayPayment(paid, 500)); r.body != "success" {
		t.Fatalf("notify: %d %s", r.code, r.body)
	}
	for tn, fen := range map[string]int64{near: 600, far: 700} {
		if r := h.notifyAlipay(closedPayment(tn, fen)); r.body != "success" {
			t.Fatalf("close: %d %s", r.code, r.body)
		}
	}
	h.sequence()
	// Spread the numbers: the closes lie two and twelve windows past the payment.
	nearSeq := int64(2*repository.FeedScanWindow + 7)
	farSeq := nearSeq + feedMaxWindows*repository.FeedScanWindow + 5
	testenv.Exec(t, h.dsn, `UPDATE event SET seq = CASE trade_no WHEN ? THEN ? WHEN ? THEN ? END WHERE trade_no IN (?, ?)`,
		near, nearSeq, far, farSeq, near, far)
	tradeOf := func(p feedPage) string {
		if len(p.Events) != 1 {
			return fmt.Sprintf("%d events", len(p.Events))
		}
		_, tn := eventOf(t, p.Events[0])
		return tn
	}
	p := h.feed("type=order.closed&limit=1")
	if tradeOf(p) != near || p.NextCursor != encodeCursor(nearSeq) {
		t.Fatalf("first filtered page: %s, cursor %s; want %s at %d", tradeOf(p), p.NextCursor, near, nearSeq)
	}
	p = h.feed("type=order.closed&after=" + p.NextCursor)
	if want := encodeCursor(nearSeq + feedMaxWindows*repository.FeedScanWindow); len(p.Events) != 0 || p.NextCursor != want {
		t.Fatalf("second page: %d events, cursor %s; want none and the cursor %d windows on (%s)", len(p.Events), p.NextCursor, feedMaxWindows, want)
	}
	p = h.feed("type=order.closed&after=" + p.NextCursor)
	if tradeOf(p) != far || p.NextCursor != encodeCursor(farSeq) {
		t.Fatalf("third page: %s, cursor %s; want %s at %d", tradeOf(p), p.NextCursor, far, farSeq)
	}
}

// An event whose transaction commits after a later one's is served on the next page, never
// skipped: the reader's cursor passed the later one's seq, and the early one is numbered after it.
func TestFeedServesALateCommitOnTheNextPage(t *testing.T) {
	h := newHarness(t, options{})
	early, late := h.seedOrder(100), h.seedOrder(100)
	inserted, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- h.db.InTx(context.Background(), func(tx *repository.Tx) error {
			now := time.Now().UTC()
			if ok, err := tx.MarkPaid(context.Background(), early, "alipay", "E", 100, "CNY", now, now); err != nil || !ok {
				return fmt.Errorf("MarkPaid: %v %v", ok, err)
			}
			close(inserted)
			<-release
			return nil
		})
	}()
	<-inserted
	if r := h.notifyAlipay(alipayPayment(late, 100)); r.body != "success" {
		t.Fatalf("notify: %d %s", r.code, r.body)
	}
	h.sequence()
	p := h.feed("")
	if len(p.Events) != 1 {
		t.Fatalf("first read: %d events, want the late order's one", len(p.Events))
	}
	if _, tn := eventOf(t, p.Events[0]); tn != late {
		t.Fatalf("first read served %s, want %s", tn, late)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.sequence()
	p = h.feed("after=" + p.NextCursor)
	if len(p.Events) != 1 {
		t.Fatalf("second read: %d events, want the early order's one", len(p.Events))
	}
	if _, tn := eventOf(t, p.Events[0]); tn != early {
		t.Fatalf("second read served %s, want %s", tn, early)
	}
}

// wait holds an empty page until an event arrives: woken by this process's sequencer, or by
// reading again when another replica numbers the events; with none it answers once wait is over.
func TestFeedLongPolls(t *testing.T) {
	for name, inProcess := range map[string]bool{"woken by the sequencer": true, "polling": false} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, options{})
			seq := outbox.New(h.db, testenv.Logger(t))
			if inProcess {
				h.srv.cfg.EventsChanged = seq.Changed
			}
			start := time.Now()
			if p := h.feed("wait=300ms"); len(p.Events) != 0 || time.Since(start) < 300*time.Millisecond {
				t.Fatalf("empty feed: %d events after %s, want none after 300ms", len(p.Events), time.Since(start))
			}
			got := make(chan feedPage, 1)
			start = time.Now()
			go func() { got <- h.feed("wait=20s") }()
			time.Sleep(200 * time.Millisecond)
			tn := h.seedOrder(100)
			if r := h.notifyAlipay(alipayPayment(tn, 100)); r.body != "success" {
				t.Errorf("notify: %d %s", r.code, r.body)
			}
			if _, err := seq.Pass(context.Background()); err != nil {
				t.Error(err)
			}
			p := <-got
			if len(p.Events) != 1 || time.Since(start) > 5*time.Second {
				t.Fatalf("long poll: %d events after %s, want 1 at once", len(p.Events), time.Since(start))
			}
		})
	}
}

// Every bad parameter is a 400 invalid-request problem, and nothing else.
func TestFeedRefusesBadParameters(t *testing.T) {
	h := newHarness(t, options{})
	for name, q := range map[string]string{
		"limit zero":         "limit=0",
		"limit too large":    "limit=1001",
		"limit not a number": "limit=ten",
		"wait too long":      "wait=31s",
		"wait negative":      "wait=-1s",
		"wait not duration":  "wait=5",
		"unknown type":       "type=order.created",
		"empty type in list": "type=order.paid,",
		"cursor not base64":  "after=***",
		"cursor forged":      "after=" + url.QueryEscape("MTIz"), // base64 of "123", not a cursor
		"cursor negative":    "after=ZTE6LTE",                    // "e1:-1"
		"cursor leading 0":   "after=ZTE6MDE",                    // "e1:01"
		"unknown parameter":  "cursor=",
		"limit twice":        "limit=1&limit=2",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", h.url+"/v1/events?"+q, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			if r := roundTrip(t, h.rawClient, req); r.code != 400 || problemType(t, r) != typeInvalid {
				t.Fatalf("%s: %d %s, want 400 invalid-request", q, r.code, r.body)
			}
		})
	}
	if r := h.do("GET", "/v1/events", "", nil, ""); r.code != 401 {
		t.Fatalf("no token: %d, want 401", r.code)
	}
	if c := encodeCursor(42); !strings.HasPrefix(h.feed("after="+c).NextCursor, c) {
		t.Fatalf("a cursor past the end is kept")
	}
}

// FuzzFeedQuery: any query string is refused or parsed within the bounds, and a parsed cursor
// is the one encodeCursor gives for its seq.
func FuzzFeedQuery(f *testing.F) {
	seeds := []string{"", "after=ZTE6NDI&type=order.paid&limit=10&wait=5s", "wait=30s", "wait=30.1s",
		"type=order.paid,order.paid", "limit=1000", "after=ZTE6OTIyMzM3MjAzNjg1NDc3NTgwNw", "after=ZTE6OTIyMzM3MjAzNjg1NDc3NTgwOA",
		"after=%zz", "a=1&a=2"}
	fuzzQuery(f, seeds, parseFeedQuery, func(t *testing.T, raw string, v url.Values, q feedQuery) {
		if q.limit < 1 || q.limit > feedMaxLimit || q.wait < 0 || q.wait > feedMaxWait || q.after < 0 {
			t.Fatalf("%q parsed out of bounds: %+v", raw, q)
		}
		for _, typ := range q.types {
			if !containsType(typ) {
				t.Fatalf("%q: unknown type %q accepted", raw, typ)
			}
		}
		if a := v.Get("after"); a != "" && encodeCursor(q.after) != a {
			t.Fatalf("%q: cursor %q parsed as %d, which encodes as %q", raw, a, q.after, encodeCursor(q.after))
		}
	})
}

func closedPayment(tradeNo string, fen int64) simulate.AlipayPayment {
	p := alipayPayment(tradeNo, fen)
	p.TradeStatus = "TRADE_CLOSED"
	return p
}

func containsType(typ string) bool {
	for _, t := range payment.EventTypes {
		if t == typ {
			return true
		}
	}
	return false
}

// A long poll outlasts the server's write timeout (DefaultTimeouts' 30 s equals the longest
// wait): the handler moves its own write deadline past the wait.
func TestFeedLongPollOutlastsTheWriteTimeout(t *testing.T) {
	h := newHarness(t, options{})
	ts := httptest.NewUnstartedServer(h.handler)
	ts.Config.WriteTimeout = 500 * time.Millisecond
	ts.Start()
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/events?wait=1500ms", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	start := time.Now()
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("the long poll was cut off after %s: %v", time.Since(start), err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 || !strings.Contains(string(b), `"next_cursor"`) || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("after %s: %d %s (%v)", time.Since(start), res.StatusCode, b, err)
	}
}
