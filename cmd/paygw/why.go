package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/payment"
)

func (a *app) whyCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "why TRADE_NO",
		Short: "why is this order (not) paid: what paygw knows of it",
		Long: `Explain why an order is (not) paid, as GET /v1/payments/{trade_no} does: a summary, then
every fact paygw holds of it (attempts, notifications, queries, refunds, anomalies, refusals),
oldest first. Exit 1 if the database has no such order.`,
		Args: cobra.ExactArgs(1),
	}, exitFailed)
	asJSON := jsonFlag(c)
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, args []string) error {
		return a.why(ctx, cfg, args[0], *asJSON)
	})
}

// whyJSON is `paygw why --json`.
type whyJSON struct {
	TradeNo string `json:"trade_no"`
	Status  string `json:"status"`
	explain.Explanation
}

// why prints what GET /v1/payments/{trade_no} explains: the summary, then the facts.
func (a *app) why(ctx context.Context, cfg *config.Config, tradeNo string, asJSON bool) error {
	if !payment.ValidTradeNo(tradeNo) {
		return usagef("why: %q is not a trade_no", tradeNo)
	}
	// Quiet: refusals are kept per database, so Redis is bound to its identity, but nothing of
	// that belongs in the answer.
	s, err := openStores(ctx, cfg, storeOptions{conns: 2, oneShot: true}, zerolog.Nop())
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := explain.Load(ctx, s.db, s.guard, tradeNo)
	if errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("why: no order %s in this database", tradeNo)
	} else if err != nil {
		return err
	}
	e := explain.Of(r)
	if asJSON {
		return writeJSON(a.stdout, whyJSON{TradeNo: tradeNo, Status: r.Order.Status, Explanation: e})
	}
	fmt.Fprintf(a.stdout, "%s %s\n%s\n\n", tradeNo, r.Order.Status, e.Summary)
	for _, f := range e.Facts {
		fmt.Fprintf(a.stdout, "%s  %-8s %s\n", f.At.UTC().Format(time.RFC3339), f.Source, f.Text)
	}
	return nil
}
