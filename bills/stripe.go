package bills

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Stripe reads a CSV of Stripe's report balance_change_from_activity.itemized.3 (UTF-8, RFC 4180
// quoting, a header row; columns by name, so any order and extra columns do):
//
//	balance_transaction_id, created_utc, currency, gross, reporting_category,
//	payment_intent_id, payment_metadata[trade_no], source_id
//
// are required. Rows: reporting_category charge is a payment, refund a refund (RefundID =
// source_id, the re_ id refund events carry); other categories (fees, payouts, disputes,
// transfers ...) are skipped and counted in Summary.Skipped. ChannelTxnID is payment_intent_id,
// the id paygw's Stripe notifications carry (for a refund, the payment it undoes); TradeNo is
// payment_metadata[trade_no], which may be empty for a payment paygw did not create. gross is in
// MAJOR units and is converted exactly into the currency's ISO 4217 minor units, paygw's unit
// (minorDigits: JPY "1000" is 1000, USD "10.00" is 1000, KWD "1.234" is 1234, ISK "1000" is 1000);
// being major units, Stripe's own API exponents (channels/stripe: ISK, MGA) play no part; a refund's
// negative gross becomes a positive amount. created_utc ("2006-01-02 15:04:05", or RFC 3339) is
// UTC. The report states no summary.
//
// Fees: fee and net, when the report has those columns (columns[] asks for them), are the line's
// fee and net in major units, converted like gross. Stripe signs them as paygw does: fee positive
// when charged, negative when returned (a refund that gives back its charge's fee), and
// net = gross − fee, a refund's negative. The rate applies to gross; Stripe's standard pricing adds
// a fixed amount per charge, which a rate alone does not describe.
type Stripe struct {
	rows headedRecords
	col  stripeColumns
	sum  Summary
}

type stripeColumns struct{ btxn, created, currency, gross, category, intent, tradeNo, source, fee, net int }

var _ Reader = (*Stripe)(nil)

// NewStripe reads the report. Errors come from Next.
func NewStripe(r io.Reader) *Stripe { return &Stripe{rows: headedRecords{rs: newCSVRecords(r)}} }

// Summary is none, as the report states none; Skipped counts the rows of other categories.
func (s *Stripe) Summary() Summary { return s.sum }

// Header names only the time column: the report names no account and no period; its lines' time is created_utc.
func (s *Stripe) Header() Header { return Header{TimeField: "created_utc"} }

// Next returns the next charge or refund row.
func (s *Stripe) Next() (Line, error) {
	for {
		rec, no, err := s.rows.next("stripe", s.readHeader)
		if err != nil {
			return Line{}, err
		}
		l, skip, err := s.row(no, rec)
		if err != nil {
			return Line{}, err
		}
		if !skip {
			return l, nil
		}
	}
}

func (s *Stripe) readHeader(rec []string) error {
	c := newColumns(rec)
	var err error
	need := c.needer("stripe: line 1", &err)
	s.col = stripeColumns{
		btxn:     need("balance_transaction_id"),
		created:  need("created_utc"),
		currency: need("currency"),
		gross:    need("gross"),
		category: need("reporting_category"),
		intent:   need("payment_intent_id"),
		tradeNo:  need("payment_metadata[trade_no]"),
		source:   need("source_id"),
		fee:      c.opt("fee"),
		net:      c.opt("net"),
	}
	return err
}

func (s *Stripe) row(no int, f []string) (l Line, skip bool, err error) {
	c := s.col
	switch cat := strings.TrimSpace(f[c.category]); cat {
	case "charge":
		l.Kind = KindPay
	case "refund":
		l.Kind = KindRefund
	case "":
		return Line{}, false, lineErr(no, "reporting_category empty")
	default:
		s.sum.Skipped++
		return Line{}, true, nil
	}
	if strings.TrimSpace(f[c.btxn]) == "" {
		return Line{}, false, lineErr(no, "balance_transaction_id empty")
	}
	cur, ok := currencyCode(strings.TrimSpace(f[c.currency]))
	if !ok {
		return Line{}, false, lineErr(no, "currency %s: want an ISO 4217 code", quote(f[c.currency]))
	}
	gross := strings.TrimSpace(f[c.gross])
	amount, err := parseDecimalPadded(gross, minorDigits(cur))
	if err != nil {
		return Line{}, false, lineErr(no, "gross %s (%s): %v", quote(gross), cur, err)
	}
	switch {
	case l.Kind == KindPay && amount <= 0:
		return Line{}, false, lineErr(no, "gross %s: a charge wants a positive amount", quote(gross))
	case l.Kind == KindRefund && amount >= 0:
		return Line{}, false, lineErr(no, "gross %s: a refund wants a negative amount", quote(gross))
	}
	l.AmountFen = max(amount, -amount)
	if l.FeeStated, l.FeeFen, err = stripeMoney(f, c.fee, cur); err != nil {
		return Line{}, false, lineErr(no, "fee %v", err)
	}
	l.FeeBaseFen = l.AmountFen
	if l.NetStated, l.NetFen, err = stripeMoney(f, c.net, cur); err != nil {
		return Line{}, false, lineErr(no, "net %v", err)
	}
	if l.ChannelTxnID = strings.TrimSpace(f[c.intent]); l.ChannelTxnID == "" {
		return Line{}, false, lineErr(no, "payment_intent_id empty: paygw matches Stripe payments by their intent")
	}
	if l.Kind == KindRefund {
		if l.RefundID = strings.TrimSpace(f[c.source]); l.RefundID == "" {
			return Line{}, false, lineErr(no, "source_id empty on a refund")
		}
	}
	created := strings.TrimSpace(f[c.created])
	if l.Time, err = time.Parse(time.DateTime, created); err != nil {
		if l.Time, err = time.Parse(time.RFC3339, created); err != nil {
			return Line{}, false, lineErr(no, "created_utc %s: want yyyy-MM-dd HH:mm:ss", quote(created))
		}
	}
	l.No, l.Currency, l.TradeNo = no, cur, strings.TrimSpace(f[c.tradeNo])
	return l, false, nil
}

// stripeMoney reads an optional money column (fee, net) of a row in cur's minor units; stated is
// false when the header has no such column or the field is empty.
func stripeMoney(f []string, col int, cur string) (stated bool, v int64, err error) {
	if col < 0 {
		return false, 0, nil
	}
	s := strings.TrimSpace(f[col])
	if s == "" {
		return false, 0, nil
	}
	if v, err = parseDecimalPadded(s, minorDigits(cur)); err != nil {
		return false, 0, fmt.Errorf("%s (%s): %v", quote(s), cur, err)
	}
	return true, v, nil
}
