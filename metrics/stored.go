package metrics

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what the database holds that the stored-state gauges show. Every replica reads the
// same rows, so the rules and panels take max (not sum) across instances.
type State struct {
	OpenAnomalies map[string]int          // anomalies no person has resolved, by kind
	Discrepancies map[[2]string]int       // open discrepancies, by channel and class
	LastSuccess   map[[2]string]time.Time // last successful run, by recon_job (JobQuery, JobBill) and channel
	// EventsUnsequenced: committed outbox events the sequencer has not numbered yet (not in the
	// feed yet); a backlog that stays means no replica runs the sequencer.
	EventsUnsequenced int
	// Reopened: how many times bill runs reopened a signed-off day, by channel (a counter kept
	// in the database); DaysReopened: days reopened and not signed off again, by channel.
	Reopened     map[string]int
	DaysReopened map[string]int
}

// StateReader reads the stored state (repository.DB).
type StateReader interface {
	StoredState(ctx context.Context) (State, error)
}

// storedTTL is how long one read of the stored state answers scrapes: several Prometheus
// servers and replicas scraping cost one set of queries per replica every few seconds.
const storedTTL = 5 * time.Second

// storedTimeout bounds one read: a scrape does not wait on a slow database.
const storedTimeout = 2 * time.Second

// stored is the collector of the gauges computed from the database at scrape time, so they
// survive restarts, agree across replicas and count what the CLI did.
type stored struct {
	anomalies, discrepancies, lastSuccess, unsequenced, up *prometheus.Desc
	reopened, daysReopened                                 *prometheus.Desc

	mu     sync.Mutex
	read   StateReader         // nil: nothing to report (no database)
	expect map[string][]string // recon_job -> channels whose last success shows 0 until they have one
	at     time.Time
	state  State
	err    error
}

func (m *Metrics) storedFamilies() {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		m.families[name] = labels
		return prometheus.NewDesc(name, help, labels, nil)
	}
	m.stored = &stored{
		anomalies: desc("paygw_anomalies_open", "Anomalies no person has resolved yet, by kind (from the database).", "kind"),
		discrepancies: desc("paygw_reconcile_discrepancies",
			"Open discrepancies of each day's bill result, by channel and class: not settled by a repair; PENDING included (from the database).",
			"channel", "class"),
		lastSuccess: desc("paygw_reconcile_last_success_timestamp_seconds",
			"When a reconciliation job (recon_job query or bill) last succeeded for a channel, Unix seconds; 0 if never (from the database).",
			"recon_job", "channel"),
		unsequenced: desc("paygw_events_unsequenced",
			"Committed outbox events not numbered by the sequencer yet, so not in the feed yet (from the database)."),
		up: desc("paygw_stored_state_up", "1 when the stored-state gauges could be read from the database at this scrape, else 0."),
		reopened: desc("paygw_reconcile_reopened_total",
			"Times a bill run found something new in a channel's day a person had signed off, and reopened it (from the database).",
			"channel"),
		daysReopened: desc("paygw_reconcile_days_reopened",
			"Channel days a bill run reopened after their sign-off and nobody has signed off again (from the database).", "channel"),
		expect: map[string][]string{},
	}
	m.reg.MustRegister(m.stored)
}

// ReadStoredState makes the stored-state gauges read r at scrape time (cached a few seconds).
func (m *Metrics) ReadStoredState(r StateReader) {
	if m == nil {
		return
	}
	m.stored.mu.Lock()
	defer m.stored.mu.Unlock()
	m.stored.read = r
}

// ExpectReconcile shows job's last success for channels at 0 until they have one, so a
// channel that never succeeded is seen (alerts read a missing series as no data). Channels
// outside every call are not shown, whatever the database holds: a disabled channel's old
// success would alert for ever.
func (m *Metrics) ExpectReconcile(job string, channels []string) {
	if m == nil {
		return
	}
	m.stored.mu.Lock()
	defer m.stored.mu.Unlock()
	for _, ch := range channels {
		if !slices.Contains(m.stored.expect[job], ch) {
			m.stored.expect[job] = append(m.stored.expect[job], ch)
		}
	}
}

// Named lists the names of channels (or anything named), for ExpectReconcile.
func Named[T interface{ Name() string }](ts []T) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name()
	}
	return names
}

func (s *stored) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.anomalies
	ch <- s.discrepancies
	ch <- s.lastSuccess
	ch <- s.unsequenced
	ch <- s.up
	ch <- s.reopened
	ch <- s.daysReopened
}

func (s *stored) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read == nil {
		return
	}
	if time.Since(s.at) >= storedTTL {
		ctx, cancel := context.WithTimeout(context.Background(), storedTimeout)
		s.state, s.err = s.read.StoredState(ctx)
		cancel()
		s.at = time.Now()
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if s.err != nil { // no value rather than a stale one; the up gauge says why
		gauge(s.up, 0)
		return
	}
	gauge(s.up, 1)
	gauge(s.unsequenced, float64(s.state.EventsUnsequenced))
	// The fixed sets start at zero, so a rule or a panel sees "none" rather than no data: every
	// anomaly kind, and every class of each channel a job is expected for.
	anomalies := map[string]int{}
	for _, kind := range AnomalyKinds() {
		anomalies[kind] = 0
	}
	maps.Copy(anomalies, s.state.OpenAnomalies)
	for kind, n := range anomalies {
		gauge(s.anomalies, float64(n), kind)
	}
	discrepancies := map[[2]string]int{}
	for _, channels := range s.expect {
		for _, c := range channels {
			for _, class := range DiscrepancyClasses {
				discrepancies[[2]string{c, class}] = 0
			}
		}
	}
	maps.Copy(discrepancies, s.state.Discrepancies)
	for k, n := range discrepancies {
		gauge(s.discrepancies, float64(n), k[0], k[1])
	}
	// Every channel a job is expected for starts at zero, so a rate or a rule sees the first
	// reopening.
	reopened, days := map[string]int{}, map[string]int{}
	for _, channels := range s.expect {
		for _, c := range channels {
			reopened[c], days[c] = 0, 0
		}
	}
	maps.Copy(reopened, s.state.Reopened)
	maps.Copy(days, s.state.DaysReopened)
	for c, n := range reopened {
		ch <- prometheus.MustNewConstMetric(s.reopened, prometheus.CounterValue, float64(n), c)
	}
	for c, n := range days {
		gauge(s.daysReopened, float64(n), c)
	}
	for job, channels := range s.expect {
		for _, c := range channels {
			v := 0.0
			if at, ok := s.state.LastSuccess[[2]string{job, c}]; ok {
				v = float64(at.UnixNano()) / 1e9
			}
			gauge(s.lastSuccess, v, job, c)
		}
	}
}
