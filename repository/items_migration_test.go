package repository_test

import (
	"context"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/paygw/paygw/internal/testenv"
	migrations "github.com/paygw/paygw/sql"
)

// Migration 00021 makes the rows kept so far items: one per line key of a day, as its latest row
// saw it, repaired when that row's repair settled it, gone when the day's latest trusted run
// no longer found it; and it goes back down.
func TestMigration21MakesItems(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	x := rawDB(t, dsn)
	ctx := context.Background()
	p, err := goose.NewProvider(goose.DialectMySQL, x, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO recon_run (id, channel, bill_date, source, status, started_at, trusted) VALUES
			(1, 'alipay', '2026-11-01', 'channel', 'complete', NOW(), 1), (2, 'alipay', '2026-11-01', 'channel', 'complete', NOW(), 1)`,
		`INSERT INTO recon_discrepancy (run_id, channel, bill_date, line_key, class, repair) VALUES
			(1, 'alipay', '2026-11-01', 'pay:A', 'CHANNEL_ONLY', 'APPLIED'),
			(1, 'alipay', '2026-11-01', 'pay:B', 'UNKNOWN_ORDER', ''),
			(2, 'alipay', '2026-11-01', 'pay:B', 'UNKNOWN_ORDER', ''),
			(1, 'alipay', '2026-11-01', 'pay:C', 'UNKNOWN_ORDER', '')`,
	} {
		if _, err := x.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pay:A": "repaired", "pay:B": "open", "pay:C": "gone"}
	for key, status := range want {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_item WHERE line_key = ? AND status = ? AND first_run_id = 1`, key, status); n != 1 {
			t.Errorf("%s: want one item, %s, first found by run 1", key, status)
		}
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_discrepancy d JOIN recon_item i ON i.id = d.item_id AND i.line_key = d.line_key`); n != 4 {
		t.Fatalf("rows linked to their item: %d, want 4", n)
	}
	if _, err := p.DownTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_discrepancy`); n != 4 {
		t.Fatalf("rows after going down: %d, want 4", n)
	}
}
