package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/outbox"
)

// Two replicas serve the sequencer: one holds the lease and numbers every event once, in one
// run of seqs, and wakes its waiters; the other waits for the lease.
func TestOneReplicaNumbersTheEvents(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	db := testenv.Open(t, dsn)
	var log testenv.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var seqs []*outbox.Sequencer
	for _, holder := range []string{"replica-a", "replica-b"} {
		s := outbox.New(db, zerolog.New(&log))
		seqs = append(seqs, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Serve(ctx, holder)
		}()
	}
	testenv.Until(t, 10*time.Second, "a replica took the lease", func() bool {
		return strings.Contains(log.String(), "this replica numbers the events")
	})
	woken := []<-chan struct{}{seqs[0].Changed(), seqs[1].Changed()}
	testenv.OldEvents(t, dsn, "a", 700, 0, 0) // more than a batch
	testenv.Until(t, 10*time.Second, "every event numbered", func() bool {
		return testenv.Count(t, dsn, `SELECT COUNT(*) FROM event WHERE seq IS NULL`) == 0
	})
	if n := testenv.Count(t, dsn, `SELECT MAX(seq) - MIN(seq) + 1 FROM event`); n != 700 {
		t.Fatalf("seqs span %d, want 700", n)
	}
	awake := 0
	for _, w := range woken {
		select {
		case <-w:
			awake++
		case <-time.After(time.Second):
		}
	}
	cancel()
	wg.Wait()
	if awake != 1 {
		t.Fatalf("%d replicas woke their waiters, want the holder's alone", awake)
	}
	if n := strings.Count(log.String(), "this replica numbers the events"); n != 1 {
		t.Fatalf("%d replicas took the lease, want 1:\n%s", n, log.String())
	}
}
