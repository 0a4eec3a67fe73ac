package explain

import (
	"context"
	"encoding/json"

	"github.com/paygw/paygw/payment"
)

// Books is what Load reads from the database (repository.DB).
type Books interface {
	// GetOrder returns payment.ErrNotFound if there is no such order.
	GetOrder(ctx context.Context, tradeNo string) (payment.Order, error)
	Attempts(ctx context.Context, tradeNo string) ([]payment.Attempt, error)
	Notifications(ctx context.Context, tradeNo string) ([]payment.Notification, error)
	Refunds(ctx context.Context, tradeNo string) ([]payment.Refund, error)
	Anomalies(ctx context.Context, tradeNo string) ([]payment.Anomaly, error)
}

// RefusalLog keeps the refused notifications of an order, as JSON Refusals (guard.Guard, in
// Redis).
type RefusalLog interface {
	Refusals(ctx context.Context, tradeNo string) ([]string, error)
}

// Load reads everything known of an order: what GET /v1/payments and `paygw why` explain. It
// returns payment.ErrNotFound if there is no such order. Refusals are read when the log answers,
// and left out when it does not (Redis down).
func Load(ctx context.Context, b Books, log RefusalLog, tradeNo string) (Record, error) {
	var r Record
	var err error
	if r.Order, err = b.GetOrder(ctx, tradeNo); err != nil {
		return r, err
	}
	if r.Attempts, err = b.Attempts(ctx, tradeNo); err != nil {
		return r, err
	}
	if r.Notifications, err = b.Notifications(ctx, tradeNo); err != nil {
		return r, err
	}
	if r.Refunds, err = b.Refunds(ctx, tradeNo); err != nil {
		return r, err
	}
	if r.Anomalies, err = b.Anomalies(ctx, tradeNo); err != nil {
		return r, err
	}
	entries, _ := log.Refusals(ctx, tradeNo) // Redis down: explained without them
	for _, e := range entries {
		var f Refusal
		if json.Unmarshal([]byte(e), &f) == nil {
			r.Refusals = append(r.Refusals, f)
		}
	}
	return r, nil
}
