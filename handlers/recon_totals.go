package handlers

import (
	"database/sql"

	"github.com/paygw/paygw/repository"
)

// runTotalView is a run's own totals in one currency (repository.RunTotal), in minor units; fees
// are positive when charged, and net is gross - refunds - fees.
type runTotalView struct {
	Currency      string `json:"currency"`
	PayCount      int    `json:"pay_count"`
	RefundCount   int    `json:"refund_count"`
	GrossFen      int64  `json:"gross_fen"`
	RefundFen     int64  `json:"refund_fen"`
	FeeFen        int64  `json:"fee_fen"`
	FeeLines      int    `json:"fee_lines"`
	NetFen        int64  `json:"net_fen"`
	StatedNetFen  *int64 `json:"stated_net_fen"`
	SummaryFeeFen *int64 `json:"summary_fee_fen"`
}

// runTotalViews shows a run's totals; [] for a run without (one that failed before its bill was
// read, or from before they were kept).
func runTotalViews(totals []repository.RunTotal) []runTotalView {
	out := make([]runTotalView, 0, len(totals))
	for _, t := range totals {
		out = append(out, runTotalView{Currency: t.Currency, PayCount: t.PayCount, RefundCount: t.RefundCount, GrossFen: t.GrossFen,
			RefundFen: t.RefundFen, FeeFen: t.FeeFen, FeeLines: t.FeeLines, NetFen: t.NetFen,
			StatedNetFen:  nullable64(t.StatedNetFen),
			SummaryFeeFen: nullable64(t.SummaryFeeFen)})
	}
	return out
}

func runIDs(runs []repository.ReconRun) []int64 {
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

// nullable64 is v as JSON: null when it is not valid.
func nullable64(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}
