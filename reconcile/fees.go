package reconcile

import (
	"cmp"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/repository"
)

// A bill run keeps the bill's own totals, per currency of its lines (repository.RunTotal): the
// payments (gross), the refunds, the channel's fees and the net the day settles to the merchant
// (gross − refunds − fees), beside what the bill states of them. Fees move no money in paygw, so
// what disagrees is a FEE_MISMATCH row, one per finding: it repairs nothing, leaves the bill
// trusted (the payments and refunds are matched and repaired on their amounts, which the summary
// check covers), and waits for a person. The checks:
//   - a line that states its net (Stripe): its amount, signed (a refund's negative),
//     less its fee, is its net (key fee:net:<line>);
//   - a payment line that states a fee, when the channel has a rate (channels.X.fee_rate): its fee
//     is the rate times its fee base (bills.Line.FeeBaseFen), rounded half up to the minor unit
//     (feeAt) (key fee:rate:<line>);
//   - a bill whose summary states a fee total (WeChat's 手续费总金额): its lines' fees, and those of
//     the rows it skips, add up to it (key fee:summary). A summary states one total for a bill of
//     one currency; a bill whose lines are in several is not checked against it.
// The per-line net checks make the totals' net the stated net's sum when every line passes, so
// there is no separate check of the totals.

// FeeRate is a channel's configured fee rate (channels.X.fee_rate) in parts per million: 0.6%
// is 6000. Set is false when the channel configures none; a rate of 0 is a rate.
type FeeRate struct {
	PPM int64
	Set bool
}

// feeAt is the fee a rate of ppm parts per million charges on base minor units, rounded half up
// to the minor unit (四舍五入). A real WeChat bill shows it (6.00 at 0.60% is 0.04: 3.6 fen up,
// 0.01 at 1.00% is 0.00); for Alipay and UnionPay it is an assumption, as no bill of theirs with
// a fee other than 0 was at hand. Nothing at hand documents a fee a minor unit off that, so no
// such slack is allowed. Exact for any base a bill can hold (bills.maxMinor) and a rate below 1:
// the product is split so that nothing overflows.
func feeAt(base, ppm int64) int64 {
	const million = 1_000_000
	base = max(base, -base)
	return base/million*ppm + (base%million*ppm+million/2)/million
}

// feeTally is a run's totals while its lines stream past.
type feeTally struct {
	rate   FeeRate
	totals map[string]*repository.RunTotal // per currency
	netAll map[string]bool                 // every line of the currency states its net
}

func newFeeTally(rate FeeRate) feeTally {
	return feeTally{rate: rate, totals: map[string]*repository.RunTotal{}, netAll: map[string]bool{}}
}

// feeLine adds a line to the run's totals and checks its fee against its own net and, for a
// payment, against the channel's rate.
func (b *billRun) feeLine(l bills.Line) error {
	f := &b.fees
	t, ok := f.totals[l.Currency]
	if !ok {
		t = &repository.RunTotal{Currency: l.Currency}
		f.totals[l.Currency], f.netAll[l.Currency] = t, true
	}
	signed := l.AmountFen
	if l.Kind == bills.KindPay {
		t.PayCount++
		t.GrossFen += l.AmountFen
	} else {
		t.RefundCount++
		t.RefundFen += l.AmountFen
		signed = -l.AmountFen
	}
	if l.FeeStated {
		t.FeeFen += l.FeeFen
		t.FeeLines++
	}
	t.NetFen = t.GrossFen - t.RefundFen - t.FeeFen
	if l.NetStated {
		t.StatedNetFen.Int64 += l.NetFen
	}
	f.netAll[l.Currency] = f.netAll[l.Currency] && l.NetStated

	d := Discrepancy{Class: ClassFeeMismatch, TradeNo: l.TradeNo, ChannelTxnID: l.ChannelTxnID, Currency: l.Currency}
	key := feeLineKey(l)
	if want := signed - l.FeeFen; l.NetStated && l.FeeStated && l.NetFen != want {
		bill := l.NetFen
		d.BillAmountFen, d.LocalAmountFen = &bill, &want
		detail := fmt.Sprintf("line %d: net %d %s, but its amount %d less its fee %d is %d", l.No, l.NetFen, l.Currency,
			signed, l.FeeFen, want)
		if err := b.record("fee:net:"+key, d, detail, nil); err != nil {
			return err
		}
	}
	if want := feeAt(l.FeeBaseFen, f.rate.PPM); f.rate.Set && l.Kind == bills.KindPay && l.FeeStated && l.FeeFen != want {
		bill := l.FeeFen
		d.BillAmountFen, d.LocalAmountFen = &bill, &want
		detail := fmt.Sprintf("line %d: fee %d %s, but channels.%s.fee_rate %s of %d is %d (rounded half up)", l.No, l.FeeFen,
			l.Currency, b.channel, rateText(f.rate.PPM), l.FeeBaseFen, want)
		if err := b.record("fee:rate:"+key, d, detail, nil); err != nil {
			return err
		}
	}
	return nil
}

// feeLineKey names a line for its fee rows: by its payment, or its refund, as the bill states them.
func feeLineKey(l bills.Line) string {
	if l.Kind == bills.KindPay {
		return "pay:" + l.ChannelTxnID
	}
	return "refund:" + l.ChannelTxnID + ":" + cmp.Or(l.RefundID, "line"+strconv.Itoa(l.No))
}

// checkFees, once the bill is read, checks the lines' fees against the summary's fee total and
// stores the run's totals.
func (b *billRun) checkFees(s bills.Summary) error {
	f := &b.fees
	if s.FeeStated && len(f.totals) <= 1 {
		lines, currency := s.SkippedFeeFen, ""
		for c, t := range f.totals {
			lines, currency = lines+t.FeeFen, c
			t.SummaryFeeFen = sql.NullInt64{Int64: s.FeeTotalFen, Valid: true}
		}
		if lines != s.FeeTotalFen {
			stated := s.FeeTotalFen
			detail := fmt.Sprintf("the summary states fees of %d, the lines add up to %d", stated, lines)
			if bad := b.rep.Counts[ClassBadLine]; bad > 0 {
				detail += fmt.Sprintf(" (%d bad lines are not among them)", bad)
			}
			if err := b.record("fee:summary", Discrepancy{Class: ClassFeeMismatch, BillAmountFen: &stated, LocalAmountFen: &lines, Currency: currency}, detail, nil); err != nil {
				return err
			}
		}
	}
	totals := make([]repository.RunTotal, 0, len(f.totals))
	for _, cur := range slices.Sorted(maps.Keys(f.totals)) {
		t := *f.totals[cur]
		t.StatedNetFen.Valid = f.netAll[cur]
		if !t.StatedNetFen.Valid {
			t.StatedNetFen.Int64 = 0
		}
		totals = append(totals, t)
	}
	return b.j.db.PutRunTotals(b.ctx, b.runID, totals)
}

// rateText writes a rate of ppm parts per million as configured: 6000 is 0.006.
func rateText(ppm int64) string {
	if ppm == 0 {
		return "0"
	}
	frac := fmt.Sprintf("%06d", ppm)
	for frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	return "0." + frac
}
