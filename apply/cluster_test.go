package apply_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

// The Applier on a Redis Cluster guard: payments of many trades (their guards and markers on
// every master) apply once, repeats are told as repeats, and concurrent twins of one payment
// apply it once. The outcomes hold even while another package's test fails a master over: the
// guard then degrades to the database.
func TestApplyOnRedisCluster(t *testing.T) {
	f := &fixture{t: t, dsn: testenv.NewDatabase(t)}
	f.db = testenv.Open(t, f.dsn)
	g := testenv.ClusterGuard(t, 3*time.Second, testenv.Logger(t))
	f.a = apply.New(f.db, g, 5*time.Second, testenv.Logger(t))

	const trades = 40
	for i := range trades {
		tn := f.order(100)
		ev := paid(tn, fmt.Sprintf("X%d-%s", i, tn), 100)
		f.apply(ev, payment.OutcomeApplied)
		f.apply(ev, payment.OutcomeRepeat)
	}

	tn := f.order(100)
	ev := paid(tn, "twins-"+tn, 100)
	var mu sync.Mutex
	outcomes := map[payment.Outcome]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				got, err := f.a.Apply(context.Background(), ev)
				if err != nil { // a twin in flight: the channel would deliver again
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				outcomes[got]++
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	if outcomes[payment.OutcomeApplied] != 1 || outcomes[payment.OutcomeRepeat] != 7 {
		t.Fatalf("8 twins: %v; want 1 APPLIED, 7 REPEAT", outcomes)
	}
	if n := f.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != trades+1 {
		t.Fatalf("%d pay records; want %d", n, trades+1)
	}
	if o := f.get(tn); o.Status != payment.OrderPaid {
		t.Fatalf("order %s is %s; want PAID", tn, o.Status)
	}
}
