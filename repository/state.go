package repository

import (
	"context"
	"time"

	"github.com/paygw/paygw/metrics"
)

var _ metrics.StateReader = (*DB)(nil)

// StoredState reads what the stored-state gauges show (metrics.StateReader):
//   - open anomalies: rows no person has resolved yet, by kind;
//   - open discrepancies: the rows of each day's result (the latest complete run of each
//     channel, source and bill day) that no repair settled (a CHANNEL_ONLY applied, a
//     REFUND_CHANNEL_ONLY refunded), by channel and class; PENDING rows are counted;
//   - the last successful run of each reconciliation job per channel: a complete bill run
//     (recon_run), a query run that could ask the channel (recon_query_success);
//   - the outbox events committed but not numbered yet.
func (db *DB) StoredState(ctx context.Context) (metrics.State, error) {
	st := metrics.State{
		OpenAnomalies: map[string]int{},
		Discrepancies: map[[2]string]int{},
		LastSuccess:   map[[2]string]time.Time{},
		Reopened:      map[string]int{},
		DaysReopened:  map[string]int{},
	}
	var anomalies []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	const openAnomalies = `SELECT kind, COUNT(*) AS n FROM anomaly WHERE resolved_at IS NULL GROUP BY kind`
	if err := db.x.SelectContext(ctx, &anomalies, openAnomalies); err != nil {
		return st, err
	}
	for _, a := range anomalies {
		st.OpenAnomalies[a.Kind] = a.N
	}
	var discrepancies []struct {
		Channel string `db:"channel"`
		Class   string `db:"class"`
		N       int    `db:"n"`
	}
	// Open items: not repaired, resolved or gone (PENDING included).
	const open = `SELECT channel, class, COUNT(*) AS n FROM recon_item WHERE status = ? GROUP BY channel, class`
	if err := db.x.SelectContext(ctx, &discrepancies, open, StatusOpen); err != nil {
		return st, err
	}
	for _, d := range discrepancies {
		st.Discrepancies[[2]string{d.Channel, d.Class}] = d.N
	}
	var last []struct {
		Job     string    `db:"job"`
		Channel string    `db:"channel"`
		At      time.Time `db:"at"`
	}
	const lastSuccess = `SELECT ? AS job, channel, MAX(finished_at) AS at FROM recon_run
			WHERE status = ? AND finished_at IS NOT NULL GROUP BY channel
		UNION ALL
		SELECT ? AS job, channel, succeeded_at AS at FROM recon_query_success`
	if err := db.x.SelectContext(ctx, &last, lastSuccess, metrics.JobBill, RunComplete, metrics.JobQuery); err != nil {
		return st, err
	}
	for _, l := range last {
		st.LastSuccess[[2]string{l.Job, l.Channel}] = l.At
	}
	var reopened []struct {
		Channel string `db:"channel"`
		Times   int    `db:"times"`
		Days    int    `db:"days"`
	}
	const reopenedQ = `SELECT channel, SUM(reopen_count) AS times, SUM(status = ?) AS days FROM recon_signoff GROUP BY channel`
	if err := db.x.SelectContext(ctx, &reopened, reopenedQ, DayReopened); err != nil {
		return st, err
	}
	for _, r := range reopened {
		st.Reopened[r.Channel], st.DaysReopened[r.Channel] = r.Times, r.Days
	}
	const unsequenced = `SELECT COUNT(*) FROM event WHERE seq IS NULL`
	if err := db.x.GetContext(ctx, &st.EventsUnsequenced, unsequenced); err != nil {
		return st, err
	}
	return st, nil
}

// RecordQuerySuccess notes that the reconciliation query succeeded for channel at t; an earlier
// t than the one stored changes nothing.
func (db *DB) RecordQuerySuccess(ctx context.Context, channel string, t time.Time) error {
	const q = `INSERT INTO recon_query_success (channel, succeeded_at) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE succeeded_at = GREATEST(succeeded_at, VALUES(succeeded_at))`
	_, err := db.x.ExecContext(ctx, q, channel, t.UTC())
	return err
}
