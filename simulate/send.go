package simulate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Reply is what the gateway answered one delivery, sorted into the three kinds a channel knows.
type Reply struct {
	Attempt int
	Status  int    // 0 when the request failed outright
	Body    string // at most the first 200 bytes
	Err     error
	Latency time.Duration
}

// Kind is success (2xx), refusal (4xx), retry (5xx) or error (no answer).
func (r Reply) Kind() string { return ReplyKind(r.Status, r.Err) }

// ReplyKind sorts an answer the way a channel does: success (2xx), refusal (4xx), retry (any
// other status) or error (err set: no answer at all).
func ReplyKind(status int, err error) string {
	switch {
	case err != nil:
		return "error"
	case status >= 200 && status < 300:
		return "success"
	case status >= 400 && status < 500:
		return "refusal"
	default:
		return "retry"
	}
}

func (r Reply) String() string {
	if r.Err != nil {
		return fmt.Sprintf("#%d error %v (%s)", r.Attempt, r.Err, r.Latency.Round(time.Microsecond))
	}
	return fmt.Sprintf("#%d %d %q %s (%s)", r.Attempt, r.Status, r.Body, r.Kind(), r.Latency.Round(time.Microsecond))
}

// NotifyURL is target's notify_url for channel: target may be the gateway's base URL or the
// full notify_url already.
func NotifyURL(target, channel string) string {
	target = strings.TrimRight(target, "/")
	if strings.HasSuffix(target, "/notify/"+channel) {
		return target
	}
	return target + "/notify/" + channel
}

// Send delivers one message.
func Send(ctx context.Context, client *http.Client, url string, m Message) Reply {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(m.Body))
	if err != nil {
		return Reply{Err: err}
	}
	for k, vs := range m.Header {
		req.Header[k] = vs
	}
	res, err := client.Do(req)
	if err != nil {
		return Reply{Err: err, Latency: time.Since(start)}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 200))
	_, _ = io.Copy(io.Discard, res.Body) // drain so the connection is reused
	return Reply{Status: res.StatusCode, Body: string(body), Latency: time.Since(start)}
}

// Storm sends the same message repeat times from concurrency workers at once: the duplicate
// deliveries a channel makes when it does not hear back in time.
func Storm(ctx context.Context, client *http.Client, url string, m Message, repeat, concurrency int, each func(Reply)) []Reply {
	replies := make([]Reply, repeat)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range max(1, concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := Send(ctx, client, url, m)
				r.Attempt = i + 1
				replies[i] = r
				if each != nil {
					mu.Lock()
					each(r)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range repeat {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return replies
}

// Schedules are the channels' redelivery delays after a first delivery that was not answered
// with success, as the channels document them. Stripe documents "up to three days with exponential
// backoff" without exact steps; its schedule here is an approximation of that.
var Schedules = map[string][]time.Duration{
	"alipay":    {4 * time.Minute, 10 * time.Minute, 10 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 15 * time.Hour},
	"wechatpay": {15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour},
	"stripe":    {time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 12 * time.Hour, 12 * time.Hour, 15 * time.Hour, 15 * time.Hour},
	"unionpay":  {time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute},
}

// Redeliver behaves like the channel: it delivers, and while the answer is not success waits the
// channel's next delay (divided by speedup) and delivers again, re-signed at the time of each
// delivery as channels do, until success or the schedule runs out.
func Redeliver(ctx context.Context, client *http.Client, url string, s Signer, p Payment, speedup float64, each func(Reply)) ([]Reply, error) {
	schedule, ok := Schedules[s.Channel()]
	if !ok {
		return nil, fmt.Errorf("no retry schedule for %s", s.Channel())
	}
	if speedup <= 0 {
		speedup = 1
	}
	var replies []Reply
	for attempt := 0; ; attempt++ {
		p.Time = time.Now()
		m, err := s.Sign(p)
		if err != nil {
			return replies, err
		}
		r := Send(ctx, client, url, m)
		r.Attempt = attempt + 1
		replies = append(replies, r)
		if each != nil {
			each(r)
		}
		if r.Kind() == "success" || attempt == len(schedule) {
			return replies, nil
		}
		select {
		case <-ctx.Done():
			return replies, ctx.Err()
		case <-time.After(time.Duration(float64(schedule[attempt]) / speedup)):
		}
	}
}

// Summary counts replies by kind and reports latency percentiles.
func Summary(replies []Reply) string {
	kinds := map[string]int{}
	lat := make([]time.Duration, 0, len(replies))
	for _, r := range replies {
		kinds[r.Kind()]++
		lat = append(lat, r.Latency)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))].Round(time.Microsecond)
	}
	return fmt.Sprintf("%d sent: %d success, %d refusal, %d retry, %d error; latency p50 %s p90 %s max %s",
		len(replies), kinds["success"], kinds["refusal"], kinds["retry"], kinds["error"], pct(0.5), pct(0.9), pct(1))
}
