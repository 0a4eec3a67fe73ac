package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// lookupDB is the lookups phase's database; set with benchDB (main.go).
var lookupDB = "paygw_bench_lookup"

// The lookups phase: what an on-call reads during a customer's complaint, on a database of
// lookupOrders orders (x BENCH_SCALE) of which one in lookupPaidEvery was paid through the
// gateway: GET /v1/orders by each key a complaint comes with, a window of a day, and an order's
// console page (its "why", attempts, notifications, refunds, anomalies, events, deliveries).
const (
	lookupOrders    = 100_000
	lookupPaidEvery = 5
	lookupUsers     = 10_000 // so a user holds about ten orders
	lookupDays      = 30     // create times spread over the last 30 days
	lookupReads     = 2_000  // requests per scenario, over the rounds
	lookupInFlight  = 8
)

// lookupSample is one paid order and the keys it is found by.
type lookupSample struct {
	TradeNo         string `db:"trade_no"`
	ChannelTxnID    string `db:"channel_txn_id"`
	MerchantOrderID string `db:"merchant_order_id"`
	UserID          int64  `db:"user_id"`
	CreateMS        int64  `db:"create_ms"`
}

func (b *bench) lookups(ctx context.Context) error {
	n := max(int(lookupOrders*b.opts.scale), 10*lookupPaidEvery*lookupInFlight)
	if err := b.admin.recreate(ctx, lookupDB); err != nil {
		return err
	}
	t := time.Now()
	orders, err := b.seedLookupOrders(ctx, n)
	if err != nil {
		return err
	}
	gw, err := b.startGateway(ctx, b.keys, lookupDB, "lookups", b.opts.groupLanes)
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := b.payLookupOrders(ctx, gw.url+"/notify/alipay", orders); err != nil {
		return err
	}
	b.logf("lookups: %d orders, %d paid through the gateway, in %.1fs", n, len(orders), time.Since(t).Seconds())

	samples, err := b.lookupSamples(ctx)
	if err != nil {
		return err
	}
	cl := newClient(lookupInFlight)
	search := func(name string, query func(s lookupSample) url.Values) step {
		return step{name: name, gw: gw, fn: func(r int) result {
			part := chunk(samples, r, rounds)
			return timed(ctx, len(part), lookupInFlight, func(i int) bool {
				return cl.get(ctx, gw.url+"/v1/orders?"+query(part[i]).Encode(), benchToken)
			})
		}}
	}
	page, err := consoleClient(ctx, gw.url, lookupInFlight)
	if err != nil {
		return err
	}
	return b.interleave(ctx, rounds,
		search("search_txn", func(s lookupSample) url.Values { return url.Values{"channel_txn_id": {s.ChannelTxnID}} }),
		search("search_merchant", func(s lookupSample) url.Values { return url.Values{"merchant_order_id": {s.MerchantOrderID}} }),
		search("search_user", func(s lookupSample) url.Values { return url.Values{"user_id": {fmt.Sprint(s.UserID)}} }),
		search("search_day", func(s lookupSample) url.Values {
			from := time.UnixMilli(s.CreateMS).UTC().Truncate(24 * time.Hour)
			return url.Values{"status": {payment.OrderPaid}, "created_from": {from.Format(time.RFC3339)},
				"created_to": {from.Add(24 * time.Hour).Format(time.RFC3339)}}
		}),
		step{name: "order_page", gw: gw, fn: func(r int) result {
			part := chunk(samples, r, rounds)
			return timed(ctx, len(part), lookupInFlight, func(i int) bool {
				return page.get(ctx, gw.url+"/console/orders/"+url.PathEscape(part[i].TradeNo), "")
			})
		}},
	)
}

// seedLookupOrders inserts n WAIT_PAY orders with the repository's InsertOrder, each with a
// user, a merchant order id and a create time within the last lookupDays, and returns every
// lookupPaidEvery-th of them to be paid.
func (b *bench) seedLookupOrders(ctx context.Context, n int) ([]order, error) {
	const per, workers = 1000, 4
	repo, err := repository.Open(ctx, b.admin.dsn(lookupDB), workers)
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	span := int64(lookupDays * 24 * time.Hour / time.Millisecond)
	err = parallel((n+per-1)/per, workers, func(c int) error {
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		return repo.InTx(ctx, func(tx *repository.Tx) error {
			for i := c * per; i < min((c+1)*per, n); i++ {
				o := payment.Order{TradeNo: fmt.Sprintf("L%09d", i), UserID: int64(1 + rng.IntN(lookupUsers)), SKU: "BENCH-SKU",
					Num: 1, AmountFen: 100 + int64(i%9000), Currency: "CNY", MerchantOrderID: fmt.Sprintf("M-%09d", i),
					CreateTime: now.Add(-time.Duration(rng.Int64N(span)) * time.Millisecond)}
				if err := tx.InsertOrder(ctx, o, createScope, "", ""); err != nil {
					return fmt.Errorf("seed order %s: %w", o.TradeNo, err)
				}
			}
			return nil
		})
	})
	var paid []order
	for i := 0; i < n; i += lookupPaidEvery {
		paid = append(paid, order{tradeNo: fmt.Sprintf("L%09d", i), amountFen: 100 + int64(i%9000)})
	}
	return paid, err
}

// payLookupOrders tells the gateway the orders were paid, as Alipay would.
func (b *bench) payLookupOrders(ctx context.Context, url string, orders []order) error {
	signers, err := simulate.LoadSigners(filepath.Join(b.work, "keys"))
	if err != nil {
		return err
	}
	msgs := make([]message, len(orders))
	if err := parallel(len(orders), 4, func(i int) error {
		m, err := signers["alipay"].Sign(simulate.Payment{TradeNo: orders[i].tradeNo, AmountFen: orders[i].amountFen})
		msgs[i] = message{body: m.Body, contentType: m.Header.Get("Content-Type")}
		return err
	}); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if res := b.cl.run(ctx, url, msgs); res.Errors > 0 {
		return fmt.Errorf("lookups: %d of %d payments were not answered success", res.Errors, len(msgs))
	}
	return nil
}

// lookupSamples draws lookupReads paid orders at random, with the keys the gateway stored.
func (b *bench) lookupSamples(ctx context.Context) ([]lookupSample, error) {
	db, err := sqlx.ConnectContext(ctx, "mysql", b.admin.dsn(lookupDB))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var s []lookupSample
	err = db.SelectContext(ctx, &s, `SELECT trade_no, channel_txn_id, merchant_order_id, user_id,
		CAST(UNIX_TIMESTAMP(create_time) * 1000 AS SIGNED) AS create_ms
		FROM orders WHERE status = ? ORDER BY RAND(1) LIMIT ?`, payment.OrderPaid, lookupReads)
	if err == nil && len(s) < lookupReads/2 {
		err = fmt.Errorf("lookups: only %d paid orders to look up", len(s))
	}
	return s, err
}

// consoleClient is a client logged in to the console at base with the bench's token, through
// the login form as a browser does it: the form's CSRF token, then the session cookie in a jar.
func consoleClient(ctx context.Context, base string, concurrency int) (*client, error) {
	c := newClient(concurrency)
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	c.hc.Jar = jar
	form, err := c.read(ctx, base+"/console/login")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(form)
	if m == nil {
		return nil, errors.New("console login: no csrf field in the login form")
	}
	resp, err := c.hc.PostForm(base+"/console/login", url.Values{"token": {benchToken}, "csrf": {html.UnescapeString(string(m[1]))}})
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // drained; the jar holds the session
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("console login: %s", resp.Status)
	}
	return c, nil
}

// read GETs url and returns the body of a 200 answer.
func (c *client) read(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// get asks url, with the bearer token unless it is "", and reports whether the answer was 200.
func (c *client) get(ctx context.Context, url, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.status(req) == http.StatusOK
}

// status sends req and drains the answer: only its status matters (0: no answer).
func (c *client) status(req *http.Request) int {
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // drained
	return resp.StatusCode
}
