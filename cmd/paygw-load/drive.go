package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// message is one pre-signed notification, ready to send.
type message struct {
	body        []byte
	contentType string
}

// result is what one timed pass produced.
type result struct {
	Requests  int           `json:"requests"`
	Errors    int           `json:"errors"`
	Elapsed   time.Duration `json:"-"`
	RPS       float64       `json:"rps"`
	P50, P90  float64       // milliseconds
	P99       float64
	Questions int64 // MariaDB Questions delta, measurement's own statements removed; -1 if not measured

	// SQLMin is the least statements per request over the rounds: other clients of the shared
	// server only ever add to Questions, so the quietest round bounds ours best.
	SQLMin float64
	// Counters are the deltas of counterNames over the measurement (nil if not measured).
	Counters map[string]int64

	lat []time.Duration
}

// merge adds up the rounds of one scenario: requests, errors, time spent and statements are
// summed, percentiles taken over every request of every round.
func merge(rounds []result) result {
	var lat []time.Duration
	var elapsed time.Duration
	var errs int
	var q int64
	for _, r := range rounds {
		lat = append(lat, r.lat...)
		elapsed += r.Elapsed
		errs += r.Errors
		q += r.Questions
	}
	m := summarize(lat, errs, elapsed)
	m.Questions = q
	for _, r := range rounds {
		for k, v := range r.Counters {
			if m.Counters == nil {
				m.Counters = map[string]int64{}
			}
			m.Counters[k] += v
		}
	}
	m.SQLMin = -1
	for _, r := range rounds {
		if v := r.perRequest(); m.SQLMin < 0 || v < m.SQLMin {
			m.SQLMin = v
		}
	}
	return m
}

func (r result) perRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Questions) / float64(r.Requests)
}

// client drives one target with keep-alive connections.
type client struct {
	hc          *http.Client
	concurrency int
}

func newClient(concurrency int) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * concurrency,
		MaxIdleConnsPerHost: 4 * concurrency,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
	}
	return &client{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, concurrency: concurrency}
}

// send posts one message and reports whether the answer was 200 `success`.
func (c *client) send(ctx context.Context, url string, m message) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(m.body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", m.contentType)
	resp, err := c.hc.Do(req)
	if err != nil {
		return false
	}
	var buf [64]byte
	n, _ := io.ReadFull(resp.Body, buf[:])
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // drained; only status and body matter
	return resp.StatusCode == http.StatusOK && string(buf[:n]) == "success"
}

// run sends msgs (each once, in order of the list) with c.concurrency requests in flight.
func (c *client) run(ctx context.Context, url string, msgs []message) result {
	return timed(ctx, len(msgs), c.concurrency, func(i int) bool { return c.send(ctx, url, msgs[i]) })
}

// timed runs fn(0..n-1) with concurrency calls in flight (closed loop), times each, and counts
// those that report failure; only ctx ends it early.
func timed(ctx context.Context, n, concurrency int, fn func(i int) bool) result {
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	start := time.Now()
	_ = parallel(n, concurrency, func(i int) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t := time.Now()
		if !fn(i) {
			errs.Add(1)
		}
		lat[i] = time.Since(t)
		return nil
	})
	return summarize(lat, int(errs.Load()), time.Since(start))
}

// runRate sends msgs at a steady rate (open loop: a slow answer does not delay the next send),
// as channels deliver, and measures each answer's latency.
func (c *client) runRate(ctx context.Context, url string, msgs []message, rate float64) result {
	return paced(ctx, len(msgs), rate, func(i int) bool { return c.send(ctx, url, msgs[i]) })
}

// paced starts fn(0..n-1) at rate calls a second whatever the answers (open loop), times each,
// and counts those that report failure; only ctx ends it early.
func paced(ctx context.Context, n int, rate float64, fn func(i int) bool) result {
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			if !fn(i) {
				errs.Add(1)
			}
			lat[i] = time.Since(t)
		}()
	}
	wg.Wait()
	return summarize(lat, int(errs.Load()), time.Since(start))
}

// runTwins sends every message `copies` times at once (concurrent twins), with
// c.concurrency/copies messages in flight, so c.concurrency requests are in flight in all.
func (c *client) runTwins(ctx context.Context, url string, msgs []message, copies int) result {
	lat := make([]time.Duration, len(msgs)*copies)
	var errs atomic.Int64
	start := time.Now()
	_ = parallel(len(msgs), max(1, c.concurrency/copies), func(i int) error { // only ctx ends it early
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = parallel(copies, copies, func(k int) error {
			t := time.Now()
			if !c.send(ctx, url, msgs[i]) {
				errs.Add(1)
			}
			lat[i*copies+k] = time.Since(t)
			return nil
		})
		return nil
	})
	return summarize(lat, int(errs.Load()), time.Since(start))
}

// parallel runs fn(i) for i in [0,n) with `workers` goroutines and reports the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func summarize(lat []time.Duration, errs int, elapsed time.Duration) result {
	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	pct := func(p float64) float64 {
		if len(sorted) == 0 {
			return 0
		}
		i := int(p * float64(len(sorted)-1))
		return float64(sorted[i]) / float64(time.Millisecond)
	}
	return result{
		Requests: len(lat), Errors: errs, Elapsed: elapsed,
		RPS: float64(len(lat)) / elapsed.Seconds(),
		P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Questions: -1, lat: lat,
	}
}
