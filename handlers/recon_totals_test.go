package handlers

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/paygw/paygw/repository"
)

// A run's totals are on it in the listing (checked against api/openapi.yaml like every answer),
// per currency, null where the bill states nothing; a run without any shows [].
func TestReconciliationTotals(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	withTotals, err := h.db.StartRun(ctx, "stripe", repository.SourceChannel, day, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.db.PutRunTotals(ctx, withTotals, []repository.RunTotal{
		{Currency: "JPY", PayCount: 1, GrossFen: 1000, FeeFen: 36, FeeLines: 1, NetFen: 964, StatedNetFen: sql.NullInt64{Int64: 964, Valid: true}},
		{Currency: "USD", PayCount: 2, RefundCount: 1, GrossFen: 3000, RefundFen: 250, FeeFen: 147, FeeLines: 3, NetFen: 2603,
			SummaryFeeFen: sql.NullInt64{Int64: 150, Valid: true}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.db.CompleteRun(ctx, withTotals, repository.RunTotals{Lines: 4, Trusted: true, Counts: map[string]int{"FEE_MISMATCH": 1}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.StartRun(ctx, "stripe", repository.SourceCSV, day, time.Now()); err != nil {
		t.Fatal(err)
	}

	r := h.do("GET", "/v1/reconciliations?channel=stripe&date=2026-11-29", testToken, nil, "")
	var runs struct {
		Runs []struct {
			ID     int64            `json:"id"`
			Totals []map[string]any `json:"bill_totals"`
		} `json:"runs"`
	}
	if r.code != 200 || json.Unmarshal([]byte(r.body), &runs) != nil || len(runs.Runs) != 2 {
		t.Fatalf("runs: %d %s", r.code, r.body)
	}
	for _, run := range runs.Runs {
		if run.ID != withTotals {
			if run.Totals == nil || len(run.Totals) != 0 {
				t.Errorf("run %d without totals: %v, want []", run.ID, run.Totals)
			}
			continue
		}
		want := []map[string]any{
			{"currency": "JPY", "pay_count": 1.0, "refund_count": 0.0, "gross_fen": 1000.0, "refund_fen": 0.0, "fee_fen": 36.0,
				"fee_lines": 1.0, "net_fen": 964.0, "stated_net_fen": 964.0, "summary_fee_fen": nil},
			{"currency": "USD", "pay_count": 2.0, "refund_count": 1.0, "gross_fen": 3000.0, "refund_fen": 250.0, "fee_fen": 147.0,
				"fee_lines": 3.0, "net_fen": 2603.0, "stated_net_fen": nil, "summary_fee_fen": 150.0},
		}
		if !reflect.DeepEqual(run.Totals, want) {
			t.Errorf("totals\n got %v\nwant %v", run.Totals, want)
		}
	}
}
