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
	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

func (a *app) whyCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "why TRADE_NO | --channel-txn-id ID | --merchant-order-id ID | --user-id N",
		Short: "why is this order (not) paid: what paygw knows of it",
		Long: `Explain why an order is (not) paid, as GET /v1/payments/{trade_no} does: a summary, then
every fact paygw holds of it (attempts, notifications, queries, refunds, anomalies, refusals),
oldest first. A complaint rarely comes with our trade_no: instead of it, name the channel's
transaction that paid the order, the merchant's own order id, or the user. When that finds
several orders (a user's), why lists them, newest first (at most 100), to ask again by trade_no.
Exit 1 if the database has no such order; 2 for no key or two.`,
	}, exitFailed)
	asJSON := jsonFlag(c)
	var by whyKeys
	// Checked with the command line, before the config is read: no key or two is a usage error.
	c.Args = func(c *cobra.Command, args []string) error {
		by.userSet = c.Flags().Changed("user-id")
		_, err := by.filter(args)
		return err
	}
	c.Flags().StringVar(&by.txn, "channel-txn-id", "", "the channel's transaction id that paid the order")
	c.Flags().StringVar(&by.merchant, "merchant-order-id", "", "the merchant's own order id")
	c.Flags().Int64Var(&by.user, "user-id", 0, "the user's id (lists the user's orders)")
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, args []string) error {
		return a.why(ctx, cfg, args, by, *asJSON)
	})
}

// whyKeys are why's other ways to name an order.
type whyKeys struct {
	txn, merchant string
	user          int64
	userSet       bool
}

// filter is the search the keys ask for, or a usage error when there is not exactly one key.
func (k whyKeys) filter(args []string) (repository.OrderFilter, error) {
	f := repository.OrderFilter{ChannelTxnID: k.txn, MerchantOrderID: k.merchant, UserID: k.user, HasUserID: k.userSet}
	n := len(args)
	for _, set := range []bool{k.txn != "", k.merchant != "", k.userSet} {
		if set {
			n++
		}
	}
	if n != 1 {
		return f, fmt.Errorf("name one order: a trade_no, --channel-txn-id, --merchant-order-id or --user-id (got %d)", n)
	}
	return f, nil
}

// whyJSON is `paygw why --json`.
type whyJSON struct {
	TradeNo string `json:"trade_no"`
	Status  string `json:"status"`
	explain.Explanation
}

// whyMatch is one order of `paygw why --json` when the key found several.
type whyMatch struct {
	TradeNo   string    `json:"trade_no"`
	Status    string    `json:"status"`
	AmountFen int64     `json:"amount_fen"`
	Currency  string    `json:"currency"`
	CreatedAt time.Time `json:"created_at"`
}

// why prints what GET /v1/payments/{trade_no} explains: the summary, then the facts. Named by
// another key, it explains the one order found, or lists the several.
func (a *app) why(ctx context.Context, cfg *config.Config, args []string, by whyKeys, asJSON bool) error {
	f, err := by.filter(args)
	if err != nil {
		return err
	}
	if len(args) == 1 && !payment.ValidTradeNo(args[0]) {
		return usagef("why: %q is not a trade_no", args[0])
	}
	// Quiet: refusals are kept per database, so Redis is bound to its identity, but nothing of
	// that belongs in the answer.
	s, err := openStores(ctx, cfg, storeOptions{conns: 2, oneShot: true}, zerolog.Nop())
	if err != nil {
		return err
	}
	defer s.Close()
	tradeNo := ""
	if len(args) == 1 {
		tradeNo = args[0]
	} else {
		found, _, err := s.db.SearchOrders(ctx, f, 100)
		switch {
		case err != nil:
			return err
		case len(found) == 0:
			return errors.New("why: no order matches in this database")
		case len(found) > 1:
			return a.whyList(found, asJSON)
		}
		tradeNo = found[0].TradeNo
	}
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

// whyList prints the orders a key found, newest first: {"orders":[...]} with --json.
func (a *app) whyList(found []payment.Order, asJSON bool) error {
	if asJSON {
		out := struct {
			Orders []whyMatch `json:"orders"`
		}{}
		for _, o := range found {
			out.Orders = append(out.Orders, whyMatch{o.TradeNo, o.Status, o.AmountFen, o.Currency, o.CreateTime})
		}
		return writeJSON(a.stdout, out)
	}
	fmt.Fprintf(a.stdout, "%d orders match; ask again with a trade_no:\n", len(found))
	for _, o := range found {
		fmt.Fprintf(a.stdout, "%s  %-8s %s  %s\n", o.TradeNo, o.Status, money.Format(o.AmountFen, o.Currency), o.CreateTime.UTC().Format(time.RFC3339))
	}
	return nil
}
