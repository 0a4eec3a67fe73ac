// Package metrics holds paygw's Prometheus collectors: one registry built by `paygw serve` and
// handed to the packages that count. Every method is safe on a nil *Metrics, so a package built
// without metrics (tests, one-shot commands) counts nothing and needs no branch of its own.
//
// Label values are bounded by construction: channels, outcomes, reasons, route patterns and
// classes come from fixed sets in the code, never from a request (no trade_no, key or token).
package metrics

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/paygw/paygw/payment"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the registry and its collectors.
type Metrics struct {
	reg *prometheus.Registry
	// families holds paygw's own metric families (not the Go runtime's or the process's), by
	// name, with their label names: what Names and Labels answer.
	families map[string][]string

	notifications    *prometheus.CounterVec
	notificationTime *prometheus.HistogramVec
	verifyFailures   *prometheus.CounterVec
	guard            *prometheus.CounterVec
	applyRetries     *prometheus.CounterVec
	txDuration       prometheus.Histogram
	groupSize        prometheus.Histogram
	createGroupSize  prometheus.Histogram
	orderCreates     *prometheus.CounterVec
	replays          prometheus.Counter
	sweeperFailed    prometheus.Counter
	purged           prometheus.Counter
	reconcileQueries *prometheus.CounterVec
	stored           *stored
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	webhookResults   *prometheus.CounterVec
	webhookOldest    *prometheus.GaugeVec
	webhookAttempt   *prometheus.HistogramVec
	webhookDisabled  *prometheus.GaugeVec
}

// New builds the registry with paygw's collectors, the Go runtime's and the process's.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), families: map[string][]string{}}
	m.notificationFamilies()
	m.storageFamilies()
	m.orderFamilies()
	m.httpFamilies()
	m.webhookFamilies()
	m.reconcileQueries = m.counterVec("paygw_reconcile_query_total",
		"Trade queries the reconciliation job made, by channel and the channel's answer.", "channel", "answer")
	m.storedFamilies()
	build := m.gaugeVec("paygw_build_info", "Always 1; the version label is the running build's.", "version")
	build.WithLabelValues(version).Set(1)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The fixed label sets start at zero, so a rate or an increase sees their first event.
	for _, r := range GuardResults {
		m.guard.WithLabelValues(r)
	}
	for _, r := range RetryReasons {
		m.applyRetries.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) notificationFamilies() {
	m.notifications = m.counterVec("paygw_notifications_total",
		"Notifications answered, by channel and outcome (an apply outcome, REFUSED, PROBE or RETRY).", "channel", "outcome")
	m.notificationTime = m.histogramVec("paygw_notification_duration_seconds", "Time from a notification's arrival to its reply, by channel.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "channel")
	m.verifyFailures = m.counterVec("paygw_verify_failures_total",
		"Notifications refused before verification passed, by channel and reason; reason probe is a channel testing our verification.",
		"channel", "reason")
}

func (m *Metrics) storageFamilies() {
	m.guard = m.counterVec("paygw_guard_total", "Redis guard answers: acquired, held, redis_down, done_marker.", "result")
	m.applyRetries = m.counterVec("paygw_apply_retries_total", "MySQL transactions run again after a deadlock or a lock-wait timeout.", "reason")
	groups := []float64{2, 4, 8, 16, 32, 64}
	m.groupSize = m.histogram("paygw_apply_group_size",
		"Payments applied together by one committed group transaction (group apply); _count is groups, _sum payments.", groups)
	m.createGroupSize = m.histogram("paygw_create_group_size",
		"Idempotent creates committed together by one group transaction; _count is groups, _sum creates.", groups)
	m.txDuration = m.histogram("paygw_db_tx_duration_seconds", "Time of one MySQL transaction, retries included.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5})
}

func (m *Metrics) orderFamilies() {
	m.orderCreates = m.counterVec("paygw_order_creates_total",
		"POST /v1/orders results: created, replayed, refused, in_flight, key_reused, done, error.", "result")
	m.replays = m.counter("paygw_idempotent_replays_total", "Create-order calls answered with the stored result of their idempotency key.")
	m.sweeperFailed = m.counter("paygw_sweeper_failed_records_total",
		"Processing records the sweeper failed because they outlived the processing timeout.")
	m.purged = m.counter("paygw_purged_records_total", "idempotent_record rows deleted by the retention purge.")
}

func (m *Metrics) httpFamilies() {
	m.httpRequests = m.counterVec("paygw_http_requests_total", "Requests on the public listener, by route pattern and status code.",
		"route", "code")
	m.httpDuration = m.histogramVec("paygw_http_request_duration_seconds",
		"Time to answer a request on the public listener, by route pattern.", prometheus.DefBuckets, "route")
}

func (m *Metrics) webhookFamilies() {
	m.webhookResults = m.counterVec("paygw_webhook_deliveries_total",
		"Webhook POSTs, by endpoint and result: delivered, retry (to be tried again), failed (schedule exhausted), disabled (410 Gone).",
		"endpoint", "result")
	m.webhookOldest = m.gaugeVec("paygw_webhook_oldest_undelivered_seconds",
		"Age of the oldest event still pending to an endpoint, 0 when none is (from the database).", "endpoint")
	m.webhookDisabled = m.gaugeVec("paygw_webhook_endpoint_disabled",
		"1 while an endpoint is disabled (it answered 410 Gone): its events are not sent (from the database).", "endpoint")
	m.webhookAttempt = m.histogramVec("paygw_webhook_attempt_duration_seconds", "Time of one webhook POST, by endpoint.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "endpoint")
}

// register adds one of paygw's own families to the registry and to what Names knows.
func (m *Metrics) register(c prometheus.Collector, name string, labels ...string) {
	m.reg.MustRegister(c)
	m.families[name] = labels
}

func (m *Metrics) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	m.register(c, name, labels...)
	return c
}

func (m *Metrics) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	m.register(c, name)
	return c
}

func (m *Metrics) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	m.register(g, name, labels...)
	return g
}

func (m *Metrics) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	m.register(h, name, labels...)
	return h
}

func (m *Metrics) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	m.register(h, name)
	return h
}

// Names lists paygw's own metric families registered so far (New's and Up's), sorted: not the Go runtime's or the process's. A histogram's series add
// _bucket, _sum and _count to its name.
func (m *Metrics) Names() []string {
	return slices.Sorted(maps.Keys(m.families))
}

// Labels lists the label names of the family name (Names), nil for a family without labels or
// one that is not registered.
func (m *Metrics) Labels(name string) []string { return slices.Clone(m.families[name]) }

// Channels starts the query answers of the channels the reconciliation job asks at zero, so
// dashboards and alerts see them before the first query (a series that does not exist yet
// reads as no data, not as zero), and expects their query runs (ExpectReconcile).
func (m *Metrics) Channels(names []string) {
	if m == nil {
		return
	}
	for _, ch := range names {
		for _, a := range ReconcileAnswers {
			m.reconcileQueries.WithLabelValues(ch, a)
		}
	}
	m.ExpectReconcile(JobQuery, names)
}

// Handler serves the registry in the Prometheus exposition format: for the admin listener only.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is for tests that read the collectors directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Up registers a gauge (paygw_<name>_up) that pings at each scrape: 1 when ping answers within
// a second, else 0.
func (m *Metrics) Up(name string, ping func(context.Context) error) {
	if m == nil {
		return
	}
	family := "paygw_" + name + "_up"
	m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: family,
		Help: "1 when " + name + " answered a ping at this scrape, else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if ping(ctx) != nil {
			return 0
		}
		return 1
	}), family)
}

// Notification counts one answered notification and its time. outcome is an apply outcome, or
// one of OutcomeRefused, OutcomeProbe, OutcomeRetry.
func (m *Metrics) Notification(channel, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(channel, outcome).Inc()
	m.notificationTime.WithLabelValues(channel).Observe(took.Seconds())
}

// What a notification came to besides the apply outcomes.
const (
	OutcomeRefused = "REFUSED"
	OutcomeProbe   = "PROBE"
	OutcomeRetry   = "RETRY"
)

// Outcomes lists every outcome paygw_notifications_total can carry: the apply outcomes
// (payment.Outcomes) and OutcomeRefused, OutcomeProbe, OutcomeRetry.
func Outcomes() []string {
	var out []string
	for _, o := range payment.Outcomes() {
		out = append(out, string(o))
	}
	return append(out, OutcomeRefused, OutcomeProbe, OutcomeRetry)
}

// Verify-failure reasons: a small fixed set the handlers map the channels' sentinel errors to.
const (
	ReasonProbe        = "probe"
	ReasonBadSignature = "bad_signature"
	ReasonMalformed    = "malformed"
	ReasonNotOurs      = "not_ours"
	ReasonUnsupported  = "unsupported"
	ReasonStale        = "stale"
	ReasonTooLarge     = "too_large"
	ReasonBody         = "body"  // the body did not arrive whole
	ReasonOther        = "other" // an error of no sentinel: a channel bug worth a look
)

// Reasons lists the Reason* constants.
var Reasons = []string{ReasonProbe, ReasonBadSignature, ReasonMalformed, ReasonNotOurs, ReasonUnsupported, ReasonStale,
	ReasonTooLarge, ReasonBody, ReasonOther}

// VerifyFailure counts a refusal before verification passed; reason is a Reason* constant.
func (m *Metrics) VerifyFailure(channel, reason string) {
	if m == nil {
		return
	}
	m.verifyFailures.WithLabelValues(channel, reason).Inc()
}

// Guard results.
const (
	GuardAcquired   = "acquired"
	GuardHeld       = "held"
	GuardRedisDown  = "redis_down"
	GuardDoneMarker = "done_marker"
)

// GuardResults lists the Guard* constants.
var GuardResults = []string{GuardAcquired, GuardHeld, GuardRedisDown, GuardDoneMarker}

// Guard counts one answer of the Redis guard.
func (m *Metrics) Guard(result string) {
	if m == nil {
		return
	}
	m.guard.WithLabelValues(result).Inc()
}

// Transaction retry reasons.
const (
	RetryDeadlock = "deadlock"
	RetryLockWait = "lock_wait"
)

// RetryReasons lists the Retry* constants.
var RetryReasons = []string{RetryDeadlock, RetryLockWait}

// TxRetry counts a transaction run again.
func (m *Metrics) TxRetry(reason string) {
	if m == nil {
		return
	}
	m.applyRetries.WithLabelValues(reason).Inc()
}

// ApplyGroup observes one committed group of payments.
func (m *Metrics) ApplyGroup(size int) {
	if m == nil {
		return
	}
	m.groupSize.Observe(float64(size))
}

// CreateGroup observes one committed group of idempotent creates.
func (m *Metrics) CreateGroup(size int) {
	if m == nil {
		return
	}
	m.createGroupSize.Observe(float64(size))
}

// TxDone observes one transaction's time, retries included.
func (m *Metrics) TxDone(took time.Duration) {
	if m == nil {
		return
	}
	m.txDuration.Observe(took.Seconds())
}

// Create-order results.
const (
	OrderCreated   = "created"
	OrderReplayed  = "replayed"
	OrderRefused   = "refused" // out of stock, unknown SKU: final, stored and replayed
	OrderInFlight  = "in_flight"
	OrderKeyReused = "key_reused"
	OrderDone      = "done"
	OrderError     = "error"
)

// OrderResults lists the Order* constants.
var OrderResults = []string{OrderCreated, OrderReplayed, OrderRefused, OrderInFlight, OrderKeyReused, OrderDone, OrderError}

// OrderCreate counts a create-order result (an Order* constant); a replay also counts in
// paygw_idempotent_replays_total.
func (m *Metrics) OrderCreate(result string) {
	if m == nil {
		return
	}
	m.orderCreates.WithLabelValues(result).Inc()
	if result == OrderReplayed {
		m.replays.Inc()
	}
}

// SweeperFailed adds the records one sweep failed.
func (m *Metrics) SweeperFailed(n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.sweeperFailed.Add(float64(n))
}

// Purged adds the idempotent_record rows one purge deleted.
func (m *Metrics) Purged(n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.purged.Add(float64(n))
}

// ReconcileQuery counts a trade query and the channel's answer (a trade state, FAILED or
// UNVERIFIED).
func (m *Metrics) ReconcileQuery(channel, answer string) {
	if m == nil {
		return
	}
	m.reconcileQueries.WithLabelValues(channel, answer).Inc()
}

// Echo is the middleware counting every request by its route pattern (c.Path(), never the raw
// path) and status. It hands errors to the error handler itself, as echo's logger does, so the
// status it counts is the one written.
func (m *Metrics) Echo() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if m == nil {
			return next
		}
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			route := c.Path()
			if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
				route = "unmatched"
			}
			m.httpRequests.WithLabelValues(route, strconv.Itoa(c.Response().Status)).Inc()
			m.httpDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
			return nil
		}
	}
}

// Webhook delivery results.
const (
	WebhookDelivered = "delivered"
	WebhookRetry     = "retry"
	WebhookFailed    = "failed"
	WebhookDisabled  = "disabled"
)

// WebhookResults lists the Webhook* results.
var WebhookResults = []string{WebhookDelivered, WebhookRetry, WebhookFailed, WebhookDisabled}

// Webhooks starts the configured endpoints' delivery results and backlog age at zero.
func (m *Metrics) Webhooks(endpoints []string) {
	if m == nil {
		return
	}
	for _, ep := range endpoints {
		for _, r := range WebhookResults {
			m.webhookResults.WithLabelValues(ep, r)
		}
		m.webhookOldest.WithLabelValues(ep)
		m.webhookDisabled.WithLabelValues(ep)
	}
}

// WebhookAttempt counts one POST to endpoint, its result (a Webhook* result) and its time.
func (m *Metrics) WebhookAttempt(endpoint, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.webhookResults.WithLabelValues(endpoint, result).Inc()
	m.webhookAttempt.WithLabelValues(endpoint).Observe(took.Seconds())
}

// WebhookBacklog sets the age of the oldest pending event to endpoint (0 for none).
func (m *Metrics) WebhookBacklog(endpoint string, age time.Duration) {
	if m == nil {
		return
	}
	m.webhookOldest.WithLabelValues(endpoint).Set(max(age, 0).Seconds())
}

// WebhookEndpointDisabled sets whether endpoint is disabled.
func (m *Metrics) WebhookEndpointDisabled(endpoint string, disabled bool) {
	if m == nil {
		return
	}
	v := 0.0
	if disabled {
		v = 1
	}
	m.webhookDisabled.WithLabelValues(endpoint).Set(v)
}

// ReconcileAnswers lists the answers paygw_reconcile_query_total counts: a channel's trade
// states (channels.TradeState) and the job's FAILED and UNVERIFIED.
var ReconcileAnswers = []string{"PAID", "PAID_REFUNDED", "CLOSED", "NOT_PAID", "FAILED", "UNVERIFIED"}

// DiscrepancyClasses lists the classes of the discrepancies a bill run stores (reconcile's
// Class* constants but MATCHED and REFUND_MATCHED, which are only counted).
var DiscrepancyClasses = []string{"CHANNEL_ONLY", "STATUS_MISMATCH", "AMOUNT_MISMATCH", "UNKNOWN_ORDER", "LOCAL_ONLY", "PENDING",
	"REFUND_CHANNEL_ONLY", "REFUND_AMOUNT_MISMATCH", "SUMMARY_MISMATCH", "BAD_LINE", "UNVERIFIED", "FEE_MISMATCH"}

// AnomalyKinds lists the kinds of anomaly paygw_anomalies_open counts: the apply outcomes that
// store one.
func AnomalyKinds() []string {
	var kinds []string
	for _, o := range payment.Outcomes() {
		if o.IsAnomaly() {
			kinds = append(kinds, string(o))
		}
	}
	return kinds
}

// The reconciliation jobs, as paygw_reconcile_last_success_timestamp_seconds names them.
const (
	JobQuery = "query"
	JobBill  = "bill"
)

// ReconcileJobs lists the Job* constants.
var ReconcileJobs = []string{JobQuery, JobBill}

// Values is the closed set of values paygw gives label of the family metric, nil when the set is
// open (channel names come from the configuration, routes and codes from the router, version
// from the build) or the family has no such label.
func Values(metric, label string) []string {
	fixed := map[string]map[string][]string{
		"paygw_notifications_total":                      {"outcome": Outcomes()},
		"paygw_verify_failures_total":                    {"reason": Reasons},
		"paygw_guard_total":                              {"result": GuardResults},
		"paygw_apply_retries_total":                      {"reason": RetryReasons},
		"paygw_order_creates_total":                      {"result": OrderResults},
		"paygw_reconcile_query_total":                    {"answer": ReconcileAnswers},
		"paygw_reconcile_discrepancies":                  {"class": DiscrepancyClasses},
		"paygw_reconcile_last_success_timestamp_seconds": {"recon_job": ReconcileJobs},
		"paygw_anomalies_open":                           {"kind": AnomalyKinds()},
		"paygw_webhook_deliveries_total":                 {"result": WebhookResults},
	}
	return slices.Clone(fixed[metric][label])
}
