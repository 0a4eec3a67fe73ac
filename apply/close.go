package apply

import (
	"context"
	"errors"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// closeTrade applies a channel's close (KindClosed): the trade at that channel can no longer be
// paid. An order is CLOSED only when none of its attempts can still be paid, so the close marks
// the channel's attempt closed (repository.CloseAttempts) and moves the order WAIT_PAY -> CLOSED
// only when no other attempt of it is open; an order with no attempt at all closes at once, as
// before attempts were known. Otherwise, and for an order that is not WAIT_PAY, the close is
// JOURNALLED: the order is untouched and its open attempts keep being asked. A payment that
// arrives after a close is PAID_AFTER_CLOSE (see classify). Runs under the order's row lock, so
// two closes of one order, or a close and a new attempt, decide one after the other.
func closeTrade(ctx context.Context, tx *repository.Tx, ev payment.Event, now time.Time) (payment.Outcome, error) {
	o, err := tx.LockOrder(ctx, ev.TradeNo)
	if errors.Is(err, payment.ErrNotFound) {
		return payment.OutcomeUnknownOrder, errUnknownOrder
	} else if err != nil {
		return "", err
	}
	open, err := tx.CloseAttempts(ctx, ev.TradeNo, ev.Channel, ev.ChannelTxnID, now)
	switch {
	case err != nil:
		return "", err
	case open > 0 || o.Status != payment.OrderWaitPay:
		return payment.OutcomeJournalled, nil
	}
	if ok, err := tx.MarkClosed(ctx, ev.TradeNo, now); err != nil {
		return "", err
	} else if !ok {
		return "", errors.New("order changed under its row lock")
	}
	return payment.OutcomeClosed, nil
}
