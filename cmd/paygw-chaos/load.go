package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paygw/paygw/simulate"
)

// order is one seeded WAIT_PAY order and the channel that will pay it. Refund k > 0 makes it
// the order's k-th refund instead of its payment (refundPart each).
type order struct {
	TradeNo   string
	AmountFen int64
	Channel   string
	Refund    int
}

// stats are one phase's figures as the senders saw them.
type stats struct {
	requests, success, refusals, retryReplies, errs atomic.Int64
	redeliveries                                    atomic.Int64 // deliveries after the first, per sender
	senders, sendersOK, gaveUp                      atomic.Int64
	lastSuccess                                     atomic.Int64 // unix nanos

	mu       sync.Mutex
	latency  []time.Duration
	errKinds map[string]int
}

func newStats() *stats { return &stats{errKinds: map[string]int{}} }

func (s *stats) add(d delivery) {
	s.requests.Add(1)
	switch d.kind() {
	case "success":
		s.success.Add(1)
		s.lastSuccess.Store(d.end.UnixNano())
	case "refusal":
		s.refusals.Add(1)
	case "retry":
		s.retryReplies.Add(1)
	default:
		s.errs.Add(1)
	}
	s.mu.Lock()
	s.latency = append(s.latency, d.end.Sub(d.start))
	if d.err != nil {
		s.errKinds[errKind(d.err)]++
	} else if d.status >= 300 {
		s.errKinds[fmt.Sprintf("http %d", d.status)]++
	}
	s.mu.Unlock()
}

func (s *stats) percentile(q float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.latency) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.latency...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

func (s *stats) kinds() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.errKinds))
	for k := range s.errKinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, s.errKinds[k])
	}
	return strings.Join(parts, ", ")
}

// errKind names a transport error the way an operator would.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "conn refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "conn reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other: " + err.Error()
}

// delivery is one HTTP request of a sender.
type delivery struct {
	replica    int
	start, end time.Time
	wrote      time.Time // request fully written (zero if it never was)
	status     int
	err        error
}

func (d delivery) kind() string { return simulate.ReplyKind(d.status, d.err) }

// cutWatch records the deliveries to one replica around its SIGTERM.
type cutWatch struct {
	replica int
	mu      sync.Mutex
	sent    time.Time // when SIGTERM was sent; zero before
	log     []delivery
}

func (w *cutWatch) observe(d delivery) {
	if w == nil || d.replica != w.replica {
		return
	}
	w.mu.Lock()
	w.log = append(w.log, d)
	w.mu.Unlock()
}

// sender plays the channels: signs, sends (with duplicates to several replicas) and redelivers
// on the channel's compressed schedule until success.
type sender struct {
	client  *http.Client
	signers map[string]simulate.Signer
	urls    []string
	speedup map[string]float64 // per channel
	sem     chan struct{}      // bounds requests in flight
	watch   atomic.Pointer[cutWatch]
}

// send posts one notification once a slot of sem is free (see post).
func (s *sender) send(ctx context.Context, st *stats, replica int, channel string, body io.Reader, size int, header http.Header) delivery {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return delivery{replica: replica, start: time.Now(), end: time.Now(), err: ctx.Err()}
	}
	defer func() { <-s.sem }()
	return s.post(ctx, st, replica, channel, body, size, header)
}

// post posts one notification at once, bypassing sem: the sigterm phase's slow bodies must be in
// flight at the signal, not queued behind thousands of the load's senders on a slow machine.
func (s *sender) post(ctx context.Context, st *stats, replica int, channel string, body io.Reader, size int, header http.Header) delivery {
	d := delivery{replica: replica}
	d.start = time.Now()
	var wrote atomic.Int64
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(time.Now().UnixNano()) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost,
		simulate.NotifyURL(s.urls[replica], channel), body)
	if err != nil {
		d.end, d.err = time.Now(), err
		return d
	}
	req.ContentLength = int64(size)
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := s.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
		_ = res.Body.Close() // the body is drained; a read error is already in err
		d.status = res.StatusCode
	}
	d.end, d.err = time.Now(), err
	if n := wrote.Load(); n != 0 {
		d.wrote = time.Unix(0, n)
	}
	if st != nil {
		st.add(d)
	}
	s.watch.Load().observe(d)
	return d
}

// chain is one sender of one notification: first is the first delivery's signed message
// (shared by concurrent duplicates); every redelivery is signed afresh, and goes to the next
// replica, as a channel behind a load balancer would fail over.
func (s *sender) chain(ctx context.Context, st *stats, o order, first simulate.Message, replica int) bool {
	st.senders.Add(1)
	schedule := simulate.Schedules[o.Channel]
	speedup := s.speedup[o.Channel]
	m := first
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			st.redeliveries.Add(1)
			var err error
			if m, err = s.signers[o.Channel].Sign(payment(o)); err != nil {
				st.gaveUp.Add(1)
				return false
			}
		}
		r := (replica + attempt) % len(s.urls)
		d := s.send(ctx, st, r, o.Channel, bytes.NewReader(m.Body), len(m.Body), m.Header)
		if d.kind() == "success" {
			st.sendersOK.Add(1)
			return true
		}
		if attempt == len(schedule) || ctx.Err() != nil {
			st.gaveUp.Add(1)
			return false
		}
		select {
		case <-ctx.Done():
			st.gaveUp.Add(1)
			return false
		case <-time.After(time.Duration(float64(schedule[attempt]) / speedup)):
		}
	}
}

func payment(o order) simulate.Payment {
	p := simulate.Payment{TradeNo: o.TradeNo, AmountFen: o.AmountFen, Status: simulate.StatusPaid, Time: time.Now()}
	if o.Refund > 0 {
		part := refundPart(o.AmountFen)
		p.Status, p.RefundFen, p.RefundTotalFen = simulate.StatusRefund, part, int64(o.Refund)*part
		p.RefundID = fmt.Sprintf("RF%s-%d", o.TradeNo, o.Refund)
	}
	return p
}

// refundPart is each partial refund of an order: a quarter of its amount (seed's amounts are at
// least 100 fen), so that two leave it PAID.
func refundPart(amountFen int64) int64 { return amountFen / 4 }

// load sends every order's notification as dups concurrent senders, releasing orders at rate
// per second (0: as fast as maxActive allows), and returns when every sender has finished.
func (s *sender) load(ctx context.Context, st *stats, orders []order, dups int, rate float64, maxActive int) {
	active := make(chan struct{}, maxActive)
	var wg sync.WaitGroup
	start := time.Now()
	for i, o := range orders {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
		}
		select {
		case active <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			st.gaveUp.Add(int64(dups * (len(orders) - i)))
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-active }()
			first, err := s.signers[o.Channel].Sign(payment(o))
			if err != nil {
				st.gaveUp.Add(int64(dups))
				return
			}
			var twins sync.WaitGroup
			for j := range dups {
				twins.Add(1)
				go func() {
					defer twins.Done()
					s.chain(ctx, st, o, first, (i+j)%len(s.urls))
				}()
			}
			twins.Wait()
		}()
	}
	wg.Wait()
}

// slowBody trickles its bytes, a chunk every pause, so that the request is in flight for that
// long. begun, if not nil, is closed at the first Read: the client has connected and written
// the request's headers.
type slowBody struct {
	b     []byte
	chunk int
	pause time.Duration
	begun chan struct{}
	once  sync.Once
}

func (r *slowBody) Read(p []byte) (int, error) {
	if r.begun != nil {
		r.once.Do(func() { close(r.begun) })
	}
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.pause)
	n := copy(p[:min(len(p), r.chunk)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// readiness polls /readyz of every replica and keeps the transitions.
type readiness struct {
	mu     sync.Mutex
	events []readyEvent
	last   map[int]string
}

type readyEvent struct {
	at      time.Time
	replica int
	state   string // "ready", "degraded" (Redis down), "unavailable" (503), "unreachable"
}

func pollReady(ctx context.Context, urls []string, every time.Duration) *readiness {
	rd := &readiness{last: map[int]string{}}
	client := &http.Client{Timeout: 1500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	for i, u := range urls {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				state := "unreachable"
				if res, err := client.Get(u + "/readyz"); err == nil {
					b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
					_ = res.Body.Close() // a probe: only status and body matter
					switch {
					case res.StatusCode == http.StatusServiceUnavailable:
						state = "unavailable"
					case bytes.Contains(b, []byte(`"redis":"down"`)):
						state = "degraded"
					case res.StatusCode == http.StatusOK:
						state = "ready"
					default:
						state = fmt.Sprintf("http %d", res.StatusCode)
					}
				}
				rd.mu.Lock()
				if rd.last[i] != state {
					rd.last[i] = state
					rd.events = append(rd.events, readyEvent{at: time.Now(), replica: i, state: state})
				}
				rd.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return rd
}

// span returns, from t on, the first time any replica was in state bad, and the first time
// after that when every replica was back in state good (zero if never).
func (rd *readiness) span(t time.Time, n int, bad, good string) (red, green time.Time) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	state := map[int]string{}
	for _, e := range rd.events {
		state[e.replica] = e.state
		if e.at.Before(t) {
			continue
		}
		if red.IsZero() {
			if e.state == bad {
				red = e.at
			}
			continue
		}
		all := len(state) == n
		for _, s := range state {
			all = all && s == good
		}
		if all {
			return red, e.at
		}
	}
	return red, time.Time{}
}

func scheduleOf(channel string) []time.Duration { return simulate.Schedules[channel] }
