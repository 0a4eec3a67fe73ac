package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

var channelNames = []string{"alipay", "wechatpay", "stripe", "unionpay"}

// world is a gateway, its database and Redis, the fake channel it asks and that notifies it,
// and the query job: everything real but the channels' servers, which the fake plays.
type world struct {
	t       *testing.T
	dsn     string
	db      *repository.DB
	fake    *simulate.Fake
	fakeURL string // where the fake channels answer
	gateway string
	signers map[string]simulate.Signer
	job     *reconcile.Job
	queries []channels.Querier
	bills   map[string]channels.BillDownloader
	applier *apply.Applier
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldBehind(t, "")
}

// newWorldBehind is newWorld with Stripe's API reached through an egress proxy that routes it
// under stripePrefix ("/stripe"; "" for none): channels.stripe.api_base_url carries the prefix,
// and the fake answers Stripe's paths only under it.
func newWorldBehind(t *testing.T, stripePrefix string) *world {
	t.Helper()
	w := &world{t: t}
	dir, man := sandbox.Keys(t)
	// The merchant's private keys are secrets too: every line of their PEM bodies.
	for _, f := range []string{man.Alipay.AppPrivateKeyFile, man.WeChatPay.MerchantPrivateKeyFile} {
		pemText, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(pemText), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				testenv.Secret(t, line)
			}
		}
	}
	cfg, err := config.Load(man.ConfigPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	fakeSrv := httptest.NewUnstartedServer(nil)
	fakeURL := "http://" + fakeSrv.Listener.Addr().String()
	w.fakeURL = fakeURL
	cfg.Channels.Alipay.GatewayURL = fakeURL + "/gateway.do"
	cfg.Channels.WeChatPay.APIBaseURL = fakeURL
	cfg.Channels.Stripe.APIBaseURL = fakeURL + stripePrefix
	cfg.Channels.UnionPay.QueryURL = fakeURL + "/gateway/api/queryTrans.do"
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		t.Fatal(err)
	}
	qs, skipped, err := all.QueriersFromConfig(cfg.Channels, chs, &http.Client{Timeout: 10 * time.Second})
	if err != nil || len(skipped) != 0 || len(qs) != 4 {
		t.Fatalf("queriers: %d built, skipped %v, %v", len(qs), skipped, err)
	}
	w.queries = qs
	dls, skipped, err := all.BillDownloadersFromConfig(cfg.Channels, chs, time.UTC, &http.Client{Timeout: 30 * time.Second})
	if err != nil || len(skipped) != 0 || len(dls) != 4 {
		t.Fatalf("bill downloaders: %d built, skipped %v, %v", len(dls), skipped, err)
	}
	w.bills = map[string]channels.BillDownloader{}
	for _, d := range dls {
		w.bills[d.Name()] = d
	}

	w.dsn = testenv.NewDatabase(t)
	w.db = testenv.Open(t, w.dsn)
	g := testenv.Guard(t)
	log := testenv.Logger(t)
	w.applier = apply.New(w.db, g, 5*time.Second, log)
	svc := orders.New(w.db, g, orders.Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, handlers.RenderCreate, log)
	srv := handlers.New(handlers.Config{BodyLimitBytes: 1 << 20, KeyHeader: "Idempotency-Key"}, w.db, g, svc, w.applier, chs, log)
	gw := httptest.NewServer(srv.Echo())
	t.Cleanup(gw.Close)
	w.gateway = gw.URL

	if w.fake, err = simulate.NewFake(dir, w.gateway); err != nil {
		t.Fatal(err)
	}
	fakeSrv.Config.Handler = w.fake.Handler()
	if stripePrefix != "" {
		mux := http.NewServeMux()
		mux.Handle(stripePrefix+"/", http.StripPrefix(stripePrefix, w.fake.Handler()))
		mux.Handle("/v1/", http.NotFoundHandler()) // Stripe's paths, outside the prefix
		mux.Handle("/", w.fake.Handler())
		fakeSrv.Config.Handler = mux
	}
	fakeSrv.Start()
	t.Cleanup(fakeSrv.Close)
	if w.signers, err = simulate.LoadSigners(dir); err != nil {
		t.Fatal(err)
	}
	w.job = reconcile.New(w.db, w.applier, qs, reconcile.Config{QueryAfter: time.Minute, QueryMaxAge: 72 * time.Hour, QPS: 200}, log)
	return w
}

// in is w for a subtest: its failures end the subtest, not the parent.
func (w *world) in(t *testing.T) *world {
	c := *w
	c.t = t
	return &c
}

// eachChannel runs test once per channel, as a subtest seeing w from it (in).
func (w *world) eachChannel(t *testing.T, test func(t *testing.T, w *world, ch string)) {
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) { test(t, w.in(t), ch) })
	}
}

// order inserts a WAIT_PAY order of fen CNY made a while ago, with an attempt on channel.
func (w *world) order(channel string, fen int64) string {
	w.t.Helper()
	tradeNo := orders.NewTradeNo(time.Now())
	created := time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Millisecond)
	err := w.db.InTx(context.Background(), func(tx *repository.Tx) error {
		if err := tx.InsertOrder(context.Background(), payment.Order{TradeNo: tradeNo, UserID: 1, SKU: "S", Num: 1,
			AmountFen: fen, Currency: "CNY", CreateTime: created}, "", "", ""); err != nil {
			return err
		}
		return tx.InsertAttempt(context.Background(), payment.Attempt{TradeNo: tradeNo, Channel: channel, CreatedTime: created, NextQueryAt: created})
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return tradeNo
}

// attempt records that the buyer was also sent to channel (ref: Stripe's PaymentIntent id), made
// as long ago as the order's first.
func (w *world) attempt(tradeNo, channel, ref string) {
	w.t.Helper()
	created := time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Millisecond)
	err := w.db.InTx(context.Background(), func(tx *repository.Tx) error {
		return tx.InsertAttempt(context.Background(), payment.Attempt{TradeNo: tradeNo, Channel: channel, ChannelRef: ref, CreatedTime: created, NextQueryAt: created})
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// pay makes the fake hold a trade (its notification dropped unless notify).
func (w *world) trade(channel, tradeNo string, fen int64, status string, notify bool) simulate.FakeTrade {
	w.t.Helper()
	tr, err := w.fake.Add(context.Background(), simulate.FakeTrade{Channel: channel, TradeNo: tradeNo, AmountFen: fen, Status: status, DropNotify: !notify})
	if err != nil {
		w.t.Fatal(err)
	}
	return tr
}

// notify delivers the trade's real notification to the gateway, as the channel would late.
func (w *world) notify(tr simulate.FakeTrade) simulate.Reply {
	w.t.Helper()
	m, err := w.signers[tr.Channel].Sign(simulate.Payment{TradeNo: tr.TradeNo, AmountFen: tr.AmountFen, TxnID: tr.TxnID, Time: tr.PaidAt})
	if err != nil {
		w.t.Fatal(err)
	}
	return simulate.Send(context.Background(), http.DefaultClient, simulate.NotifyURL(w.gateway, tr.Channel), m)
}

func (w *world) run(o reconcile.Options) (reconcile.Summary, string) {
	w.t.Helper()
	var out bytes.Buffer
	o.Out = &out
	sum, err := w.job.Run(context.Background(), o)
	if err != nil {
		w.t.Fatalf("run: %v\n%s", err, out.String())
	}
	return sum, out.String()
}

func (w *world) status(tradeNo string) string {
	w.t.Helper()
	o, err := w.db.GetOrder(context.Background(), tradeNo)
	if err != nil {
		w.t.Fatal(err)
	}
	return o.Status
}

func (w *world) count(q string, args ...any) int {
	w.t.Helper()
	return testenv.Count(w.t, w.dsn, q, args...)
}

// A notification the channel never delivered is repaired by the query exactly once; the late
// real notification afterwards is a REPEAT. On every channel.
func TestDroppedNotificationRepairedOnce(t *testing.T) {
	w := newWorld(t)
	w.eachChannel(t, func(t *testing.T, w *world, ch string) {
		tn := w.order(ch, 1999)
		tr := w.trade(ch, tn, 1999, simulate.FakePaid, false)
		for range 2 {
			w.run(reconcile.Options{TradeNo: tn})
		}
		if st := w.status(tn); st != payment.OrderPaid {
			t.Fatalf("order %s after the query, want PAID", st)
		}
		if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify' AND scope = ?`, ch); n != 1 {
			t.Fatalf("records = %d, want 1", n)
		}
		if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND source = 'query' AND notify_id LIKE 'query:%'`, tn); n != 1 {
			t.Fatalf("journal rows from the query = %d, want 1", n)
		}
		if r := w.notify(tr); r.Err != nil || r.Status/100 != 2 && r.Status != http.StatusNoContent {
			t.Fatalf("late notification: %+v", r)
		}
		if n := w.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND source = 'notify' AND outcome = 'REPEAT'`, tn); n != 1 {
			t.Fatalf("late notification journalled as REPEAT %d times, want 1", n)
		}
		if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify' AND scope = ?`, ch); n != 1 {
			t.Fatalf("records after the late notification = %d, want 1", n)
		}
	})
}

// Answers that say "not paid (yet)" change nothing but the attempt's next question; a closed
// trade closes the order.
func TestNotPaidAndClosedAnswers(t *testing.T) {
	w := newWorld(t)
	w.eachChannel(t, func(t *testing.T, w *world, ch string) {
		unknown := w.order(ch, 100) // the fake never heard of it
		pending := w.order(ch, 100)
		w.trade(ch, pending, 100, simulate.FakePending, false)
		closed := w.order(ch, 100)
		tr := w.trade(ch, closed, 100, simulate.FakeClosed, false)
		if ch == "stripe" { // Stripe closes by the PaymentIntent retrieved by id only
			w.attempt(closed, ch, tr.TxnID)
		}
		for _, tn := range []string{unknown, pending, closed} {
			w.run(reconcile.Options{TradeNo: tn})
		}
		for _, tn := range []string{unknown, pending} {
			if st := w.status(tn); st != payment.OrderWaitPay {
				t.Fatalf("%s is %s after a not-paid answer", tn, st)
			}
			if n := w.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND query_count = 1 AND last_answer = 'NOT_PAID' AND next_query_at > NOW(3)`, tn); n != 1 {
				t.Fatalf("attempt of %s not marked asked, NOT_PAID, asked again later", tn)
			}
		}
		// UnionPay's query reports a failed consume, which is final for that orderId and
		// txnTime only: the buyer may pay again, so the order is left for its own timeout.
		want := payment.OrderClosed
		if ch == "unionpay" {
			want = payment.OrderWaitPay
		}
		if st := w.status(closed); st != want {
			t.Fatalf("closed trade: order %s, want %s", st, want)
		}
	})
}

// Two runs at once and the notifications of the same orders: each order PAID once, one record.
func TestConcurrentRunsAndNotifications(t *testing.T) {
	w := newWorld(t)
	var trades []simulate.FakeTrade
	for i := range 12 {
		ch := channelNames[i%4]
		tn := w.order(ch, int64(100+i))
		trades = append(trades, w.trade(ch, tn, int64(100+i), simulate.FakePaid, false))
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.job.Run(context.Background(), reconcile.Options{OlderThan: time.Second}); err != nil {
				t.Error(err)
			}
		}()
	}
	for _, tr := range trades {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.notify(tr) // a retry reply is fine: the query or the other delivery applied it
		}()
	}
	wg.Wait()
	for _, tr := range trades {
		if st := w.status(tr.TradeNo); st != payment.OrderPaid {
			t.Fatalf("%s %s is %s", tr.Channel, tr.TradeNo, st)
		}
		if n := w.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify' AND JSON_VALUE(result_json, '$.trade_no') = ?`, tr.TradeNo); n != 1 {
			t.Fatalf("%s: %d records, want 1", tr.TradeNo, n)
		}
	}
}

// The lease: two replicas run the job every interval; each order is asked once per interval, not
// once per replica.
func TestLeaseOneReplicaAtATime(t *testing.T) {
	w := newWorld(t)
	var tns []string
	for _, ch := range channelNames {
		tn := w.order(ch, 100)
		w.trade(ch, tn, 100, simulate.FakePending, false) // asked, then backed off for a minute
		tns = append(tns, tn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, holder := range []string{"replica-a", "replica-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.job.Serve(ctx, 100*time.Millisecond, holder)
		}()
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := w.count(`SELECT COUNT(*) FROM payment_attempt WHERE query_count > 0`); n < len(tns) {
			return fmt.Errorf("the runners asked %d of %d orders", n, len(tns))
		}
		return nil
	})
	// Five more intervals, counted by the lease's renewals: a replica without the lease ticks in
	// each of them, and would ask now.
	leaseEnds := func() int {
		return w.count(`SELECT CAST(UNIX_TIMESTAMP(expires_at) * 1000 AS SIGNED) FROM job_lease WHERE name = ?`, lease.ReconcileQuery)
	}
	asked := leaseEnds()
	testenv.Eventually(t, 10*time.Second, func() error {
		if renewed := leaseEnds() - asked; renewed < 500 {
			return fmt.Errorf("the lease was renewed %d ms past the asks, want 5 intervals (500 ms)", renewed)
		}
		return nil
	})
	cancel()
	wg.Wait()
	for i, tn := range tns {
		if n := w.fake.Asked(channelNames[i], tn); n != 1 {
			t.Fatalf("%s %s asked %d times, want once", channelNames[i], tn, n)
		}
	}
}

// An answer that does not verify (or a channel that answers 500) changes nothing; the run goes on
// and says so.
func TestUnverifiedAnswerChangesNothing(t *testing.T) {
	w := newWorld(t)
	w.eachChannel(t, func(t *testing.T, w *world, ch string) {
		tn := w.order(ch, 1999)
		w.trade(ch, tn, 1999, simulate.FakePaid, false)
		w.fake.Break(ch, true)
		defer w.fake.Break(ch, false)
		sum, out := w.run(reconcile.Options{TradeNo: tn})
		if st := w.status(tn); st != payment.OrderWaitPay {
			t.Fatalf("order %s after a broken answer", st)
		}
		want := "UNVERIFIED"
		if ch == "stripe" { // Stripe's answers come over its API, not signed: a 500 is a failure
			want = "FAILED"
		}
		if n := w.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND last_answer = ?`, tn, want); n != 1 || sum.Unverified+sum.Failed != 1 {
			t.Fatalf("attempt not marked %s (summary %+v):\n%s", want, sum, out)
		}
		w.fake.Break(ch, false)
		w.run(reconcile.Options{TradeNo: tn})
		if st := w.status(tn); st != payment.OrderPaid {
			t.Fatalf("order %s once the channel answers properly, want PAID", st)
		}
	})
}
