package reconcile

import (
	"context"
	"time"

	"github.com/paygw/paygw/lease"
)

// billLeaseTTL is how long the bill lease outlives its holder's last renewal: a holder that dies
// hands over within it. A live holder renews it every billLeaseTTL/3.
const billLeaseTTL = 10 * time.Minute

// HoldBillLease takes the bill lease (lease.ReconcileBill, which serve's daily bills and
// `paygw reconcile bill` share) for holder and renews it until release is called. The context it
// returns ends, with cause lease.ErrLost, if the lease is lost: a run under it stops rather than
// run beside another. A *lease.HeldError says who holds it instead.
func (j *Job) HoldBillLease(ctx context.Context, holder string) (context.Context, func(), error) {
	return lease.Hold(ctx, j.db, lease.ReconcileBill, holder, billLeaseTTL)
}
