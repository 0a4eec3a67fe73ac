package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/webhook"
)

// webhookDrain is how long a stopping serve lets its in-flight webhook POSTs finish and be
// recorded (each is bounded by delivery.DefaultTimeout, 10 s), so a deploy sends nothing twice.
const webhookDrain = 12 * time.Second

// newDispatcher builds the webhook deliveries of the configured endpoints, each signing with its
// secrets (newest first); nil when none is configured.
func newDispatcher(cfg *config.Config, db *repository.DB, met *metrics.Metrics, log zerolog.Logger) (*delivery.Dispatcher, error) {
	if len(cfg.Webhooks.Endpoints) == 0 {
		return nil, nil
	}
	eps := make([]delivery.Endpoint, 0, len(cfg.Webhooks.Endpoints))
	for _, ep := range cfg.Webhooks.Endpoints {
		secrets := ep.SigningSecrets()
		eps = append(eps, delivery.Endpoint{Name: ep.Name, URL: ep.URL, Events: ep.Events,
			Sign: func(id string, ts time.Time, body []byte) string { return webhook.Sign(id, ts, body, secrets...) }})
	}
	return delivery.New(db, delivery.Options{Endpoints: eps, Schedule: cfg.Webhooks.RetrySchedule,
		Holder: lease.Holder("webhooks"), Metrics: met, Log: log})
}

// webhookRoutes is d as the handlers take it: no routes without a dispatcher.
func webhookRoutes(d *delivery.Dispatcher) handlers.Webhooks {
	if d == nil {
		return nil
	}
	return d
}

// serveWebhooks runs d until ctx ends and returns a wait for its in-flight POSTs, bounded by
// webhookDrain; both do nothing without a dispatcher.
func serveWebhooks(ctx context.Context, d *delivery.Dispatcher, log zerolog.Logger) (wait func()) {
	if d == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() { defer close(done); d.Serve(ctx) }()
	return func() {
		select {
		case <-done:
		case <-time.After(webhookDrain):
			log.Warn().Dur("after", webhookDrain).Msg("webhook deliveries still in flight at exit: they are sent again by the next holder")
		}
	}
}
