package orders

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/batch"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// groupFixture is a service with one lane, a SKU, and a first create held inside its
// transaction (on the afterPricing hook) while the others queue behind it.
type groupFixture struct {
	t       *testing.T
	dsn     string
	db      *repository.DB
	s       *Service
	release chan struct{}
	hook    func() // runs on every afterPricing after the held one (the group's)
}

func newGroupFixture(t *testing.T, units int) *groupFixture {
	f := &groupFixture{t: t, release: make(chan struct{})}
	f.dsn, f.db, f.s = hotSKU(t, units)
	f.s.SetGroupLanes(1)
	held := make(chan struct{})
	var once sync.Once
	f.s.afterPricing = func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			<-f.release
		} else if f.hook != nil {
			f.hook()
		}
	}
	go func() {
		if res, err := f.s.Create(context.Background(), f.req("lead")); err != nil || res.Code != 201 {
			t.Errorf("the held create: %+v, %v", res, err)
		}
	}()
	<-held
	return f
}

func (f *groupFixture) req(key string) Request {
	canonical, _ := Canonical([]byte(`{"user_id":1,"sku":"HOT","num":1}`))
	order, err := ParseNewOrder(canonical)
	if err != nil {
		f.t.Fatal(err)
	}
	return Request{Scope: "order-service", Key: key, Hash: RequestHash("POST", "/v1/orders", canonical), Order: order}
}

// queue starts n creates, waits until all of them wait for the lane, releases the held one, and
// returns their results once all are done.
func (f *groupFixture) queue(n int) []Result {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = f.req(fmt.Sprintf("g-%02d", i))
	}
	return f.queueReqs(reqs)
}

// Creates that queue behind a create of the same SKU share one transaction and one take of the
// units. Partial fill: 5 units, the held create takes 1, the group of 8 fills 4 in the order
// they queued and refuses 4 with the out-of-stock refusal, stored and replayed like the single
// path's. Nothing is oversold and no refusal has an order.
func TestGroupedCreatesFillPartially(t *testing.T) {
	f := newGroupFixture(t, 5)
	results := f.queue(8)
	if groups, grouped := f.s.groups.Load(), f.s.grouped.Load(); groups != 1 || grouped != 8 {
		t.Fatalf("%d groups of %d creates, want 1 of 8", groups, grouped)
	}
	wantFilled(t, f.s, results, func(i int) Request { return f.req(fmt.Sprintf("g-%02d", i)) }, payment.ErrOutOfStock.Error(), 4)
	wantStock(t, f.dsn, "HOT", 0, 5)
	if n := testenv.Count(t, f.dsn, `SELECT COUNT(*) FROM idempotent_record WHERE status = 1`); n != 9 {
		t.Fatalf("%d final records, want 9", n)
	}
}

// A group whose take fails rolls back whole, and each of its creates runs alone on the single
// path: here the price changes after the group priced its orders, so the take matches no row,
// and every create is priced again at the new price.
func TestFailedCreateGroupRunsEachAlone(t *testing.T) {
	f := newGroupFixture(t, 10)
	var once sync.Once
	f.hook = func() {
		once.Do(func() {
			if err := f.db.PutStock(context.Background(), payment.Stock{SKU: "HOT", Num: 9, PriceFen: 300}); err != nil {
				t.Error(err)
			}
		})
	}
	for i, res := range f.queue(4) {
		if res.Code != 201 {
			t.Errorf("create %d: %d %s", i, res.Code, res.Body)
		}
	}
	if groups := f.s.groups.Load(); groups != 0 {
		t.Fatalf("%d groups committed, want 0 (the group's take had to fail)", groups)
	}
	if n := testenv.Count(t, f.dsn, `SELECT COUNT(*) FROM orders WHERE amount_fen = 300`); n != 4 {
		t.Fatalf("%d orders at the new price, want 4", n)
	}
	wantStock(t, f.dsn, "HOT", 5, 5)
}

// 32 creates race for 20 units of one SKU through the default lanes: 20 orders, 12 refusals,
// nothing oversold, one final record per key. The lanes' first creates are held inside their
// transactions until the other 30 have queued, so the 30 must go through one group: the test
// proves the group path, not just the lanes.
func TestGroupedCreatesNeverOversell(t *testing.T) {
	const creates = 32
	dsn, _, s := hotSKU(t, 20)
	lanes := batch.DefaultLanes
	gate := make(chan struct{})
	s.afterPricing = func() { <-gate }
	ctx := context.Background()
	f := &groupFixture{t: t}
	var wg sync.WaitGroup
	codes := make([]int, creates)
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Create(ctx, f.req(fmt.Sprintf("k-%02d", i)))
			if err != nil {
				t.Errorf("create %d: %v", i, err)
			}
			codes[i] = res.Code
		}()
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := s.Queued(); n < creates-lanes {
			return fmt.Errorf("%d of %d creates queued behind the lanes", n, creates-lanes)
		}
		return nil
	})
	close(gate)
	wg.Wait()
	created := 0
	for _, c := range codes {
		if c == 201 {
			created++
		}
	}
	if created != 20 {
		t.Fatalf("%d created, want 20", created)
	}
	wantStock(t, dsn, "HOT", 0, 20)
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE status = 1`); n != creates {
		t.Fatalf("%d final records, want %d", n, creates)
	}
	// The first lane to finish hands every queued create (groupMax is 64) to one group. The
	// group commits unless its transaction fails (a lock wait on a loaded box, say); then its
	// creates run alone, and the counts above hold either way.
	if formed := s.formed.Load(); formed != creates-int64(lanes) {
		t.Fatalf("%d creates were handed to groups, want the %d queued", formed, creates-lanes)
	}
	if groups, grouped := s.groups.Load(), s.grouped.Load(); groups > 1 || (groups == 1 && grouped != creates-int64(lanes)) {
		t.Fatalf("%d groups committed %d creates, want at most one, of all %d", groups, grouped, creates-lanes)
	}
}
