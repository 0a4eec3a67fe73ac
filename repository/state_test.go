package repository_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// scrapeStored reads the stored-state gauges as a serving paygw exports them: a registry whose
// collector reads db, expecting both jobs of alipay and wechatpay.
func scrapeStored(t *testing.T, db *repository.DB) string {
	t.Helper()
	m := metrics.New("test")
	m.ReadStoredState(db)
	m.Channels([]string{"alipay", "wechatpay"})
	m.ExpectReconcile(metrics.JobBill, []string{"alipay", "wechatpay"})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		for _, name := range []string{"paygw_anomalies_open", "paygw_reconcile_discrepancies",
			"paygw_reconcile_last_success_timestamp_seconds", "paygw_stored_state_up", "paygw_events_unsequenced"} {
			if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// withoutZeros drops the zero-valued open anomalies and discrepancies from a scrape and counts
// them: the gauges start every kind, and every class of each expected channel, at zero.
func withoutZeros(scrape string) (string, int) {
	var kept []string
	zeros := 0
	for _, l := range strings.Split(scrape, "\n") {
		if strings.HasSuffix(l, " 0") && (strings.HasPrefix(l, "paygw_anomalies_open{") || strings.HasPrefix(l, "paygw_reconcile_discrepancies{")) {
			zeros++
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n"), zeros
}

// Rows in the database are what the gauges report, and a new process over the same database (a
// restart) reports the same: nothing lives in one replica's memory.
func TestStoredStateGauges(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	finished := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	// Anomalies: two open AMOUNT_MISMATCH, one resolved DUPLICATE_PAYMENT.
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		for i, kind := range []payment.Outcome{payment.OutcomeAmountMismatch, payment.OutcomeAmountMismatch, payment.OutcomeDuplicatePayment} {
			a := payment.Anomaly{Kind: kind, TradeNo: fmt.Sprintf("T%d", i), Channel: "alipay", ChannelTxnID: fmt.Sprintf("X%d", i),
				AmountFen: 100, Currency: "CNY", CreatedTime: finished}
			if err := tx.FlagAnomaly(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dups, err := db.ListAnomalies(ctx, string(payment.OutcomeDuplicatePayment), true, 0, 10)
	if err != nil || len(dups) != 1 {
		t.Fatalf("ListAnomalies: %v %v", dups, err)
	}
	if _, err := db.ResolveAnomaly(ctx, dups[0].ID, "ops", "refunded", finished); err != nil {
		t.Fatal(err)
	}

	// alipay's day: a first run superseded by a second; the second's rows are the day's result,
	// of which the applied CHANNEL_ONLY is settled.
	put := func(run int64, key, class, repair string) {
		t.Helper()
		d := repository.Discrepancy{RunID: run, Channel: "alipay", BillDate: day, LineKey: key, Class: class, Repair: repair}
		if err := db.PutDiscrepancy(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(channel string) int64 {
		t.Helper()
		id, err := db.StartRun(ctx, channel, repository.SourceChannel, day, finished.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := complete("alipay")
	put(first, "a", "LOCAL_ONLY", "")
	if err := db.CompleteRun(ctx, first, repository.RunTotals{Trusted: true}, finished.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	second := complete("alipay")
	put(second, "b", "LOCAL_ONLY", "")
	put(second, "c", "AMOUNT_MISMATCH", "")
	put(second, "d", "CHANNEL_ONLY", string(payment.OutcomeApplied))
	put(second, "e", "CHANNEL_ONLY", "")
	put(second, "f", "PENDING", "")
	if err := db.CompleteRun(ctx, second, repository.RunTotals{Trusted: true}, finished); err != nil {
		t.Fatal(err)
	}
	// wechatpay's run is still running: neither its rows nor a success count.
	running := complete("wechatpay")
	d := repository.Discrepancy{RunID: running, Channel: "wechatpay", BillDate: day, LineKey: "w", Class: "LOCAL_ONLY"}
	if err := db.PutDiscrepancy(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordQuerySuccess(ctx, "wechatpay", finished.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordQuerySuccess(ctx, "wechatpay", finished); err != nil { // older: kept the newer
		t.Fatal(err)
	}

	ts := func(t time.Time) string { return strconv.FormatFloat(float64(t.Unix()), 'g', -1, 64) }
	want := strings.Join([]string{
		`paygw_anomalies_open{kind="AMOUNT_MISMATCH"} 2`,
		`paygw_events_unsequenced 3`, // the anomalies' events: no sequencer ran
		`paygw_reconcile_discrepancies{channel="alipay",class="AMOUNT_MISMATCH"} 1`,
		`paygw_reconcile_discrepancies{channel="alipay",class="CHANNEL_ONLY"} 1`,
		`paygw_reconcile_discrepancies{channel="alipay",class="LOCAL_ONLY"} 1`,
		`paygw_reconcile_discrepancies{channel="alipay",class="PENDING"} 1`,
		`paygw_reconcile_last_success_timestamp_seconds{channel="alipay",recon_job="bill"} ` + ts(finished),
		`paygw_reconcile_last_success_timestamp_seconds{channel="alipay",recon_job="query"} 0`,
		`paygw_reconcile_last_success_timestamp_seconds{channel="wechatpay",recon_job="bill"} 0`,
		`paygw_reconcile_last_success_timestamp_seconds{channel="wechatpay",recon_job="query"} ` + ts(finished.Add(time.Hour)),
		`paygw_stored_state_up 1`,
	}, "\n")
	// Zeros: 3 of the 4 anomaly kinds, and 2 channels' classes but alipay's 4 open ones.
	wantZeros := len(metrics.AnomalyKinds()) - 1 + 2*len(metrics.DiscrepancyClasses) - 4
	if got, zeros := withoutZeros(scrapeStored(t, db)); got != want || zeros != wantZeros {
		t.Fatalf("scrape:\n%s\n(%d zeros) want:\n%s\n(%d zeros)", got, zeros, want, wantZeros)
	}
	// A restart: a new connection pool and a new registry over the same database.
	if got, zeros := withoutZeros(scrapeStored(t, testenv.Open(t, dsn))); got != want || zeros != wantZeros {
		t.Fatalf("after a restart:\n%s\n(%d zeros) want:\n%s", got, zeros, want)
	}
	// A database that cannot be read: no stale values, and up says so.
	gone := testenv.Open(t, dsn)
	gone.Close()
	if got := scrapeStored(t, gone); got != `paygw_stored_state_up 0` {
		t.Fatalf("closed database:\n%s", got)
	}
}
