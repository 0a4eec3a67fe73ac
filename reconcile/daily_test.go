package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/simulate"
)

// serve's daily bills: nothing before reconcile.bill_at; after it, yesterday's bill of each
// channel runs once (the WeChat payment whose notification never came ends PAID), not again at
// the next look; and not at all while another replica holds the lease.
func TestDailyBills(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cst := bills.ChinaTime
	y, m, d := time.Now().In(cst).AddDate(0, 0, -3).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, cst)
	testenv.Exec(t, w.dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PDAILY1', 1, 'S', 1, 2500, 'CNY', 'WAIT_PAY', ?, ?)`, day.Add(9*time.Hour).UTC(), day.Add(9*time.Hour).UTC())
	if _, err := w.fake.Add(ctx, simulate.FakeTrade{Channel: "wechatpay", TradeNo: "PDAILY1", AmountFen: 2500,
		Status: simulate.FakePaid, PaidAt: day.Add(12 * time.Hour), DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	var ds []channels.BillDownloader
	for _, name := range channelNames {
		ds = append(ds, w.bills[name])
	}
	zone := func(channel string) *time.Location {
		if channel == "stripe" {
			return time.UTC // reconcile.stripe_timezone
		}
		return cst
	}
	ids := map[string]reconcile.Identity{"wechatpay": {Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}}}
	look := func(now time.Time, holder string) {
		w.job.DailyBills(ds, reconcile.DailyConfig{Hour: 10, Minute: 30, Zone: zone, LocalOnlyGrace: 48 * time.Hour,
			Identities: ids, Holder: holder}).Once(ctx, now)
	}
	runs := func() int { return w.count(`SELECT COUNT(*) FROM recon_run WHERE finished_at IS NOT NULL`) }
	next := day.AddDate(0, 0, 1) // the day after the bill's, Beijing time

	look(next.Add(10*time.Hour+29*time.Minute), "a") // 10:29 in Beijing is 02:29 UTC: before bill_at everywhere
	if n := w.count(`SELECT COUNT(*) FROM recon_run`); n != 0 {
		t.Fatalf("runs before bill_at: %d", n)
	}

	// Another replica holds the lease: this one runs nothing.
	if err := w.db.EnsureLease(ctx, lease.ReconcileBill); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.db.TakeLease(ctx, lease.ReconcileBill, "b", time.Hour); err != nil || !ok {
		t.Fatalf("lease for b: %v %v", ok, err)
	}
	at := next.Add(10*time.Hour + 31*time.Minute)
	look(at, "a")
	if n := w.count(`SELECT COUNT(*) FROM recon_run`); n != 0 {
		t.Fatalf("runs without the lease: %d", n)
	}
	if err := w.db.ReleaseLease(ctx, lease.ReconcileBill, "b"); err != nil {
		t.Fatal(err)
	}

	// 10:31 in Beijing: the three Chinese channels' yesterday; Stripe's 10:30 UTC is not yet.
	look(at, "a")
	if n := runs(); n != 3 {
		t.Fatalf("finished runs after bill_at: %d, want 3 (alipay, wechatpay, unionpay)", n)
	}
	if n := w.count(`SELECT COUNT(*) FROM recon_run WHERE channel = 'wechatpay' AND bill_date = ? AND line_count = 1`, day.Format(time.DateOnly)); n != 1 {
		t.Fatal("no finished wechatpay run of the day with its one line")
	}
	if s := w.status("PDAILY1"); s != "PAID" {
		t.Fatalf("the CHANNEL_ONLY order is %s, want PAID", s)
	}
	started := w.count(`SELECT CAST(UNIX_TIMESTAMP(started_at) * 1000 AS SIGNED) FROM recon_run WHERE channel = 'wechatpay'`)

	// The next look: done days are not run again; Stripe's day is due now (10:31 UTC).
	look(at.Add(8*time.Hour), "a")
	if n := runs(); n != 4 {
		t.Fatalf("finished runs at the next look: %d, want 4", n)
	}
	if again := w.count(`SELECT CAST(UNIX_TIMESTAMP(started_at) * 1000 AS SIGNED) FROM recon_run WHERE channel = 'wechatpay'`); again != started {
		t.Fatal("a finished day ran again")
	}
	if n := w.count(`SELECT COUNT(*) FROM job_lease WHERE name = ? AND expires_at < NOW(3)`, lease.ReconcileBill); n != 1 {
		t.Fatal("the lease was not given up after the runs")
	}
}
