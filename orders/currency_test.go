package orders

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

// reqOf is the create of body under key, as the HTTP layer hands it over.
func reqOf(t *testing.T, key, body string) Request {
	t.Helper()
	canonical, err := Canonical([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	order, err := ParseNewOrder(canonical)
	if err != nil {
		t.Fatal(err)
	}
	return Request{Scope: "order-service", Key: key, Hash: RequestHash("POST", "/v1/orders", canonical), Order: order}
}

// queueReqs starts the creates reqs, waits until all of them wait for the lane, releases the
// held one, and returns their results once all are done.
func (f *groupFixture) queueReqs(reqs []Request) []Result {
	results := make([]Result, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = f.s.Create(context.Background(), r); err != nil {
				f.t.Errorf("create %d: %v", i, err)
			}
		}()
	}
	testenv.Eventually(f.t, 10*time.Second, func() error {
		if q := f.s.group.Len(); q < len(reqs) {
			return fmt.Errorf("%d of %d creates queued", q, len(reqs))
		}
		return nil
	})
	close(f.release)
	wg.Wait()
	return results
}

// Orders without stock share a group with orders from stock: each at its own amount and
// currency, stored with sku "" and num 1, and no stock taken for them.
func TestGroupedCreatesWithoutStock(t *testing.T) {
	f := newGroupFixture(t, 10)
	results := f.queueReqs([]Request{
		reqOf(t, "a", `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":"M-a"}`),
		reqOf(t, "b", `{"user_id":1,"amount_fen":5,"currency":"JPY"}`),
		reqOf(t, "c", `{"user_id":1,"sku":"HOT","num":2,"merchant_order_id":"M-c"}`),
		reqOf(t, "d", `{"user_id":1,"amount_fen":1234,"currency":"KWD","merchant_order_id":"M-d"}`),
	})
	for i, res := range results {
		if res.Code != 201 {
			t.Fatalf("create %d: %d %s", i, res.Code, res.Body)
		}
	}
	if groups, grouped := f.s.groups.Load(), f.s.grouped.Load(); groups != 1 || grouped != 4 {
		t.Fatalf("%d groups of %d creates, want 1 of 4", groups, grouped)
	}
	want := []payment.Order{
		{SKU: "", Num: 1, AmountFen: 100, Currency: "USD", MerchantOrderID: "M-a"},
		{SKU: "", Num: 1, AmountFen: 5, Currency: "JPY"},
		{SKU: "HOT", Num: 2, AmountFen: 200, Currency: "CNY", MerchantOrderID: "M-c"},
		{SKU: "", Num: 1, AmountFen: 1234, Currency: "KWD", MerchantOrderID: "M-d"},
	}
	for i, res := range results {
		o, w := testenv.GetOrder(t, f.db, string(res.Body)), want[i]
		if o.SKU != w.SKU || o.Num != w.Num || o.AmountFen != w.AmountFen || o.Currency != w.Currency || o.MerchantOrderID != w.MerchantOrderID {
			t.Errorf("order %d = %+v, want %+v", i, o, w)
		}
	}
	wantStock(t, f.dsn, "HOT", 10-1-2, 5) // the held create took 1
}

// Two creates of one merchant_order_id in one group: the group fails on the second, each runs
// alone, and exactly one order holds the id; the other's refusal is stored and replayed.
func TestGroupedCreatesOfOneMerchantOrderID(t *testing.T) {
	f := newGroupFixture(t, 10)
	reqs := []Request{
		reqOf(t, "a", `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":"M-1"}`),
		reqOf(t, "b", `{"user_id":2,"sku":"HOT","num":1,"merchant_order_id":"M-1"}`),
	}
	results := f.queueReqs(reqs)
	wantFilled(t, f.s, results, func(i int) Request { return reqs[i] }, ErrMerchantOrderIDTaken.Error(), 1)
	if n := testenv.Count(t, f.dsn, `SELECT COUNT(*) FROM orders WHERE merchant_order_id = 'M-1'`); n != 1 {
		t.Fatalf("%d orders hold M-1, want 1", n)
	}
}

// The unique key decides a race the first look cannot see: B looks while A's order is not
// committed, so B's insert waits on uk_order_merchant; A commits, and B's insert fails and is
// answered with the stored refusal, not a 5xx.
func TestMerchantOrderIDTakenWhileInsertWaits(t *testing.T) {
	dsn, _, s := hotSKU(t, 1)
	s.SetGroupLanes(0)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.beforeCommit = func() {
		once.Do(func() { close(held); <-release })
	}
	reqs := []Request{
		reqOf(t, "a", `{"user_id":1,"amount_fen":100,"currency":"USD","merchant_order_id":"M-1"}`),
		reqOf(t, "b", `{"user_id":2,"amount_fen":200,"currency":"USD","merchant_order_id":"M-1"}`),
	}
	results := make([]Result, 2)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = s.Create(context.Background(), reqs[i]); err != nil {
				t.Errorf("create %d: %v", i, err)
			}
		}()
	}
	start(0)
	<-held
	start(1)
	testenv.Eventually(t, 10*time.Second, func() error {
		// B's INSERT in progress: it waits on A's uncommitted row (InnoDB's duplicate check).
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'INSERT INTO orders%'`); n < 1 {
			return fmt.Errorf("B's insert does not wait yet")
		}
		return nil
	})
	close(release)
	wg.Wait()
	if results[0].Code != 201 {
		t.Fatalf("A: %d %s", results[0].Code, results[0].Body)
	}
	wantFilled(t, s, results, func(i int) Request { return reqs[i] }, ErrMerchantOrderIDTaken.Error(), 1)
}

// The stock's currency changes after the order was priced: the take refuses the old currency and
// the create prices the order again, in the new one.
func TestStockCurrencyChangedWhilePricing(t *testing.T) {
	_, db, s := hotSKU(t, 5)
	s.SetGroupLanes(0)
	var once sync.Once
	s.afterPricing = func() {
		once.Do(func() {
			if err := db.PutStock(context.Background(), payment.Stock{SKU: "HOT", Num: 5, PriceFen: 100, Currency: "USD"}); err != nil {
				t.Error(err)
			}
		})
	}
	res, err := s.Create(context.Background(), reqOf(t, "k", `{"user_id":1,"sku":"HOT","num":1}`))
	if err != nil || res.Code != 201 {
		t.Fatalf("%+v, %v", res, err)
	}
	o, err := db.GetOrder(context.Background(), string(res.Body))
	if err != nil || o.Currency != "USD" || o.AmountFen != 100 {
		t.Fatalf("order %+v, %v: want 100 USD", o, err)
	}
}
