package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/webhook"
)

// SinkAddr is where `paygw simulate webhook-sink` listens by default.
const SinkAddr = "127.0.0.1:8099"

// maxSinkBody bounds a delivery's body; paygw's events are a few hundred bytes.
const maxSinkBody = 1 << 20

// SinkOptions configure a Sink.
type SinkOptions struct {
	Secrets  []string      // whsec_ secrets; several while the sender rotates
	FailRate float64       // the fraction of verified deliveries answered 500 (and not counted as seen)
	Slow     time.Duration // how long each delivery waits before its answer
	Log      io.Writer     // one line per delivery; nil for none
	// Record, when not nil, gets one JSON line (SinkRecord) per delivery answered 2xx, written
	// before the answer: OpenSinkRecord's file keeps what was acknowledged across a SIGKILL. A
	// delivery whose line cannot be written is answered 500 instead.
	Record io.Writer

	Now  func() time.Time // the clock Verify checks timestamps against; nil for time.Now
	Rand func() float64   // the draw FailRate compares with; nil for math/rand/v2
}

// Sink is a merchant's webhook receiver for tests and demos: it verifies each delivery with
// webhook/, fails and delays on request, and counts what it accepted. It counts what it saw (each
// delivery it answered 2xx), not what a unique key would let through: the chaos and delivery
// tests read /stats to prove at-least-once delivery, no double order.paid and order per order.
type Sink struct {
	v   *webhook.Verifier
	opt SinkOptions

	mu     sync.Mutex
	counts SinkStats
	seen   map[string]bool            // accepted event ids
	orders map[string]*sinkOrder      // by trade_no
	paid   map[string]map[string]bool // trade_no -> distinct order.paid event ids
}

// sinkOrder is what the sink accepted for one order, first acceptance of each event, in order.
type sinkOrder struct {
	events []SinkEvent
	latest time.Time // the latest event timestamp accepted
}

// SinkEvent is one accepted event, as /stats?orders=1 lists it.
type SinkEvent struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
}

// SinkStats is GET /stats: what the sink answered and what it accepted.
type SinkStats struct {
	Requests  int `json:"requests"`  // every delivery (POST)
	Refused   int `json:"refused"`   // failed verification: answered 401
	Malformed int `json:"malformed"` // verified, but not an event with the header's id: 400
	Failed    int `json:"failed"`    // verified, answered 500 on purpose (FailRate)
	Abandoned int `json:"abandoned"` // the sender hung up while the sink was slow
	Accepted  int `json:"accepted"`  // answered 204

	Distinct        int            `json:"distinct"`          // distinct event ids accepted
	Duplicates      int            `json:"duplicates"`        // acceptances of an id accepted before
	ByType          map[string]int `json:"by_type"`           // distinct ids accepted, per type
	Orders          int            `json:"orders"`            // distinct trade_nos among them
	OrdersPaidTwice int            `json:"orders_paid_twice"` // orders with more than one distinct order.paid id
	// OutOfOrder counts first acceptances of an event whose timestamp is before one already
	// accepted for the same order: an order.refunded that arrived before its order.paid.
	OutOfOrder int `json:"out_of_order"`

	PerOrder map[string][]SinkEvent `json:"per_order,omitempty"` // with ?orders=1
}

// sinkEvent is the part of a delivery's body the sink reads.
type sinkEvent struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		TradeNo string `json:"trade_no"`
	} `json:"data"`
}

// NewSink checks the options; a malformed secret is webhook.ErrBadSecret.
func NewSink(opt SinkOptions) (*Sink, error) {
	v, err := webhook.NewVerifier(opt.Secrets...)
	if err != nil {
		return nil, err
	}
	if opt.FailRate < 0 || opt.FailRate > 1 || opt.Slow < 0 {
		return nil, fmt.Errorf("sink: the fail rate must be within [0, 1] and the delay not negative")
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Rand == nil {
		opt.Rand = rand.Float64
	}
	return &Sink{v: v, opt: opt, seen: map[string]bool{}, orders: map[string]*sinkOrder{},
		paid: map[string]map[string]bool{}, counts: SinkStats{ByType: map[string]int{}}}, nil
}

// Handler serves deliveries (POST to any path) and GET /stats.
func (s *Sink) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats(r.URL.Query().Get("orders") == "1"))
	})
	mux.HandleFunc("POST /", s.receive)
	return mux
}

// receive answers one delivery: 401 unverified, 400 malformed, 500 on purpose, else 204.
func (s *Sink) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSinkBody))
	status, e := s.check(body, err, r.Header)
	if status == 0 && s.opt.Slow > 0 {
		select {
		case <-time.After(s.opt.Slow):
		case <-r.Context().Done():
			s.count(http.StatusRequestTimeout, e)
			return
		}
	}
	if status == 0 {
		status = http.StatusNoContent
		if s.opt.FailRate > 0 && s.opt.Rand() < s.opt.FailRate {
			status = http.StatusInternalServerError
		}
	}
	status = s.count(status, e)
	if s.opt.Log != nil {
		fmt.Fprintf(s.opt.Log, "%d %s %s %s\n", status, r.Header.Get(webhook.HeaderID), e.Type, e.Data.TradeNo)
	}
	w.WriteHeader(status)
}

// check verifies and parses a delivery: status 0 when it is a verified event.
func (s *Sink) check(body []byte, readErr error, h http.Header) (int, sinkEvent) {
	var e sinkEvent
	if readErr != nil {
		return http.StatusBadRequest, e
	}
	if err := s.v.Verify(body, h, s.opt.Now()); err != nil {
		return http.StatusUnauthorized, e
	}
	if json.Unmarshal(body, &e) != nil || e.ID != h.Get(webhook.HeaderID) || e.Type == "" {
		return http.StatusBadRequest, e
	}
	return 0, e
}

// count records one answered delivery and returns the status to answer: a 204 whose record line
// cannot be written becomes a 500, so that the sender tries again.
func (s *Sink) count(status int, e sinkEvent) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == http.StatusNoContent && s.opt.Record != nil {
		rec := SinkRecord{WebhookID: e.ID, Type: e.Type, TradeNo: e.Data.TradeNo, Timestamp: e.Timestamp, At: s.opt.Now()}
		if appendRecord(s.opt.Record, rec) != nil {
			status = http.StatusInternalServerError
		}
	}
	c := &s.counts
	c.Requests++
	switch status {
	case http.StatusUnauthorized:
		c.Refused++
	case http.StatusBadRequest:
		c.Malformed++
	case http.StatusInternalServerError:
		c.Failed++
	case http.StatusRequestTimeout:
		c.Abandoned++
	case http.StatusNoContent:
		c.Accepted++
		s.accept(e)
	}
	return status
}

// accept counts an event answered 2xx; s.mu is held.
func (s *Sink) accept(e sinkEvent) {
	c := &s.counts
	if s.seen[e.ID] {
		c.Duplicates++
		return
	}
	s.seen[e.ID] = true
	c.Distinct++
	c.ByType[e.Type]++
	if e.Data.TradeNo == "" {
		return
	}
	o := s.orders[e.Data.TradeNo]
	if o == nil {
		o = &sinkOrder{}
		s.orders[e.Data.TradeNo] = o
		c.Orders++
	}
	if e.Timestamp.Before(o.latest) {
		c.OutOfOrder++
	} else {
		o.latest = e.Timestamp
	}
	o.events = append(o.events, SinkEvent{ID: e.ID, Type: e.Type, Timestamp: e.Timestamp})
	if e.Type == payment.EventOrderPaid {
		ids := s.paid[e.Data.TradeNo]
		if ids == nil {
			ids = map[string]bool{}
			s.paid[e.Data.TradeNo] = ids
		}
		if ids[e.ID] = true; len(ids) == 2 {
			c.OrdersPaidTwice++
		}
	}
}

// Stats is a copy of the counts; perOrder adds each order's accepted events.
func (s *Sink) Stats(perOrder bool) SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.counts
	st.ByType = maps.Clone(s.counts.ByType)
	if perOrder {
		st.PerOrder = make(map[string][]SinkEvent, len(s.orders))
		for k, o := range s.orders {
			st.PerOrder[k] = append([]SinkEvent(nil), o.events...)
		}
	}
	return st
}

// FetchSinkStats reads GET /stats of the sink at baseURL (http://host:port).
func FetchSinkStats(ctx context.Context, client *http.Client, baseURL string, perOrder bool) (SinkStats, error) {
	u := baseURL + "/stats"
	if perOrder {
		u += "?orders=1"
	}
	var st SinkStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	res, err := client.Do(req)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return st, fmt.Errorf("sink stats: %s", res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}
