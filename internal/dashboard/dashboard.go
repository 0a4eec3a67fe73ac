// Package dashboard builds paygw's Grafana dashboard (deploy/grafana/paygw.json) with the Grafana
// Foundation SDK. The panels are a table (panels below): Build renders it and Queries lists its
// PromQL, so a test can send every panel's query to a real Prometheus.
//
// Regenerate the committed file after a change here with `go generate ./internal/dashboard`;
// TestCommittedJSONIsGenerated fails while they differ.
package dashboard

//go:generate go run ./gen ../../deploy/grafana/paygw.json

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's uid in Grafana.
const UID = "paygw"

// RateInterval is Grafana's range for rate() in the panels' queries. Before a query of
// Queries() goes to Prometheus directly, replace it with a range such as "5m".
const RateInterval = "$__rate_interval"

// datasourceVar is the dashboard variable that picks the Prometheus data source.
const datasourceVar = "datasource"

type kind int

const (
	timeSeries kind = iota
	statPanel
)

type target struct {
	expr   string
	legend string
}

// rate is the per-second rate of series over Grafana's range for it (RateInterval).
func rate(series string) string { return "rate(" + series + "[" + RateInterval + "])" }

// aggregate is one target: op (sum, max, ...) of expr by labels, each series named by its labels'
// values.
func aggregate(op, expr string, labels ...string) []target {
	legend := make([]string, len(labels))
	for i, l := range labels {
		legend[i] = "{{" + l + "}}"
	}
	return []target{{
		expr:   op + " by (" + strings.Join(labels, ", ") + ") (" + expr + ")",
		legend: strings.Join(legend, " "),
	}}
}

// quantiles are two targets, the p50 and the p99 of histogram (its _bucket series) per label, or
// over all series when label is "".
func quantiles(histogram, label string) []target {
	by, legend := "le", ""
	if label != "" {
		by, legend = label+", le", "{{"+label+"}} "
	}
	q := func(phi, name string) target {
		return target{
			expr:   "histogram_quantile(" + phi + ", sum by (" + by + ") (" + rate(histogram+"_bucket") + "))",
			legend: legend + name,
		}
	}
	return []target{q("0.5", "p50"), q("0.99", "p99")}
}

type panel struct {
	title       string
	description string
	kind        kind
	unit        string
	stacked     bool
	width       uint32
	targets     []target
}

type row struct {
	title  string
	panels []panel
}

const anomalyOutcomes = `AMOUNT_MISMATCH|PAID_AFTER_CLOSE|DUPLICATE_PAYMENT|REFUND_EXCEEDS_PAYMENT`

// rows is the dashboard: every panel, its queries and its place.
var rows = []row{
	{title: "Notifications", panels: []panel{
		{
			title:       "Notifications by outcome",
			description: "Notifications per second by channel and outcome (probes included as outcome PROBE).",
			unit:        "reqps", stacked: true, width: 12,
			targets: aggregate("sum", rate("paygw_notifications_total"), "channel", "outcome"),
		},
		{
			title:       "Anomalies created",
			description: "Notifications that stored an anomaly, by channel and outcome, over the dashboard's range. Each needs a person: GET /v1/anomalies.",
			kind:        statPanel, unit: "short", width: 6,
			targets: aggregate("sum", `increase(paygw_notifications_total{outcome=~"`+anomalyOutcomes+`"}[$__range])`, "channel", "outcome"),
		},
		{
			title:       "Retry answers",
			description: "Notifications answered with a 503 the channel retries (RETRY, UNKNOWN_ORDER).",
			unit:        "reqps", width: 6,
			targets: aggregate("sum", rate(`paygw_notifications_total{outcome=~"RETRY|UNKNOWN_ORDER"}`), "channel", "outcome"),
		},
		{
			title:       "Refusals by channel and reason",
			description: "Verification failures per second. A wrong key shows as bad_signature on one channel; probe is the self-signed probe, refused on purpose.",
			unit:        "reqps", stacked: true, width: 12,
			targets: aggregate("sum", rate("paygw_verify_failures_total"), "channel", "reason"),
		},
		{
			title:       "Notification latency p50 / p99",
			description: "Time to answer a notification, per channel.",
			unit:        "s", width: 12,
			targets: quantiles("paygw_notification_duration_seconds", "channel"),
		},
	}},
	{title: "Apply path", panels: []panel{
		{
			title:       "Guard results",
			description: "Redis fast path: guard acquired, held by a twin, Redis down, or answered from a done marker.",
			unit:        "ops", stacked: true, width: 8,
			targets: aggregate("sum", rate("paygw_guard_total"), "result"),
		},
		{
			title:       "Apply retries",
			description: "Transactions retried after a deadlock or a lock-wait timeout.",
			unit:        "ops", width: 8,
			targets: aggregate("sum", rate("paygw_apply_retries_total"), "reason"),
		},
		{
			title:       "MySQL transaction p50 / p99",
			description: "Duration of the apply transactions.",
			unit:        "s", width: 8,
			targets: quantiles("paygw_db_tx_duration_seconds", ""),
		},
		{
			title:       "Group sizes",
			description: "Average payments per committed group apply, and idempotent creates per committed create group.",
			unit:        "short", width: 24,
			targets: []target{
				{
					expr:   `sum(` + rate("paygw_apply_group_size_sum") + `) / sum(` + rate("paygw_apply_group_size_count") + `)`,
					legend: "payments per apply group",
				},
				{
					expr:   `sum(` + rate("paygw_create_group_size_sum") + `) / sum(` + rate("paygw_create_group_size_count") + `)`,
					legend: "creates per create group",
				},
			},
		},
	}},
	{title: "Orders and records", panels: []panel{
		{
			title:       "Order creates and replays",
			description: "Order creates by result, and creates answered from the idempotency record.",
			unit:        "ops", width: 12,
			targets: []target{
				{
					expr:   `sum by (result) (` + rate("paygw_order_creates_total") + `)`,
					legend: "create {{result}}",
				},
				{
					expr:   `sum(` + rate("paygw_idempotent_replays_total") + `)`,
					legend: "replay",
				},
			},
		},
		{
			title:       "Sweeper and purge",
			description: "Processing records failed by the sweeper, and idempotency records deleted by retention, over the dashboard's range.",
			kind:        statPanel, unit: "short", width: 12,
			targets: []target{
				{
					expr:   `sum(increase(paygw_sweeper_failed_records_total[$__range]))`,
					legend: "sweeper failed",
				},
				{
					expr:   `sum(increase(paygw_purged_records_total[$__range]))`,
					legend: "purged",
				},
			},
		},
	}},
	{title: "Reconciliation", panels: []panel{
		{
			title:       "Reconcile query answers",
			description: "The channels' answers to the reconciliation's order queries.",
			unit:        "ops", stacked: true, width: 8,
			targets: aggregate("sum", rate("paygw_reconcile_query_total"), "channel", "answer"),
		},
		{
			title:       "Open discrepancies",
			description: "Open discrepancies of the bill results, by channel and class, from the database (PENDING waits for the next day's bill).",
			kind:        statPanel, unit: "short", width: 8,
			targets: aggregate("max", "paygw_reconcile_discrepancies", "channel", "class"),
		},
		{
			title:       "Since last reconciliation success",
			description: "Time since each reconciliation job (query, bill) last succeeded per channel, from the database; the alert fires past 26 h.",
			kind:        statPanel, unit: "s", width: 8,
			targets: []target{{
				expr:   `time() - max by (recon_job, channel) (paygw_reconcile_last_success_timestamp_seconds)`,
				legend: "{{recon_job}} {{channel}}",
			}},
		},
		{
			title:       "Open anomalies",
			description: "Anomalies no person has resolved yet, by kind, from the database: GET /v1/anomalies?resolved=false.",
			kind:        statPanel, unit: "short", width: 12,
			targets: aggregate("max", "paygw_anomalies_open", "kind"),
		},
		{
			title: "Reopened days",
			description: "Signed-off days a later bill run reopened (something new found), by channel, from the database, " +
				"and the reopens over the range; the alert fires while a day stays reopened.",
			kind: statPanel, unit: "short", width: 12,
			targets: []target{
				{expr: `max by (channel) (paygw_reconcile_days_reopened)`, legend: "{{channel}} reopened now"},
				{expr: `sum by (channel) (increase(paygw_reconcile_reopened_total[$__range]))`, legend: "{{channel}} reopens"},
			},
		},
	}},
	{title: "Webhooks", panels: []panel{
		{
			title:       "Webhook deliveries by endpoint and result",
			description: "POSTs to the merchant's endpoints: delivered, retry (to be tried again), failed (schedule exhausted), disabled (410 Gone).",
			unit:        "ops", stacked: true, width: 6,
			targets: aggregate("sum", rate("paygw_webhook_deliveries_total"), "endpoint", "result"),
		},
		{
			title:       "Oldest undelivered event",
			description: "Age of the oldest event still pending to each endpoint, from the database; the alert fires past 15 min.",
			kind:        statPanel, unit: "s", width: 4,
			targets: aggregate("max", "paygw_webhook_oldest_undelivered_seconds", "endpoint"),
		},
		{
			title:       "Webhook POST p50 / p99",
			description: "Time of one POST to an endpoint, answer or not (the client gives up after 10 s).",
			unit:        "s", width: 6,
			targets: quantiles("paygw_webhook_attempt_duration_seconds", "endpoint"),
		},
		{
			title:       "Events waiting for their place",
			description: "Outbox events committed but not yet numbered by the sequencer (the feed and the webhooks wait for it); near 0 while a replica holds the outbox lease.",
			kind:        statPanel, unit: "short", width: 4,
			targets: []target{{
				expr:   `max(paygw_events_unsequenced)`,
				legend: "unsequenced",
			}},
		},
		{
			title:       "Disabled endpoints",
			description: "1 for an endpoint disabled after a 410 Gone: its events are not sent, and its backlog reads 0.",
			kind:        statPanel, unit: "short", width: 4,
			targets: aggregate("max", "paygw_webhook_endpoint_disabled", "endpoint"),
		},
	}},
	{title: "Service", panels: []panel{
		{
			title:       "Dependencies up",
			description: "1 when paygw reaches Redis / MySQL, and reads its stored state (open anomalies, discrepancies, reconciliation successes).",
			kind:        statPanel, unit: "bool_on_off", width: 6,
			targets: []target{
				{expr: `min(paygw_redis_up)`, legend: "Redis"},
				{expr: `min(paygw_mysql_up)`, legend: "MySQL"},
				{expr: `min(paygw_stored_state_up)`, legend: "Stored state"},
			},
		},
		{
			title:       "Build",
			description: "Running paygw versions and how many instances run each.",
			kind:        statPanel, unit: "short", width: 6,
			targets: aggregate("count", "paygw_build_info", "version"),
		},
		{
			title:       "HTTP requests by route and code",
			description: "Requests per second on every route, by status code.",
			unit:        "reqps", stacked: true, width: 12,
			targets: aggregate("sum", rate("paygw_http_requests_total"), "route", "code"),
		},
		{
			title:       "HTTP latency p99 by route",
			description: "99th percentile of the request duration per route.",
			unit:        "s", width: 24,
			targets: []target{{
				expr:   `histogram_quantile(0.99, sum by (route, le) (` + rate("paygw_http_request_duration_seconds_bucket") + `))`,
				legend: "{{route}}",
			}},
		},
	}},
}

// Queries lists every panel's PromQL in the dashboard's order, with Grafana's $__rate_interval
// (RateInterval) and $__range left in.
func Queries() []string {
	var qs []string
	for _, r := range rows {
		for _, p := range r.panels {
			for _, t := range p.targets {
				qs = append(qs, t.expr)
			}
		}
	}
	return qs
}

// Build renders the dashboard as Grafana's JSON model, indented, ending in a newline.
func Build() ([]byte, error) {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + datasourceVar + "}")}
	//lint:ignore SA1019 the v1 dashboard model is what every Grafana in use imports; v2 is newer than most
	b := dashboard.NewDashboardBuilder("paygw").
		Uid(UID).
		Description("paygw payment-callback gateway: notifications, apply path, orders, reconciliation, service. Generated by internal/dashboard; do not edit by hand.").
		Tags([]string{"paygw"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(datasourceVar).
			Label("Prometheus").
			Type("prometheus"))
	id := uint32(0) // Grafana wants a distinct id per panel, rows included
	for _, r := range rows {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		for _, p := range r.panels {
			id++
			b = b.WithPanel(build(p, id, ds))
		}
	}
	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func build(p panel, id uint32, ds common.DataSourceRef) cog.Builder[dashboard.Panel] {
	refID := func(i int) string { return string("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i]) } // a panel has a few queries
	switch p.kind {
	case statPanel:
		sp := stat.NewPanelBuilder().Id(id).Title(p.title).Description(p.description).Datasource(ds).
			Unit(p.unit).Span(p.width).Height(8).
			ColorMode(common.BigValueColorModeValue).
			GraphMode(common.BigValueGraphModeNone).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		for i, t := range p.targets {
			sp = sp.WithTarget(query(t, refID(i)).Instant())
		}
		return sp
	default:
		tp := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(p.description).Datasource(ds).
			Unit(p.unit).Min(0).Span(p.width).Height(8).
			Legend(common.NewVizLegendOptionsBuilder().
				ShowLegend(true).
				DisplayMode(common.LegendDisplayModeList).
				Placement(common.LegendPlacementBottom))
		if p.stacked {
			tp = tp.FillOpacity(20).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
		}
		for i, t := range p.targets {
			tp = tp.WithTarget(query(t, refID(i)).Range())
		}
		return tp
	}
}

func query(t target, refID string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(t.expr).LegendFormat(t.legend).RefId(refID)
}
