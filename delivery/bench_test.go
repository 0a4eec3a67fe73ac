package delivery_test

import (
	"flag"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
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
		for e.statusCount(b, "sink", repository.DeliveryDelivered) < n {
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d of %d delivered after 10 minutes", e.statusCount(b, "sink", repository.DeliveryDelivered), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		stop()
		b.ReportMetric(took.Seconds(), "s/backlog")
		b.ReportMetric(float64(n)/took.Seconds(), "events/s")
	}
}
