package stripe

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
)

// stripeBills builds Stripe's bill of a day from its balance transactions, listed through the
// trade querier's stripe-go client: every transaction created in [day, day+1) in the configured
// zone, with data.source (the charge or refund) and data.source.payment_intent expanded. Stripe
// has no bill file; the lines are written in paygw's generic CSV format (bills.NewCSV) and read
// back by that reader, so that Stripe's lines go through the same checks as any bill's:
//
//   - types charge and payment are PAY lines: channel_txn_id = the charge's payment_intent (what
//     Stripe's notifications carry; the charge id for a charge without one), amount_fen and
//     currency the charge's own (the presentment amount, as the notifications state it; the
//     balance transaction's amount may be converted), turned from Stripe's minor units into
//     ISO 4217's (fromStripe: ISK, MGA) as the notifications' are;
//   - types refund and payment_refund are REFUND lines of the refund's amount, refund_id = the
//     refund id (re_...), channel_txn_id = its payment_intent;
//   - trade_no is the PaymentIntent's metadata.trade_no (the charge's when the PaymentIntent has
//     none); a line without one is written with it empty, and the reader counts it as a bad line;
//   - time is the balance transaction's created, in the day's zone;
//   - other types (fees, payouts, transfers, ...) are not reconciled and not written.
type stripeBills struct {
	sc  *stripe.Client
	loc *time.Location
}

var _ channels.BillDownloader = (*stripeBills)(nil)

// NewBillDownloader builds the balance-transaction bill of c's account over the same client as
// NewQuerier (same errors, channels.ErrNoCredentials included; the same api_base_url, path prefix
// included). loc is the zone of the bill's day (reconcile.stripe_timezone); nil is UTC.
func NewBillDownloader(c config.Stripe, loc *time.Location, hc *http.Client) (channels.BillDownloader, error) {
	q, err := NewQuerier(c, hc)
	if err != nil {
		return nil, err
	}
	if loc == nil {
		loc = time.UTC
	}
	return &stripeBills{sc: q.(*stripeQuerier).sc, loc: loc}, nil
}

func (s *stripeBills) Name() string { return "stripe" }

// DownloadBill lists day's balance transactions (day's date in the configured zone).
// Errors: channels.ErrQueryFailed when Stripe could not be asked or answered an error; channels.ErrMalformed when
// a 2xx body does not decode.
func (s *stripeBills) DownloadBill(ctx context.Context, day time.Time) (_ *channels.BillFile, err error) {
	y, m, d := day.Date()
	from := time.Date(y, m, d, 0, 0, 0, 0, s.loc)
	to := from.AddDate(0, 0, 1)
	b, err := channels.NewBillFile("stripe", bills.FormatCSV, from)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	w := csv.NewWriter(b)
	_ = w.Write([]string{"trade_no", "channel_txn_id", "kind", "amount_fen", "currency", "time", "refund_id"})
	if err := s.list(ctx, from, to, func(row []string) error {
		if err := w.Write(row); err != nil {
			return err
		}
		if b.Size() > channels.MaxBillBytes {
			return fmt.Errorf("%w: stripe: the day's lines are %w", channels.ErrMalformed, channels.ErrBillTooLarge)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("channels: stripe: spooling the bill: %w", err)
	}
	return b, nil
}

// list calls row with the CSV row of every reconciled balance transaction of [from, to).
func (s *stripeBills) list(ctx context.Context, from, to time.Time, row func([]string) error) (err error) {
	defer stripeRecover(&err)
	params := &stripe.BalanceTransactionListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: from.Unix(), LesserThan: to.Unix(),
	}}
	params.Limit = stripe.Int64(100)
	params.AddExpand("data.source")
	params.AddExpand("data.source.payment_intent")
	ex := new(stripeExchange)
	for bt, err := range s.sc.V1BalanceTransactions.List(context.WithValue(ctx, stripeExchangeKey{}, ex), params) {
		if err != nil {
			return stripeQueryError(ctx, err, ex, &stripe.BalanceTransactionList{})
		}
		r, ok, err := stripeBillRow(bt, s.loc)
		if err != nil {
			return err
		}
		if ok {
			if err := row(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// stripeBillRow is the generic CSV row of a balance transaction, ok false for types not
// reconciled.
func stripeBillRow(bt *stripe.BalanceTransaction, loc *time.Location) (row []string, ok bool, err error) {
	if bt == nil {
		return nil, false, fmt.Errorf("%w: stripe: a null balance transaction", channels.ErrMalformed)
	}
	at := time.Unix(bt.Created, 0).In(loc).Format(time.RFC3339)
	src := bt.Source
	switch bt.Type {
	case stripe.BalanceTransactionTypeCharge, stripe.BalanceTransactionTypePayment:
		if src == nil || src.Charge == nil {
			return nil, false, fmt.Errorf("%w: stripe: balance transaction %s: source is not an expanded charge", channels.ErrMalformed, channels.Quote(bt.ID))
		}
		ch := src.Charge
		txn, tradeNo := ch.ID, ch.Metadata["trade_no"]
		if pi := ch.PaymentIntent; pi != nil && pi.ID != "" {
			txn = pi.ID
			if t := pi.Metadata["trade_no"]; t != "" {
				tradeNo = t
			}
		}
		cur := strings.ToUpper(string(ch.Currency))
		amount, err := fromStripe(ch.Amount, cur)
		if err != nil {
			return nil, false, err
		}
		return []string{tradeNo, txn, "PAY", strconv.FormatInt(amount, 10), cur, at, ""}, true, nil
	case stripe.BalanceTransactionTypeRefund, stripe.BalanceTransactionTypePaymentRefund:
		if src == nil || src.Refund == nil {
			return nil, false, fmt.Errorf("%w: stripe: balance transaction %s: source is not an expanded refund", channels.ErrMalformed, channels.Quote(bt.ID))
		}
		rf := src.Refund
		txn, tradeNo := "", ""
		if rf.Charge != nil {
			txn = rf.Charge.ID
		}
		if pi := rf.PaymentIntent; pi != nil && pi.ID != "" {
			txn, tradeNo = pi.ID, pi.Metadata["trade_no"]
		}
		cur := strings.ToUpper(string(rf.Currency))
		amount, err := fromStripe(rf.Amount, cur)
		if err != nil {
			return nil, false, err
		}
		return []string{tradeNo, txn, "REFUND", strconv.FormatInt(amount, 10), cur, at, rf.ID}, true, nil
	}
	return nil, false, nil
}
