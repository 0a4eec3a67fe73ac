package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/repository"
)

// maxAnswer is how much of a receiver's answer is read (and thrown away): enough to let the
// connection be reused, never a body worth keeping.
const maxAnswer = 4 << 10

// maxError bounds the error text stored with an attempt (webhook_attempt.error).
const maxError = 255

// outcome is what one POST came to.
type outcome struct {
	code    int // 0: no answer
	err     string
	latency time.Duration
}

// send POSTs one delivery and records the attempt. A POST cut short by ctx (this holder lost its
// lease) is not recorded: the delivery stays due and the shard's next holder sends it.
func (d *Dispatcher) send(ctx context.Context, shard int, dd repository.DueDelivery) {
	ep := d.byName[dd.Endpoint]
	at := d.o.Now()
	var out outcome
	if dd.Body == nil {
		out.err = "the event is no longer stored (purged)"
	} else {
		out = d.post(ctx, ep, dd, at)
		if out.code == 0 && ctx.Err() != nil {
			return
		}
	}
	status, result, next := d.judge(dd, out)
	// The POST happened: its bookkeeping finishes even if ctx ends now.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a := repository.WebhookAttempt{DeliveryID: dd.ID, At: at, StatusCode: out.code, LatencyMS: out.latency.Milliseconds(), Error: out.err}
	err := d.store.RecordAttempt(bctx, dd, a, status, next, d.o.Now())
	switch {
	case errors.Is(err, repository.ErrFenced):
		d.o.Log.Info().Str("endpoint", dd.Endpoint).Str("event_id", dd.EventID).
			Msg("webhooks: the delivery changed during its POST (redelivered); this attempt is not recorded")
	case err != nil:
		d.o.Log.Warn().Err(err).Str("endpoint", dd.Endpoint).Str("event_id", dd.EventID).
			Msg("webhooks: recording an attempt failed; the event will be sent again")
		return
	}
	d.o.Metrics.WebhookAttempt(dd.Endpoint, result, out.latency)
	if status == repository.DeliveryDisabled {
		d.disable(bctx, shard, dd.Endpoint)
	}
}

// judge turns an outcome into the delivery's next status, the metric result and the next
// attempt's time: a 2xx is delivered, 410 Gone disables the endpoint, anything else waits
// Schedule[n] before retry n+1, and fails once the schedule is exhausted.
func (d *Dispatcher) judge(dd repository.DueDelivery, out outcome) (status, result string, next *time.Time) {
	switch {
	case out.code >= 200 && out.code < 300:
		return repository.DeliveryDelivered, metrics.WebhookDelivered, nil
	case out.code == http.StatusGone:
		return repository.DeliveryDisabled, metrics.WebhookDisabled, nil
	case dd.Body != nil && dd.Attempts < len(d.o.Schedule):
		t := d.o.Now().Add(d.o.Schedule[dd.Attempts])
		return repository.DeliveryPending, metrics.WebhookRetry, &t
	}
	return repository.DeliveryFailed, metrics.WebhookFailed, nil
}

// disable marks the endpoint disabled after its 410 and disables this shard's pending
// deliveries to it; the other shards do theirs at their next pass.
func (d *Dispatcher) disable(ctx context.Context, shard int, endpoint string) {
	d.o.Log.Warn().Str("endpoint", endpoint).
		Msg("webhooks: the endpoint answered 410 Gone and is disabled until its url changes or an event is redelivered to it")
	err := d.store.DisableWebhookEndpoint(ctx, endpoint, d.o.Now())
	if err == nil {
		_, err = d.store.DisableDeliveries(ctx, endpoint, shard)
	}
	if err != nil {
		d.o.Log.Warn().Err(err).Str("endpoint", endpoint).Msg("webhooks: disabling the endpoint failed")
	}
}

// post makes the Standard Webhooks request: webhook-id, webhook-timestamp, webhook-signature,
// the stored body as it is.
func (d *Dispatcher) post(ctx context.Context, ep Endpoint, dd repository.DueDelivery, at time.Time) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(dd.Body))
	if err != nil {
		return outcome{err: "bad endpoint url"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", dd.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", ep.Sign(dd.EventID, at, dd.Body))
	start := time.Now()
	resp, err := d.o.Client.Do(req)
	if err != nil {
		return outcome{err: clip(transportError(err)), latency: time.Since(start)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	_ = resp.Body.Close()
	out := outcome{code: resp.StatusCode, latency: time.Since(start)}
	if out.code < 200 || out.code > 299 {
		out.err = fmt.Sprintf("answered %d", out.code)
	}
	return out
}

// transportError is the error of a request without the url, which may carry a token of the
// merchant's.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timeout: no answer within the client's timeout"
		}
		return ue.Err.Error()
	}
	return err.Error()
}

func clip(s string) string {
	if len(s) > maxError {
		return strings.ToValidUTF8(s[:maxError], "")
	}
	return s
}
