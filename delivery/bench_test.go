package delivery_test

import (
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/repository"
)

// BenchmarkDrain10k times how long a backlog of 10,000 events (2,500 orders of four events)
// takes to reach a local receiver that answers at once: events/s is the delivery rate.
// Run: go test -run '^$' -bench Drain -benchtime 1x ./delivery
func BenchmarkDrain10k(b *testing.B) {
	const n = 10000
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
		b.ReportMetric(took.Seconds(), "s/10k-backlog")
		b.ReportMetric(n/took.Seconds(), "events/s")
	}
}
