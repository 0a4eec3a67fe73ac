package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BillLease is the job_lease row that makes bill runs one at a time, whoever starts them: serve's
// daily bills and `paygw reconcile bill` take the same lease.
const BillLease = "reconcile_bill"

// billLeaseTTL is how long the lease outlives its holder's last renewal: a holder that dies hands
// over within it. A live holder renews it every billLeaseTTL/3.
const billLeaseTTL = 10 * time.Minute

// LeaseHeldError: another holder has the bill lease.
type LeaseHeldError struct {
	Holder string
	Since  time.Time // zero when unknown (taken before migration 00011)
	Until  time.Time // when it lapses unless its holder renews it
}

func (e *LeaseHeldError) Error() string {
	since := "since a time not recorded"
	if !e.Since.IsZero() {
		since = "since " + e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("another bill run is under way: the %s lease is held by %q %s (until %s unless renewed); run again once it is done",
		BillLease, e.Holder, since, e.Until.UTC().Format(time.RFC3339))
}

// ErrLeaseLost ends the context of a holder that could not renew the bill lease.
var ErrLeaseLost = errors.New("the bill lease was lost")

// HoldBillLease takes the bill lease for holder (at most 64 bytes) and renews it until release
// is called, which gives it up. The context it returns ends, with cause ErrLeaseLost, if a
// renewal fails for longer than the lease lasts or another holder has taken it: a run under it
// stops rather than run beside another. A *LeaseHeldError says who holds it instead.
func (j *Job) HoldBillLease(ctx context.Context, holder string) (context.Context, func(), error) {
	if err := j.db.EnsureLease(ctx, BillLease); err != nil {
		return nil, nil, err
	}
	// Twice: a lease that lapses between the taking and the reading is taken at the second try.
	for try := 0; ; try++ {
		ok, err := j.db.TakeLease(ctx, BillLease, holder, billLeaseTTL)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			break
		}
		l, now, err := j.db.ReadLease(ctx, BillLease)
		if err != nil {
			return nil, nil, err
		}
		if l.Held(now) || try == 1 {
			return nil, nil, &LeaseHeldError{Holder: l.Holder, Since: l.TakenAt.Time, Until: l.ExpiresAt}
		}
	}
	held, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(billLeaseTTL / 3)
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
			ok, err := j.db.TakeLease(held, BillLease, holder, billLeaseTTL)
			switch {
			case err == nil && ok:
				last = time.Now()
			case err == nil || time.Since(last) > billLeaseTTL*2/3:
				cancel(ErrLeaseLost)
				return
			}
		}
	}()
	release := func() {
		close(done)
		<-stopped
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		_ = j.db.ReleaseLease(rctx, BillLease, holder)
	}
	return held, release, nil
}
