package history

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// world is the real gateway as `paygw serve` wires it, on one database of its own: the channels'
// verifiers built from the sandbox's channels: block, the handlers (echo) over loopback, the
// Applier, the reconcile job asking the fake channel of `paygw simulate serve` (simulate.Fake)
// with the real queriers, bills read by the real readers, MariaDB and Redis.
type world struct {
	t       testing.TB
	dsn     string
	db      *repository.DB
	sqlDB   *sql.DB // the oracle's reads
	fake    *simulate.Fake
	chs     []channels.Channel
	qs      []channels.Querier
	signers Signers
	client  *http.Client
	token   string

	mu       sync.RWMutex // a step holds it to read; a restart takes it to swap the process
	proc     *process
	prefixes []string // every Redis prefix used, emptied at the end

	execs  atomic.Uint64 // executions so far: each gets its own days and ids
	anchor time.Time     // the base of execution 0

	opMu    sync.Mutex
	ops     map[string][2]time.Duration // total time and count per operation
	errLogs atomic.Int64                // error-level log lines (the identity watcher's "went back in time")
	log     zerolog.Logger
}

// process is what a restart replaces: the Redis guard, the Applier, the handlers and the job.
type process struct {
	guard   *guard.Guard
	applier *apply.Applier
	job     *reconcile.Job
	srv     *httptest.Server
	prefix  string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	sb := sandbox.WithFake(t)
	dir, fake, yaml := sb.Dir, sb.Fake, sb.Config
	path := filepath.Join(dir, "paygw.yaml")
	if err := os.WriteFile(path, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, fake: fake, client: &http.Client{Timeout: 30 * time.Second}, token: testenv.Secret(t, "history-token-"+testenv.Random(8))}
	if w.chs, err = all.FromConfig(cfg.Channels); err != nil {
		t.Fatal(err)
	}
	var skipped []error
	if w.qs, skipped, err = all.QueriersFromConfig(cfg.Channels, w.chs, &http.Client{Timeout: 10 * time.Second}); err != nil || len(skipped) > 0 || len(w.qs) != 4 {
		t.Fatalf("queriers: %d, skipped %v, %v", len(w.qs), skipped, err)
	}
	m, err := simulate.LoadSigners(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.signers = NewSigners(m)
	w.log = zerolog.New(errorCounter{&w.errLogs, zerolog.NewTestWriter(t)}).Level(zerolog.ErrorLevel)
	w.dsn = testenv.NewDatabase(t)
	w.db = testenv.Open(t, w.dsn)
	if w.sqlDB, err = sql.Open("mysql", w.dsn); err != nil {
		t.Fatal(err)
	}
	w.sqlDB.SetMaxOpenConns(64)
	w.sqlDB.SetMaxIdleConns(64)
	t.Cleanup(func() { _ = w.sqlDB.Close() })
	w.anchor = time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -8)
	w.proc = w.start("paygw-history:" + testenv.Random(6) + ":")
	t.Cleanup(func() {
		w.stop(w.proc)
		w.emptyRedis()
	})
	return w
}

// errorCounter counts the error-level lines it passes on.
type errorCounter struct {
	n *atomic.Int64
	w io.Writer
}

func (e errorCounter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"level":"error"`)) {
		e.n.Add(1)
	}
	return e.w.Write(p)
}

// start builds a process as serve does: the guard bound to the database's identity, then the
// Applier, the orders service, the handlers and the job.
func (w *world) start(prefix string) *process {
	w.t.Helper()
	g := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix, Timeout: 3 * time.Second}, w.log)
	w.prefixes = append(w.prefixes, prefix)
	a := apply.New(w.db, g, 5*time.Second, w.log)
	g.Suspend()
	if err := identity.New(w.db, g, w.log, a.ForgetMarkers).Check(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	svc := orders.New(w.db, g, orders.Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, handlers.RenderCreate, w.log)
	srv := handlers.New(handlers.Config{BodyLimitBytes: 1 << 20, KeyHeader: "Idempotency-Key",
		Tokens: []handlers.Token{{Name: "order-service", Secret: w.token}}}, w.db, g, svc, a, w.chs, w.log)
	job := reconcile.New(w.db, a, w.qs, reconcile.Config{QueryAfter: time.Minute, QueryMaxAge: 30 * 24 * time.Hour, QPS: 10_000}, w.log)
	return &process{guard: g, applier: a, job: job, srv: httptest.NewServer(srv.Echo()), prefix: prefix}
}

func (w *world) stop(p *process) {
	p.srv.Close()
	_ = p.guard.Close()
}

// restart replaces the process; flush empties Redis of what the old one wrote (a new, empty
// keyspace), as after a Redis restart without persistence.
func (w *world) restart(flush bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := w.proc.prefix
	if flush {
		prefix = "paygw-history:" + testenv.Random(6) + ":"
	}
	w.stop(w.proc)
	w.proc = w.start(prefix)
}

// emptyRedis deletes every key this world wrote.
func (w *world) emptyRedis() {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	defer rdb.Close()
	ctx := context.Background()
	for _, p := range w.prefixes {
		iter := rdb.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 500 {
				rdb.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			rdb.Unlink(ctx, keys...)
		}
	}
}

// purge is the retention purge, at an age of zero: every final record and journal row goes, as
// if their retention had passed.
func (w *world) purge() error {
	ctx := context.Background()
	if _, err := w.db.PurgeRecords(ctx, 0, nil); err != nil {
		return err
	}
	_, err := w.db.PurgeJournal(ctx, 0, nil)
	return err
}

// newOrder makes the history's order as its Origin says, before the history's first event, and
// records its attempts through the API as the order service does. An order the API creates gets
// its trade_no there: ids.TradeNo becomes it. The attempts on channels that refuse the order's
// currency must be refused (400), the others recorded (201).
func (w *world) newOrder(h History, ids *IDs, base time.Time) (refusedTaken []string, err error) {
	if err := w.createOrder(h, ids, base); err != nil {
		return nil, err
	}
	for i, a := range h.Attempts {
		ref := ""
		switch {
		case a.Channel == Stripe && !a.Checkout:
			ref = ids.Txn[i]
		case a.Channel == UnionPay:
			ref = base.Add(-time.Hour).In(bills.ChinaTime).Format("20060102150405")
		}
		body := fmt.Sprintf(`{"channel":%q,"channel_ref":%q}`, a.Channel, ref)
		code, b, err := w.call("POST", "/v1/orders/"+ids.TradeNo+"/attempts", body, "")
		switch {
		case err != nil:
			return nil, err
		case a.Refused && code == http.StatusCreated:
			refusedTaken = append(refusedTaken, a.Channel)
		case a.Refused && code != http.StatusBadRequest:
			return nil, fmt.Errorf("attempt %s in %s: %d %s, want 400", a.Channel, h.Code(), code, b)
		case !a.Refused && code != http.StatusCreated:
			return nil, fmt.Errorf("attempt %s: %d %s", a.Channel, code, b)
		}
	}
	return refusedTaken, nil
}

// createOrder makes the order: inserted (OriginInsert), or created by POST /v1/orders from a
// stock of its own (put in the order's currency first) or without stock, and then checked as the
// create answered it: the history's amount and currency, WAIT_PAY.
func (w *world) createOrder(h History, ids *IDs, base time.Time) error {
	var body string
	switch h.Origin {
	case OriginInsert:
		ctx := context.Background()
		return w.db.InTx(ctx, func(tx *repository.Tx) error {
			return tx.InsertOrder(ctx, payment.Order{TradeNo: ids.TradeNo, UserID: 1, SKU: "HISTORY", Num: 1, AmountFen: h.AmountFen,
				Currency: h.Code(), CreateTime: base.Add(-time.Hour).UTC()}, "", "", "")
		})
	case OriginStock:
		sku := ids.TradeNo // one stock per history
		stock := fmt.Sprintf(`{"num":1,"price_fen":%d,"currency":%q}`, h.AmountFen, h.Code())
		if code, b, err := w.call("PUT", "/v1/stock/"+sku, stock, ""); err != nil || code != http.StatusOK {
			return fmt.Errorf("stock %s: %d %s %v", sku, code, b, err)
		}
		body = fmt.Sprintf(`{"user_id":1,"sku":%q,"num":1}`, sku)
	case OriginStockless:
		body = fmt.Sprintf(`{"user_id":1,"amount_fen":%d,"currency":%q}`, h.AmountFen, h.Code())
	case OriginMerchantID:
		body = fmt.Sprintf(`{"user_id":1,"amount_fen":%d,"currency":%q,"merchant_order_id":%q}`, h.AmountFen, h.Code(), "M-"+ids.TradeNo)
	}
	code, b, err := w.call("POST", "/v1/orders", body, ids.TradeNo)
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("create %s: %d %s %v", body, code, b, err)
	}
	var o struct {
		TradeNo    string `json:"trade_no"`
		AmountFen  int64  `json:"amount_fen"`
		Currency   string `json:"currency"`
		MerchantID string `json:"merchant_order_id"`
		Status     string `json:"status"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("create: %v in %s", err, b)
	}
	if o.AmountFen != h.AmountFen || o.Currency != h.Code() || o.Status != StatusWaitPay ||
		(o.MerchantID != "") != (h.Origin == OriginMerchantID) {
		return fmt.Errorf("create %s answered %s", body, b)
	}
	ids.TradeNo = o.TradeNo
	return nil
}

// call sends an API call as the order service does (its token; key, when set, as the
// Idempotency-Key) and reads the answer.
func (w *world) call(method, path, body, key string) (code int, answer []byte, err error) {
	w.mu.RLock()
	url := w.proc.srv.URL
	w.mu.RUnlock()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := w.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err = io.ReadAll(res.Body)
	return res.StatusCode, answer, err
}

// deliver signs message n afresh and posts it to the channel's notify_url; acked reports the
// channel's success reply (Alipay's is the body "success", the others' a 2xx).
func (w *world) deliver(mb *member, base time.Time, n int) (acked bool, err error) {
	ch := mb.h.Attempts[mb.h.Messages()[n].Attempt].Channel
	m, signed := mb.signed[n]
	if signed {
		m, err = w.signers.Resign(ch, m, time.Now())
	} else {
		_, m, err = w.signers.Sign(mb.h, mb.ids, base, n, time.Now())
		mb.signed[n] = m
	}
	if err != nil {
		return false, err
	}
	w.mu.RLock()
	url := w.proc.srv.URL
	w.mu.RUnlock()
	req, _ := http.NewRequest("POST", url+"/notify/"+ch, bytes.NewReader(m.Body))
	req.Header = m.Header.Clone()
	res, err := w.client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	ok := res.StatusCode/100 == 2 && (ch != Alipay || string(b) == "success")
	if res.StatusCode == http.StatusBadRequest {
		return false, fmt.Errorf("refused: %d %s", res.StatusCode, b) // a message of ours that does not verify is a bug here
	}
	return ok, nil
}

// query runs the reconcile job for the order on one channel, as `paygw reconcile query
// --channel C --trade-no T` does.
func (w *world) query(ch, tradeNo string) error {
	w.mu.RLock()
	job := w.proc.job
	w.mu.RUnlock()
	_, err := job.Run(context.Background(), reconcile.Options{Channel: ch, TradeNo: tradeNo})
	return err
}

// runBill runs a bill file through the channel's real reader and reconcile.Job.MatchBill, as
// `paygw reconcile bill --channel C --date D --file F` does (zip files by their ending).
func (w *world) runBill(bd BillDay, date time.Time, file []byte, zipped bool) (reconcile.BillReport, error) {
	var r bills.Reader
	var err error
	switch bd.Channel {
	case Alipay:
		if zipped {
			r, err = bills.NewAlipay(bytes.NewReader(file), int64(len(file)))
		} else {
			r = bills.NewAlipayCSV(bytes.NewReader(file))
		}
	case WeChat:
		r = bills.NewWeChat(bytes.NewReader(file))
	case Stripe:
		r = bills.NewStripe(bytes.NewReader(file))
	case UnionPay:
		r, err = bills.NewUnionPayZip(bytes.NewReader(file), int64(len(file)), date)
	}
	if err != nil {
		return reconcile.BillReport{}, err
	}
	w.mu.RLock()
	job := w.proc.job
	w.mu.RUnlock()
	return job.MatchBill(context.Background(), bd.Channel, date, r, reconcile.BillConfig{LocalOnlyGrace: 48 * time.Hour,
		Location: Zone(bd.Channel), Identity: merchant[bd.Channel]}, nil)
}

// acceptChannel is finance accepting the channel's side of every open CHANNEL_ONLY and
// REFUND_CHANNEL_ONLY the run found (POST /v1/discrepancies/{id}/resolve accept_channel):
// reconcile.ResolveDiscrepancy, which applies each bill line through the process's applier.
// It returns how many it accepted.
func (w *world) acceptChannel(runID int64) (int, error) {
	ctx := context.Background()
	w.mu.RLock()
	applier := w.proc.applier
	w.mu.RUnlock()
	n := 0
	for _, class := range reconcile.AcceptChannelClasses {
		items, err := w.db.ListDiscrepancies(ctx, runID, class, 0, 1000)
		if err != nil {
			return n, err
		}
		for _, it := range items {
			if !it.Found || it.Status != repository.StatusOpen {
				continue
			}
			e := access.Entry{At: time.Now().UTC(), Actor: "history", Role: access.Finance, Action: "discrepancy.resolve",
				Target: fmt.Sprintf("discrepancy:%d", it.ID)}
			if _, err := reconcile.ResolveDiscrepancy(ctx, w.db, applier, it.ID, reconcile.ActionAcceptChannel, "the channel is right", e); err != nil {
				return n, fmt.Errorf("accept_channel on discrepancy %d (%s %s): %w", it.ID, it.Class, it.TradeNo, err)
			}
			n++
		}
	}
	return n, nil
}

// merchant is whom each channel's bills must name, as channels.<name>.seller_id / mch_id /
// app_id / mer_id would say: the sandbox merchant the bills of bills.go are made out to.
var merchant = map[string]reconcile.Identity{
	Alipay:   {Account: AlipayPID},
	WeChat:   {Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}},
	UnionPay: {Merchant: simulate.SandboxUnionPayMerID},
}

// books is what the oracle reads of one order.
type books struct {
	Status      string
	Channel     string
	Txn         string
	RefundedFen int64
	AmountFen   int64
	Currency    string
	Anomalies   []string // "KIND channel txn", sorted
	Refunds     string   // the ledger rows of its payments: "kind:status:amount" each, sorted
	Attempts    []string // the channels of its attempts the order service recorded (not reconcile's implicit ones), sorted
}

func (b books) String() string {
	return fmt.Sprintf("%s %s %s %s refunded %d, anomalies %v, refunds [%s], attempts %v", money.Format(b.AmountFen, b.Currency),
		b.Status, b.Channel, b.Txn, b.RefundedFen, b.Anomalies, b.Refunds, b.Attempts)
}

// order reads the order row alone: what the check after every step needs (no anomalies,
// refund rows or attempts).
func (w *world) order(tradeNo string) (*books, error) {
	var b books
	err := w.sqlDB.QueryRow(`SELECT status, COALESCE(channel, ''), COALESCE(channel_txn_id, ''), refunded_fen, amount_fen, currency
		FROM orders WHERE trade_no = ?`, tradeNo).Scan(&b.Status, &b.Channel, &b.Txn, &b.RefundedFen, &b.AmountFen, &b.Currency)
	return &b, err
}

// read reads the books of the orders of members, keyed by trade_no.
func (w *world) read(members []*member) (map[string]*books, error) {
	ctx := context.Background()
	out := map[string]*books{}
	var tradeNos []any
	txns := map[string][]any{} // by channel
	txnOwner := map[string]string{}
	for _, m := range members {
		out[m.ids.TradeNo] = &books{}
		tradeNos = append(tradeNos, m.ids.TradeNo)
		for i, t := range m.ids.Txn {
			ch := m.h.Attempts[i].Channel
			txns[ch] = append(txns[ch], t)
			txnOwner[t] = m.ids.TradeNo
		}
	}
	in := func(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
	rows, err := w.sqlDB.QueryContext(ctx, `SELECT trade_no, status, COALESCE(channel, ''), COALESCE(channel_txn_id, ''), refunded_fen,
		amount_fen, currency FROM orders WHERE trade_no IN (`+in(len(tradeNos))+`)`, tradeNos...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var tn string
		var b books
		if err := rows.Scan(&tn, &b.Status, &b.Channel, &b.Txn, &b.RefundedFen, &b.AmountFen, &b.Currency); err != nil {
			rows.Close()
			return nil, err
		}
		*out[tn] = b
	}
	rows.Close()
	if rows, err = w.sqlDB.QueryContext(ctx, `SELECT trade_no, kind, channel, channel_txn_id FROM anomaly WHERE trade_no IN (`+in(len(tradeNos))+`)
		ORDER BY kind, channel, channel_txn_id`, tradeNos...); err != nil {
		return nil, err
	}
	for rows.Next() {
		var tn, kind, ch, txn string
		if err := rows.Scan(&tn, &kind, &ch, &txn); err != nil {
			rows.Close()
			return nil, err
		}
		out[tn].Anomalies = append(out[tn].Anomalies, kind+" "+ch+" "+txn)
	}
	rows.Close()
	if rows, err = w.sqlDB.QueryContext(ctx, `SELECT trade_no, channel FROM payment_attempt WHERE trade_no IN (`+in(len(tradeNos))+`)
		AND implicit = 0 ORDER BY trade_no, channel`, tradeNos...); err != nil {
		return nil, err
	}
	for rows.Next() {
		var tn, ch string
		if err := rows.Scan(&tn, &ch); err != nil {
			rows.Close()
			return nil, err
		}
		out[tn].Attempts = append(out[tn].Attempts, ch)
	}
	rows.Close()
	for _, ch := range Channels {
		if len(txns[ch]) == 0 {
			continue
		}
		if rows, err = w.sqlDB.QueryContext(ctx, `SELECT channel_txn_id, kind, status, amount_fen FROM refund
			WHERE channel = ? AND channel_txn_id IN (`+in(len(txns[ch]))+`) ORDER BY channel_txn_id, kind, status, amount_fen`,
			append([]any{ch}, txns[ch]...)...); err != nil {
			return nil, err
		}
		for rows.Next() {
			var txn, kind, status string
			var fen sql.NullInt64
			if err := rows.Scan(&txn, &kind, &status, &fen); err != nil {
				rows.Close()
				return nil, err
			}
			amount := "?" // an item whose own amount no source has stated yet
			if fen.Valid {
				amount = strconv.FormatInt(fen.Int64, 10)
			}
			b := out[txnOwner[txn]]
			b.Refunds = strings.TrimSpace(b.Refunds + fmt.Sprintf(" %s:%s:%s", kind, status, amount))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dayRun describes the day's complete runs (status complete): each run row, the lines it staged
// and the day's discrepancy rows. A failed or running run's own row is left out: it may exist,
// but nothing of the complete ones may change.
func (w *world) dayRun(bd BillDay, date time.Time) (string, error) {
	rows, err := w.sqlDB.Query(`SELECT id, line_count, trusted, COALESCE(counts_json, '') FROM recon_run
		WHERE channel = ? AND bill_date = ? AND status = 'complete' ORDER BY id`, bd.Channel, date.Format(time.DateOnly))
	if err != nil {
		return "", err
	}
	type run struct {
		id, lines, trusted int64
		counts             string
	}
	var runs []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.id, &r.lines, &r.trusted, &r.counts); err != nil {
			rows.Close()
			return "", err
		}
		runs = append(runs, r)
	}
	rows.Close()
	if len(runs) == 0 {
		return "no complete run", rows.Err()
	}
	var b strings.Builder
	for _, r := range runs {
		var staged, stagedFen int64
		if err := w.sqlDB.QueryRow(`SELECT COUNT(*), COALESCE(SUM(amount_fen), 0) FROM recon_line WHERE run_id = ?`, r.id).Scan(&staged, &stagedFen); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "run %d: %d lines, trusted %d, counts %s, %d lines staged (%d fen); ", r.id, r.lines, r.trusted, r.counts, staged, stagedFen)
	}
	var n int64
	var classes sql.NullString
	if err := w.sqlDB.QueryRow(`SELECT COUNT(*), GROUP_CONCAT(CONCAT(line_key, '=', class) ORDER BY line_key) FROM recon_discrepancy
		WHERE channel = ? AND bill_date = ?`, bd.Channel, date.Format(time.DateOnly)).Scan(&n, &classes); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "%d discrepancy rows %s", n, classes.String)
	return b.String(), nil
}

// classes reads the discrepancy rows of a run, by trade_no.
func (w *world) classes(runID int64) (map[string]map[string]int, error) {
	rows, err := w.sqlDB.Query(`SELECT trade_no, class FROM recon_discrepancy WHERE run_id = ?`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var tn, class string
		if err := rows.Scan(&tn, &class); err != nil {
			return nil, err
		}
		if out[tn] == nil {
			out[tn] = map[string]int{}
		}
		out[tn][class]++
	}
	return out, rows.Err()
}

func (w *world) opTime(op string, d time.Duration) {
	w.opMu.Lock()
	defer w.opMu.Unlock()
	if w.ops == nil {
		w.ops = map[string][2]time.Duration{}
	}
	v := w.ops[op]
	w.ops[op] = [2]time.Duration{v[0] + d, v[1] + 1}
}
