package repository

import (
	"context"
	"database/sql"
	"strings"
)

// RunTotal is a bill run's own totals in one currency of its lines (recon_run_total): what the
// lines add up to, and what the bill states of itself. Fees are in paygw's sign, positive when
// charged; NetFen is GrossFen - RefundFen - FeeFen.
type RunTotal struct {
	RunID         int64         `db:"run_id"`
	Currency      string        `db:"currency"`
	PayCount      int           `db:"pay_count"`
	RefundCount   int           `db:"refund_count"`
	GrossFen      int64         `db:"gross_fen"`
	RefundFen     int64         `db:"refund_fen"`
	FeeFen        int64         `db:"fee_fen"`
	FeeLines      int           `db:"fee_lines"`       // lines that state a fee: 0 when the bill states none
	NetFen        int64         `db:"net_fen"`         // GrossFen - RefundFen - FeeFen
	StatedNetFen  sql.NullInt64 `db:"stated_net_fen"`  // the lines' own net, summed, when each states one
	SummaryFeeFen sql.NullInt64 `db:"summary_fee_fen"` // the bill summary's fee total
}

const runTotalColumns = `run_id, currency, pay_count, refund_count, gross_fen, refund_fen, fee_fen, fee_lines, net_fen,
	stated_net_fen, summary_fee_fen`

// PutRunTotals stores a run's totals, one row per currency, in place of any it had.
func (db *DB) PutRunTotals(ctx context.Context, runID int64, totals []RunTotal) error {
	return db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.x.ExecContext(ctx, `DELETE FROM recon_run_total WHERE run_id = ?`, runID); err != nil {
			return err
		}
		if len(totals) == 0 {
			return nil
		}
		var b strings.Builder
		b.WriteString(`INSERT INTO recon_run_total (` + runTotalColumns + `) VALUES `)
		args := make([]any, 0, len(totals)*11)
		for i, t := range totals {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, runID, t.Currency, t.PayCount, t.RefundCount, t.GrossFen, t.RefundFen, t.FeeFen, t.FeeLines,
				t.NetFen, t.StatedNetFen, t.SummaryFeeFen)
		}
		_, err := tx.x.ExecContext(ctx, b.String(), args...)
		return err
	})
}

// RunTotals reads the totals of the runs runIDs: per run, its currencies in order. A run with
// none (one that failed before its bill was read, or from before migration 00022) is absent.
func (db *DB) RunTotals(ctx context.Context, runIDs []int64) (map[int64][]RunTotal, error) {
	out := map[int64][]RunTotal{}
	if len(runIDs) == 0 {
		return out, nil
	}
	const q = `SELECT ` + runTotalColumns + ` FROM recon_run_total WHERE run_id IN (?) ORDER BY run_id, currency`
	var rows []RunTotal
	if err := selectIn(ctx, db.x, &rows, q, runIDs); err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], r)
	}
	return out, nil
}
