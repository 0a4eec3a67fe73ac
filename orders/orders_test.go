package orders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// crash stands for the process dying: a panic unwinds without running our error paths (no
// FailClaim), and the deferred rollback plays the part of MySQL dropping the dead connection.
type crash struct{}

func createOrCrash(s *Service, r Request) (res Result, err error, crashed bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crash); !ok {
				panic(v)
			}
			crashed = true
		}
	}()
	res, err = s.Create(context.Background(), r)
	return res, err, false
}

func TestCrashBetweenClaimAndCommitThenSweep(t *testing.T) {
	points := map[string]func(s *Service, f func()){
		"after claim":   func(s *Service, f func()) { s.afterClaim = f },
		"before commit": func(s *Service, f func()) { s.beforeCommit = f },
	}
	for name, setHook := range points {
		t.Run(name, func(t *testing.T) {
			dsn := testenv.NewDatabase(t)
			db := testenv.Open(t, dsn)
			ctx := context.Background()
			if err := db.PutStock(ctx, payment.Stock{SKU: "A-100", Num: 5, PriceFen: 1999}); err != nil {
				t.Fatal(err)
			}
			s := New(db, testenv.Guard(t), Config{Enabled: true, RedisTTL: time.Second, ReturnOriginalResult: true}, testRender, testenv.Logger(t))
			canonical, _ := Canonical([]byte(`{"user_id":1,"sku":"A-100","num":1}`))
			order, err := ParseNewOrder(canonical)
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Scope: "order-service", Key: "crash-1", Hash: RequestHash("POST", "/v1/orders", canonical), Order: order}

			setHook(s, func() { panic(crash{}) })
			if _, _, crashed := createOrCrash(s, req); !crashed {
				t.Fatal("the crash hook did not run")
			}
			setHook(s, nil)
			wantStock(t, dsn, "A-100", 5, 0)
			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE status = 0`); n != 1 {
				t.Fatalf("processing records after the crash = %d, want 1", n)
			}

			// Until the sweeper runs, the key is in flight (a retry must not double the work).
			if _, err := s.Create(ctx, req); !errors.Is(err, ErrInFlight) {
				t.Fatalf("retry before the sweep: %v, want ErrInFlight", err)
			}
			// The sweeper leaves a record younger than its timeout alone, fails an older one.
			if n, err := db.SweepProcessing(ctx, 10*time.Minute); err != nil || n != 0 {
				t.Fatalf("sweep with a long timeout: %d, %v", n, err)
			}
			sweepUntilFailed(t, db)

			// The retry takes the failed record over and runs once.
			res, err := s.Create(ctx, req)
			if err != nil || res.Code != 201 || res.Replayed {
				t.Fatalf("retry after the sweep: %+v, %v", res, err)
			}
			again, err := s.Create(ctx, req)
			if err != nil || !again.Replayed || string(again.Body) != string(res.Body) {
				t.Fatalf("repeat after the retry: %+v, %v", again, err)
			}
			wantStock(t, dsn, "A-100", 4, 1)
			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE status = 1`); n != 1 {
				t.Fatalf("success records = %d, want 1", n)
			}
		})
	}
}

func TestFencedCompletionRollsBack(t *testing.T) {
	// The sweeper fails a slow request's claim and a retry takes it over. When the slow one
	// finally commits, either uk_order_idem (the retry already inserted the key's order) or the
	// record's fence (the retry's result was a refusal) rolls its writes back.
	for name, stock := range map[string]int{"order key holds": 5, "fence holds": 1} {
		t.Run(name, func(t *testing.T) {
			dsn := testenv.NewDatabase(t)
			db := testenv.Open(t, dsn)
			ctx := context.Background()
			if err := db.PutStock(ctx, payment.Stock{SKU: "A-100", Num: stock, PriceFen: 100}); err != nil {
				t.Fatal(err)
			}
			s := New(db, testenv.DeadGuard(t), Config{Enabled: true, RedisTTL: time.Second, ReturnOriginalResult: true}, testRender, testenv.Logger(t))
			canonical, _ := Canonical([]byte(`{"user_id":1,"sku":"A-100","num":1}`))
			order, _ := ParseNewOrder(canonical)
			req := Request{Scope: "svc", Key: "slow", Hash: RequestHash("POST", "/v1/orders", canonical), Order: order}

			var retried Result
			s.afterClaim = func() {
				s.afterClaim = nil
				sweepUntilFailed(t, db)
				var err error
				if retried, err = s.Create(ctx, req); err != nil || retried.Code != 201 {
					t.Errorf("the retry: %+v, %v", retried, err)
				}
			}
			if _, err := s.Create(ctx, req); !errors.Is(err, ErrInFlight) {
				t.Fatalf("the slow request: %v, want ErrInFlight (fenced)", err)
			}
			wantStock(t, dsn, "A-100", stock-1, 1)
			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE status = 1 AND response_code = 201`); n != 1 {
				t.Fatalf("records holding the 201 = %d, want 1", n)
			}
		})
	}
}

// sweepUntilFailed sweeps with a 10 ms timeout until a sweep fails the one processing record.
// SweepProcessing reads the database's clock (NOW(3)), which a test cannot step: it waits, with
// a deadline, for that clock to pass the timeout instead of sleeping a guessed while.
func sweepUntilFailed(t *testing.T, db *repository.DB) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		n, err := db.SweepProcessing(context.Background(), 10*time.Millisecond)
		switch {
		case err != nil:
			t.Fatalf("sweep: %v", err)
		case n > 1:
			t.Fatalf("sweep failed %d records; want the one", n)
		case n == 0:
			return errors.New("no sweep with a 10 ms timeout failed the processing record")
		}
		return nil
	})
}

// testRender stands in for the HTTP layer's renderer: the trade_no, or the refusal's text.
func testRender(o *payment.Order, refusal error) (int, []byte) {
	if o == nil {
		return 409, []byte(refusal.Error())
	}
	return 201, []byte(o.TradeNo)
}

// The SKU's row is taken last, after the order is written: units another create took meanwhile
// roll the order back and make the answer a stored, replayed out-of-stock refusal; a price
// changed meanwhile prices the order again. 12 creates race for 5 units: 5 orders, 7 refusals,
// nothing oversold, and no order row for a refusal.
func TestCreateTakesStockLast(t *testing.T) {
	dsn, db, s := hotSKU(t, 5)
	ctx := context.Background()
	s.SetGroupLanes(0) // the single path: all 12 price before any takes (group_test.go groups them)
	canonical, _ := Canonical([]byte(`{"user_id":1,"sku":"HOT","num":1}`))
	order, err := ParseNewOrder(canonical)
	if err != nil {
		t.Fatal(err)
	}
	req := func(key string) Request {
		return Request{Scope: "order-service", Key: key, Hash: RequestHash("POST", "/v1/orders", canonical), Order: order}
	}

	// Every create has priced its order before any takes a unit: all 12 saw 5 left.
	const n = 12
	var priced sync.WaitGroup
	priced.Add(n)
	s.afterPricing = func() { priced.Done(); priced.Wait() }
	results := make([]Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Create(ctx, req(fmt.Sprintf("race-%02d", i)))
		}()
	}
	wg.Wait()
	s.afterPricing = nil
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d: %v", i, err)
		}
	}
	wantFilled(t, s, results, func(i int) Request { return req(fmt.Sprintf("race-%02d", i)) }, payment.ErrOutOfStock.Error(), 5)
	wantStock(t, dsn, "HOT", 0, 5)

	// The price changes after the order was priced: the create prices it again.
	if err := db.PutStock(ctx, payment.Stock{SKU: "HOT", Num: 3, PriceFen: 100}); err != nil {
		t.Fatal(err)
	}
	changed := false
	s.afterPricing = func() {
		if !changed {
			changed = true
			if err := db.PutStock(ctx, payment.Stock{SKU: "HOT", Num: 3, PriceFen: 250}); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := s.Create(ctx, req("repriced"))
	if err != nil || res.Code != 201 {
		t.Fatalf("create across a price change: %+v, %v", res, err)
	}
	o, _, err := db.OrderByIdemKey(ctx, "order-service", "repriced")
	if err != nil || o.AmountFen != 250 {
		t.Fatalf("the order across a price change: %+v, %v; want it priced at the new 250", o, err)
	}
	wantStock(t, dsn, "HOT", 2, 6)
}

// wantFilled checks that filled of the results are orders (201) and the rest refusals saying
// refusal, each replayed as it was when its request (req(i)) comes again.
func wantFilled(t *testing.T, s *Service, results []Result, req func(i int) Request, refusal string, filled int) {
	t.Helper()
	created := 0
	for i, res := range results {
		switch {
		case res.Code == 201:
			created++
		case strings.Contains(string(res.Body), refusal):
			again, err := s.Create(context.Background(), req(i))
			if err != nil || !again.Replayed || !bytes.Equal(again.Body, res.Body) {
				t.Errorf("the refusal of create %d is not replayed: %+v, %v", i, again, err)
			}
		default:
			t.Errorf("create %d: %d %s", i, res.Code, res.Body)
		}
	}
	if created != filled {
		t.Fatalf("%d of %d creates made an order, want %d (the rest refused)", created, len(results), filled)
	}
}

// wantStock checks the units of sku left and the orders made.
func wantStock(t *testing.T, dsn, sku string, left, orders int) {
	t.Helper()
	if n := testenv.Count(t, dsn, `SELECT num FROM stock WHERE sku = ?`, sku); n != left {
		t.Fatalf("stock of %s left %d, want %d", sku, n, left)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders`); n != orders {
		t.Fatalf("%d orders, want %d", n, orders)
	}
}

// hotSKU is a fresh database holding the SKU HOT (units at 100 fen) and a service on it, with
// the default create lanes.
func hotSKU(t *testing.T, units int) (string, *repository.DB, *Service) {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	if err := db.PutStock(context.Background(), payment.Stock{SKU: "HOT", Num: units, PriceFen: 100}); err != nil {
		t.Fatal(err)
	}
	return dsn, db, New(db, testenv.Guard(t), Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, testRender, testenv.Logger(t))
}
