// Package lease makes background work run on one replica at a time: a row per job in job_lease,
// taken by the database's clock, and the one loop every background job runs in.
package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/paygw/paygw/repository"
)

// The job_lease rows: one per job that runs on one replica at a time.
const (
	// ReconcileQuery: the query job (reconcile.Job.Serve), held from run to run.
	ReconcileQuery = "reconcile_query"
	// ReconcileBill: bill runs, serve's daily ones and `paygw reconcile bill` alike, held for a run.
	ReconcileBill = "reconcile_bill"
	// Purge: the retention purge, taken for a day by the replica that purged.
	Purge = "purge"
	// WebhookDelivery: one lease per delivery shard (WebhookShard), held by the replica that
	// fans out and POSTs that shard's webhook deliveries, from its start until it stops.
	WebhookDelivery = "webhook_delivery"
	// Outbox: the outbox's sequencer (outbox.Sequencer.Serve), held while its replica runs.
	Outbox = "outbox"
)

// WebhookShard names the lease of webhook delivery shard i (job_lease.name is 32 bytes at most).
func WebhookShard(i int) string { return fmt.Sprintf("%s_%d", WebhookDelivery, i) }

// Store is the job_lease table (repository.DB).
type Store interface {
	// EnsureLease adds the named lease's row, free, unless it exists.
	EnsureLease(ctx context.Context, name string) error
	// TakeLease takes or extends the lease for holder until ttl from now, if it is free, expired
	// or holder's already; ok reports whether holder has it.
	TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (ok bool, err error)
	// ReleaseLease gives the lease up if holder has it.
	ReleaseLease(ctx context.Context, name, holder string) error
	// ReadLease reads the lease and the database's clock.
	ReadLease(ctx context.Context, name string) (repository.Lease, time.Time, error)
}

var _ Store = (*repository.DB)(nil)

// Every calls look at start when atStart, then every interval, until ctx ends: the loop of every
// background job. A look that runs long delays the next; ticks are not queued.
func Every(ctx context.Context, every time.Duration, atStart bool, look func(ctx context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	if atStart {
		look(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		look(ctx)
	}
}

// Holder names this process in a lease, at most 64 bytes: what runs ("" for nothing more), the
// host and the pid.
func Holder(what string) string {
	host, _ := os.Hostname()
	h := fmt.Sprintf("%s:%d", host, os.Getpid())
	if what != "" {
		h = what + " on " + h
	}
	if len(h) > 64 {
		h = h[:64]
	}
	return h
}

// HeldError is the error of a lease another holder has.
type HeldError struct {
	Name   string
	Holder string
	Since  time.Time // zero when unknown (taken before migration 00011)
	Until  time.Time // when it lapses unless its holder renews it
}

func (e *HeldError) Error() string {
	since := "since a time not recorded"
	if !e.Since.IsZero() {
		since = "since " + e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("another run is under way: the %s lease is held by %q %s (until %s unless renewed); run again once it is done",
		e.Name, e.Holder, since, e.Until.UTC().Format(time.RFC3339))
}

// ErrLost ends the context of a holder that could not renew its lease.
var ErrLost = errors.New("the lease was lost")

// Hold takes the named lease for holder (at most 64 bytes) for ttl and renews it every ttl/3
// until release is called, which gives it up. The context it returns ends, with cause ErrLost, if
// a renewal fails for longer than the lease lasts or another holder has taken it: work under it
// stops rather than run beside another. A *HeldError says who holds it instead.
func Hold(ctx context.Context, s Store, name, holder string, ttl time.Duration) (context.Context, func(), error) {
	if err := take(ctx, s, name, holder, ttl); err != nil {
		return nil, nil, err
	}
	held, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		renew(held, s, name, holder, ttl, done, cancel)
	}()
	release := func() {
		close(done)
		<-stopped
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		_ = s.ReleaseLease(rctx, name, holder)
	}
	return held, release, nil
}

// take takes the lease, or says who holds it.
func take(ctx context.Context, s Store, name, holder string, ttl time.Duration) error {
	if err := s.EnsureLease(ctx, name); err != nil {
		return err
	}
	// Twice: a lease that lapses between the taking and the reading is taken at the second try.
	for try := 0; ; try++ {
		ok, err := s.TakeLease(ctx, name, holder, ttl)
		if err != nil || ok {
			return err
		}
		l, now, err := s.ReadLease(ctx, name)
		if err != nil {
			return err
		}
		if l.Held(now) || try == 1 {
			return &HeldError{Name: name, Holder: l.Holder, Since: l.TakenAt.Time, Until: l.ExpiresAt}
		}
	}
}

// renew extends the lease every ttl/3 until done is closed or held ends; it cancels held with
// ErrLost when the lease is another's or could not be renewed for two thirds of ttl.
func renew(held context.Context, s Store, name, holder string, ttl time.Duration, done <-chan struct{}, cancel context.CancelCauseFunc) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case <-held.Done():
			return
		case <-t.C:
		}
		ok, err := s.TakeLease(held, name, holder, ttl)
		switch {
		case err == nil && ok:
			last = time.Now()
		case err == nil || time.Since(last) > ttl*2/3:
			cancel(ErrLost)
			return
		}
	}
}
