package delivery_test

import (
	"flag"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// backlog is the size of BenchmarkDrain's backlog: -backlog 100000 for make bench's figure.
var backlog = flag.Int("backlog", 10000, "events in BenchmarkDrain's backlog")

// BenchmarkDrain times how long a backlog of events (orders of four events each: paid, then
// three refunds) takes to reach a local receiver that answers at once, from the moment they are
// committed with their seq: events/s is the delivery rate.
// Run: go test -run '^$' -bench Drain -benchtime 1x ./delivery [-args -backlog 100000]
func BenchmarkDrain(b *testing.B) {
	n := *backlog
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		s := newSink(b, nil)
		o := delivery.Options{Endpoints: []delivery.Endpoint{s.endpoint("sink")}, Parallel: 16}
		_, stop := serve(b, e.db, o)
		e.registered(b, "sink")
		b.StartTimer()
		start := time.Now()
		e.insert(b, orders(n/4, 4, 1)...)
		// The sink counts what it received: a COUNT of the delivered rows every 20 ms, as this
		// loop did once, reads every row delivered so far each time, and slowed the drain it
		// measured more the longer the backlog (10k: 641/s, 100k: 362/s).
		for s.answered() < n {
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d of %d received after 10 minutes", s.answered(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		// Every one of them is recorded delivered too (a bookkeeping that failed sends its
		// event again, and records it then).
		testenv.Until(b, time.Minute, "every delivery recorded", func() bool {
			return e.statusCount(b, "sink", repository.DeliveryDelivered) == n
		})
		stop()
		b.ReportMetric(took.Seconds(), "s/backlog")
		b.ReportMetric(float64(n)/took.Seconds(), "events/s")
	}
}
