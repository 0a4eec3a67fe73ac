// Package outbox is the room of the event outbox after its rows commit: the sequencer that
// numbers committed events in commit order on one replica at a time, and the wake-up it gives
// the pull feed's long polls. The rows themselves are written by repository's state changes.
package outbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/repository"
)

// Store is what the sequencer needs (repository.DB).
type Store interface {
	lease.Store
	// SequenceEvents numbers up to max committed events that have none, in one transaction, and
	// returns how many it numbered.
	SequenceEvents(ctx context.Context, max int) (int, error)
}

var _ Store = (*repository.DB)(nil)

const (
	// Interval is how often the holder looks for committed events to number: the longest an
	// event waits before the feed can serve it.
	Interval = 100 * time.Millisecond
	// Batch is the most events one sequencing transaction numbers.
	Batch = 500
	// leaseTTL: a replica that dies holding the lease stops the numbering this long at most.
	leaseTTL = 15 * time.Second
	// takeEvery is how often a replica without the lease tries to take it.
	takeEvery = 5 * time.Second
)

// Sequencer numbers committed events (repository.DB.SequenceEvents) while it holds lease.Outbox,
// and tells the feed's waiters in this process when it did.
type Sequencer struct {
	db  Store
	log zerolog.Logger

	mu   sync.Mutex
	wake chan struct{} // closed, and replaced, when a pass numbered events

	// OnSequenced, when not nil, is told how many events each pass numbered. Set before Serve.
	OnSequenced func(n int)
}

// New builds the sequencer over db.
func New(db Store, log zerolog.Logger) *Sequencer {
	return &Sequencer{db: db, log: log, wake: make(chan struct{})}
}

// Changed returns a channel closed the next time this process numbers events. Take it before
// reading the feed, so that a numbering between the read and the wait is not missed.
func (s *Sequencer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

func (s *Sequencer) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.wake)
	s.wake = make(chan struct{})
}

// Serve numbers events every Interval while this replica holds lease.Outbox, and tries to take
// the lease every few seconds while another holds it, until ctx ends.
func (s *Sequencer) Serve(ctx context.Context, holder string) {
	lease.Every(ctx, takeEvery, true, func(ctx context.Context) {
		held, release, err := lease.Hold(ctx, s.db, lease.Outbox, holder, leaseTTL)
		if err != nil {
			var he *lease.HeldError
			if !errors.As(err, &he) && ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("outbox: the sequencer's lease")
			}
			return
		}
		defer release()
		s.log.Info().Msg("outbox: this replica numbers the events")
		lease.Every(held, Interval, true, func(ctx context.Context) { _, _ = s.Pass(ctx) })
	})
}

// Pass numbers every committed event without a seq, a batch at a time, and returns how many.
func (s *Sequencer) Pass(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.db.SequenceEvents(ctx, Batch)
		if n > 0 {
			total += n
			if s.OnSequenced != nil {
				s.OnSequenced(n)
			}
			s.notify()
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("outbox: numbering events; next pass retries")
			}
			return total, err
		}
		if n < Batch {
			return total, nil
		}
	}
}
