package handlers

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/paygw/paygw/repository"
)

func TestReconciliationsAPI(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var runID int64
	for _, ch := range []string{"alipay", "wechatpay"} {
		id, err := h.db.StartRun(ctx, ch, repository.SourceChannel, day, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		runID = id
		for i := range 150 {
			class := "UNKNOWN_ORDER"
			if i%2 == 0 {
				class = "LOCAL_ONLY"
			}
			if err := h.db.PutDiscrepancy(ctx, repository.Discrepancy{RunID: id, Channel: ch, BillDate: day, LineKey: fmt.Sprint("k", i),
				Class: class, TradeNo: fmt.Sprint("T", i), BillAmountFen: sql.NullInt64{Int64: 100, Valid: true}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.db.CompleteRun(ctx, id, repository.RunTotals{Lines: 150, Trusted: true,
			Counts: map[string]int{"UNKNOWN_ORDER": 75, "LOCAL_ONLY": 75}}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}

	r := h.do("GET", "/v1/reconciliations?channel=wechatpay&date=2026-11-30", testToken, nil, "")
	var runs struct {
		Runs []struct {
			ID       int64          `json:"id"`
			Channel  string         `json:"channel"`
			BillDate string         `json:"bill_date"`
			Lines    int            `json:"lines"`
			Counts   map[string]int `json:"counts"`
			Trusted  bool           `json:"trusted"`
			Finished *string        `json:"finished_at"`
		} `json:"runs"`
	}
	if r.code != 200 || json.Unmarshal([]byte(r.body), &runs) != nil || len(runs.Runs) != 1 {
		t.Fatalf("runs: %d %s", r.code, r.body)
	}
	if got := runs.Runs[0]; got.ID != runID || got.Channel != "wechatpay" || got.BillDate != "2026-11-30" || got.Lines != 150 ||
		got.Counts["LOCAL_ONLY"] != 75 || !got.Trusted || got.Finished == nil {
		t.Fatalf("run %+v", got)
	}
	if r := h.do("GET", "/v1/reconciliations", testToken, nil, ""); r.code != 200 || json.Unmarshal([]byte(r.body), &runs) != nil || len(runs.Runs) != 2 {
		t.Fatalf("all runs: %d %s", r.code, r.body)
	}

	type page struct {
		Discrepancies []struct {
			ID    int64  `json:"id"`
			Class string `json:"class"`
		} `json:"discrepancies"`
		NextCursor string `json:"next_cursor"`
	}
	seen := map[int64]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		r := h.do("GET", fmt.Sprintf("/v1/reconciliations/%d/discrepancies?class=LOCAL_ONLY&cursor=%s", runID, cursor), testToken, nil, "")
		var p page
		if r.code != 200 || json.Unmarshal([]byte(r.body), &p) != nil {
			t.Fatalf("discrepancies: %d %s", r.code, r.body)
		}
		for _, d := range p.Discrepancies {
			if d.Class != "LOCAL_ONLY" || seen[d.ID] {
				t.Fatalf("row %+v: wrong class or seen twice", d)
			}
			seen[d.ID] = true
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 75 {
		t.Fatalf("pages hold %d LOCAL_ONLY rows, want 75", len(seen))
	}
	h.wantStatuses(t, "GET", testToken, "", map[string]pathCode{
		"unknown run": {"/v1/reconciliations/999999/discrepancies", 404},
		"bad run id":  {"/v1/reconciliations/x/discrepancies", 404},
		"bad date":    {"/v1/reconciliations?date=30-11-2026", 400},
		"bad cursor":  {fmt.Sprintf("/v1/reconciliations/%d/discrepancies?cursor=x", runID), 400},
	})
	h.wantStatuses(t, "GET", "", "", map[string]pathCode{"no token": {"/v1/reconciliations", 401}})
}
