// Package metrics holds paygw's Prometheus collectors: one registry built by `paygw serve` and
// handed to the packages that count. Every method is safe on a nil *Metrics, so a package built
// without metrics (tests, one-shot commands) counts nothing and needs no branch of its own.
//
// Label values are bounded by construction: channels, outcomes, reasons, route patterns and
// classes come from fixed sets in the code, never from a request (no trade_no, key or token).
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the registry and its collectors.
type Metrics struct {
	reg *prometheus.Registry

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
	discrepancies    *prometheus.GaugeVec
	reconcileSuccess *prometheus.GaugeVec
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
}

// New builds the registry with paygw's collectors, the Go runtime's and the process's.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{reg: reg}

	m.notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_notifications_total",
		Help: "Notifications answered, by channel and outcome (an apply outcome, REFUSED, PROBE or RETRY).",
	}, []string{"channel", "outcome"})
	m.notificationTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paygw_notification_duration_seconds",
		Help:    "Time from a notification's arrival to its reply, by channel.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"channel"})
	m.verifyFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_verify_failures_total",
		Help: "Notifications refused before verification passed, by channel and reason; reason probe is a channel testing our verification.",
	}, []string{"channel", "reason"})
	m.guard = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_guard_total",
		Help: "Redis guard answers: acquired, held, redis_down, done_marker.",
	}, []string{"result"})
	m.applyRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_apply_retries_total",
		Help: "MySQL transactions run again after a deadlock or a lock-wait timeout.",
	}, []string{"reason"})
	m.groupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paygw_apply_group_size",
		Help:    "Payments applied together by one committed group transaction (group apply); _count is groups, _sum payments.",
		Buckets: []float64{2, 4, 8, 16, 32, 64},
	})
	m.createGroupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paygw_create_group_size",
		Help:    "Idempotent creates committed together by one group transaction; _count is groups, _sum creates.",
		Buckets: []float64{2, 4, 8, 16, 32, 64},
	})
	m.txDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paygw_db_tx_duration_seconds",
		Help:    "Time of one MySQL transaction, retries included.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.orderCreates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_order_creates_total",
		Help: "POST /v1/orders results: created, replayed, refused, in_flight, key_reused, done, error.",
	}, []string{"result"})
	m.replays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paygw_idempotent_replays_total",
		Help: "Create-order calls answered with the stored result of their idempotency key.",
	})
	m.sweeperFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paygw_sweeper_failed_records_total",
		Help: "Processing records the sweeper failed because they outlived the processing timeout.",
	})
	m.purged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paygw_purged_records_total",
		Help: "idempotent_record rows deleted by the retention purge.",
	})
	m.reconcileQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_reconcile_query_total",
		Help: "Trade queries the reconciliation job made, by channel and the channel's answer.",
	}, []string{"channel", "answer"})
	m.discrepancies = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paygw_reconcile_discrepancies",
		Help: "Discrepancies the channel's last bill run found, by class (matched lines are not discrepancies).",
	}, []string{"channel", "class"})
	m.reconcileSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paygw_reconcile_last_success_timestamp_seconds",
		Help: "When a reconciliation job (query, bill) last completed, Unix seconds.",
	}, []string{"job"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paygw_http_requests_total",
		Help: "Requests on the public listener, by route pattern and status code.",
	}, []string{"route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paygw_http_request_duration_seconds",
		Help:    "Time to answer a request on the public listener, by route pattern.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paygw_build_info",
		Help: "Always 1; the version label is the running build's.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)

	for _, c := range []prometheus.Collector{m.notifications, m.notificationTime, m.verifyFailures, m.guard, m.applyRetries,
		m.txDuration, m.groupSize, m.createGroupSize, m.orderCreates, m.replays, m.sweeperFailed, m.purged, m.reconcileQueries, m.discrepancies,
		m.reconcileSuccess, m.httpRequests, m.httpDuration, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	// The fixed label sets start at zero, so a rate or an increase sees their first event.
	for _, r := range []string{GuardAcquired, GuardHeld, GuardRedisDown, GuardDoneMarker} {
		m.guard.WithLabelValues(r)
	}
	for _, r := range []string{RetryDeadlock, RetryLockWait} {
		m.applyRetries.WithLabelValues(r)
	}
	return m
}

// Answers and classes a channel's reconciliation series start with (see Channels).
var (
	reconcileAnswers = []string{"PAID", "PAID_REFUNDED", "CLOSED", "NOT_PAID", "FAILED", "UNVERIFIED"}
	billClasses      = []string{"CHANNEL_ONLY", "STATUS_MISMATCH", "AMOUNT_MISMATCH", "UNKNOWN_ORDER", "LOCAL_ONLY", "PENDING",
		"REFUND_CHANNEL_ONLY", "REFUND_AMOUNT_MISMATCH", "SUMMARY_MISMATCH", "BAD_LINE"}
)

// Channels starts the reconciliation series of the channels the job asks at zero, and both
// jobs' last success at 0 ("not since start"), so dashboards and alerts see them before the
// first run: a series that does not exist yet reads as no data, not as zero.
func (m *Metrics) Channels(names []string) {
	if m == nil {
		return
	}
	for _, ch := range names {
		for _, a := range reconcileAnswers {
			m.reconcileQueries.WithLabelValues(ch, a)
		}
		for _, c := range billClasses {
			m.discrepancies.WithLabelValues(ch, c)
		}
	}
	for _, job := range []string{"query", "bill"} {
		m.reconcileSuccess.WithLabelValues(job)
	}
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
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "paygw_" + name + "_up",
		Help: "1 when " + name + " answered a ping at this scrape, else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if ping(ctx) != nil {
			return 0
		}
		return 1
	}))
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

// OrderCreate counts a create-order result (created, replayed, refused, in_flight, key_reused,
// done, error); a replay also counts in paygw_idempotent_replays_total.
func (m *Metrics) OrderCreate(result string) {
	if m == nil {
		return
	}
	m.orderCreates.WithLabelValues(result).Inc()
	if result == "replayed" {
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

// BillDiscrepancies replaces a channel's discrepancy counts with a finished bill run's.
func (m *Metrics) BillDiscrepancies(channel string, byClass map[string]int) {
	if m == nil {
		return
	}
	m.discrepancies.DeletePartialMatch(prometheus.Labels{"channel": channel})
	for class, n := range byClass {
		m.discrepancies.WithLabelValues(channel, class).Set(float64(n))
	}
}

// ReconcileSucceeded records that job ("query", "bill") completed at t.
func (m *Metrics) ReconcileSucceeded(job string, t time.Time) {
	if m == nil {
		return
	}
	m.reconcileSuccess.WithLabelValues(job).Set(float64(t.UnixNano()) / 1e9)
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
