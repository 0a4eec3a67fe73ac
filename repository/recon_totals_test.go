package repository_test

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// A run's totals go in per currency and come back per run; putting them again replaces them.
func TestRunTotals(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	run := func() int64 {
		t.Helper()
		id, err := db.StartRun(ctx, "stripe", repository.SourceChannel, day, day)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first, second, none := run(), run(), run()
	usd := repository.RunTotal{Currency: "USD", PayCount: 2, RefundCount: 1, GrossFen: 2000, RefundFen: 250, FeeFen: 59, FeeLines: 3,
		NetFen: 1691, StatedNetFen: sql.NullInt64{Int64: 1691, Valid: true}}
	jpy := repository.RunTotal{Currency: "JPY", PayCount: 1, GrossFen: 1000, FeeFen: 36, FeeLines: 1, NetFen: 964,
		SummaryFeeFen: sql.NullInt64{Int64: 36, Valid: true}}
	if err := db.PutRunTotals(ctx, first, []repository.RunTotal{usd}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRunTotals(ctx, first, []repository.RunTotal{usd, jpy}); err != nil { // replaces
		t.Fatal(err)
	}
	cny := repository.RunTotal{Currency: "CNY", PayCount: 1, GrossFen: 1, NetFen: 1}
	if err := db.PutRunTotals(ctx, second, []repository.RunTotal{cny}); err != nil {
		t.Fatal(err)
	}
	got, err := db.RunTotals(ctx, []int64{first, second, none})
	if err != nil {
		t.Fatal(err)
	}
	usd.RunID, jpy.RunID, cny.RunID = first, first, second
	want := map[int64][]repository.RunTotal{first: {jpy, usd}, second: {cny}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RunTotals\n got %+v\nwant %+v", got, want)
	}
	if got, err := db.RunTotals(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("RunTotals(nil) = %v, %v", got, err)
	}
}
