package main

import (
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// serve's daily bills: nothing before reconcile.bill_at; after it, yesterday's bill of each
// channel runs once (the WeChat payment whose notification never came ends PAID), not again at
// the next look; and not at all while another replica holds the lease.
func TestDailyBills(t *testing.T) {
	dir := t.TempDir()
	man, err := simulate.WriteKeys(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fake, err := simulate.NewFake(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	fakeSrv := httptest.NewServer(fake.Handler())
	defer fakeSrv.Close()
	channelsYAML, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.ReplaceAll(string(channelsYAML), "http://"+simulate.FakeAddr, fakeSrv.URL)
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn, extra: extra})
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	log := zerolog.New(io.Discard)
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g := guard.New(guardOptions(cfg.Redis, nil), log)
	defer g.Close()
	g.Suspend()
	applier := apply.New(db, g, cfg.Idempotency.RedisTTL, log)
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := billDownloaders(cfg, chs, log)
	if err != nil || len(ds) != 4 {
		t.Fatalf("downloaders: %d, %v", len(ds), err)
	}
	job := reconcile.New(db, applier, nil, reconcileConfig(cfg), log)

	cst := time.FixedZone("CST", 8*3600)
	y, m, d := time.Now().In(cst).AddDate(0, 0, -3).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, cst)
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PDAILY1', 1, 'S', 1, 2500, 'CNY', 'WAIT_PAY', ?, ?)`, day.Add(9*time.Hour).UTC(), day.Add(9*time.Hour).UTC())
	if _, err := fake.Add(ctx, simulate.FakeTrade{Channel: "wechatpay", TradeNo: "PDAILY1", AmountFen: 2500,
		Status: simulate.FakePaid, PaidAt: day.Add(12 * time.Hour), DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	utc := time.UTC
	look := func(now time.Time, holder string) {
		dailyBills{db: db, job: job, ds: ds, holder: holder, hour: 10, minute: 30, stripeDay: utc,
			grace: cfg.Reconcile.LocalOnlyGrace, ids: cfg.Channels, log: log}.once(ctx, now)
	}
	runs := func() int {
		return testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE finished_at IS NOT NULL`)
	}
	next := day.AddDate(0, 0, 1) // the day after the bill's, Beijing time

	look(next.Add(10*time.Hour+29*time.Minute), "a") // 10:29 in Beijing is 02:29 UTC: before bill_at everywhere
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run`); n != 0 {
		t.Fatalf("runs before bill_at: %d", n)
	}

	// Another replica holds the lease: this one runs nothing.
	if err := db.EnsureLease(ctx, reconcile.BillLease); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.TakeLease(ctx, reconcile.BillLease, "b", time.Hour); err != nil || !ok {
		t.Fatalf("lease for b: %v %v", ok, err)
	}
	at := next.Add(10*time.Hour + 31*time.Minute)
	look(at, "a")
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run`); n != 0 {
		t.Fatalf("runs without the lease: %d", n)
	}
	if err := db.ReleaseLease(ctx, reconcile.BillLease, "b"); err != nil {
		t.Fatal(err)
	}

	// 10:31 in Beijing: the three Chinese channels' yesterday; Stripe's 10:30 UTC is not yet.
	look(at, "a")
	if n := runs(); n != 3 {
		t.Fatalf("finished runs after bill_at: %d, want 3 (alipay, wechatpay, unionpay)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE channel = 'wechatpay' AND bill_date = ? AND line_count = 1`, day.Format(time.DateOnly)); n != 1 {
		t.Fatal("no finished wechatpay run of the day with its one line")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PDAILY1' AND status = 'PAID'`); n != 1 {
		t.Fatal("the CHANNEL_ONLY order was not repaired")
	}
	started := testenv.Count(t, dsn, `SELECT CAST(UNIX_TIMESTAMP(started_at) * 1000 AS SIGNED) FROM recon_run WHERE channel = 'wechatpay'`)

	// The next look: done days are not run again; Stripe's day is due now (10:31 UTC).
	look(at.Add(8*time.Hour), "a")
	if n := runs(); n != 4 {
		t.Fatalf("finished runs at the next look: %d, want 4", n)
	}
	if again := testenv.Count(t, dsn, `SELECT CAST(UNIX_TIMESTAMP(started_at) * 1000 AS SIGNED) FROM recon_run WHERE channel = 'wechatpay'`); again != started {
		t.Fatal("a finished day ran again")
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM job_lease WHERE name = ? AND expires_at < NOW(3)`, reconcile.BillLease); n != 1 {
		t.Fatal("the lease was not given up after the runs")
	}
}
