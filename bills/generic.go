package bills

import (
	"io"
	"strings"
	"time"
)

// CSV reads paygw's generic bill, for a channel without a reader of its own. The format:
//
//   - UTF-8 text, RFC 4180 CSV (fields may be quoted), LF or CRLF line endings;
//   - a header row naming the columns, in any order; extra columns are ignored:
//     trade_no, channel_txn_id, kind, amount_fen, currency, time are required, refund_id and
//     fee_fen are optional;
//   - one row per transaction:
//     trade_no       the merchant order number (paygw's trade_no), not empty;
//     channel_txn_id the channel's transaction id, the one its notifications carry; for a refund,
//     the payment it undoes; not empty;
//     kind           PAY or REFUND;
//     amount_fen     the amount in the currency's minor units, digits only, greater than zero
//     (a refund's amount is positive too);
//     currency       ISO 4217, three letters (upper-cased);
//     time           when it happened, RFC 3339 with an offset ("2024-05-01T10:20:30+08:00");
//     refund_id      the channel's refund id, for refunds (may be empty);
//     fee_fen        the channel's fee on the line in minor units, digits with an optional '-':
//     positive when charged, negative when returned with a refund (may be empty: no fee
//     stated). The rate applies to amount_fen. There is no net column: the net follows.
//
// Example:
//
//	trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id,fee_fen
//	T20240501001,ch_1001,PAY,1999,CNY,2024-05-01T10:20:30+08:00,,12
//	T20240501001,ch_1001,REFUND,500,CNY,2024-05-01T12:00:00+08:00,rf_77,-3
//
// The format states no summary.
type CSV struct {
	rows headedRecords
	col  csvColumns
}

type csvColumns struct{ tradeNo, txn, kind, amount, currency, time, refundID, fee int }

var _ Reader = (*CSV)(nil)

// NewCSV reads a generic bill. Errors come from Next.
func NewCSV(r io.Reader) *CSV { return &CSV{rows: headedRecords{rs: newCSVRecords(r)}} }

// Summary is none: the format states none.
func (c *CSV) Summary() Summary { return Summary{} }

// Header names only the time column: the format states no merchant and no period; its lines' time is "time".
func (c *CSV) Header() Header { return Header{TimeField: "time"} }

// Next returns the next row.
func (c *CSV) Next() (Line, error) {
	rec, no, err := c.rows.next("csv", c.readHeader)
	if err != nil {
		return Line{}, err
	}
	return c.row(no, rec)
}

func (c *CSV) readHeader(rec []string) error {
	cols := newColumns(rec)
	var err error
	need := cols.needer("csv: line 1", &err)
	c.col = csvColumns{
		tradeNo:  need("trade_no"),
		txn:      need("channel_txn_id"),
		kind:     need("kind"),
		amount:   need("amount_fen"),
		currency: need("currency"),
		time:     need("time"),
		refundID: cols.opt("refund_id"),
		fee:      cols.opt("fee_fen"),
	}
	return err
}

func (c *CSV) row(no int, f []string) (l Line, err error) {
	col := c.col
	switch k := strings.TrimSpace(f[col.kind]); k {
	case "PAY":
		l.Kind = KindPay
	case "REFUND":
		l.Kind = KindRefund
		if col.refundID >= 0 {
			l.RefundID = strings.TrimSpace(f[col.refundID])
		}
	default:
		return Line{}, lineErr(no, "kind %s: want PAY or REFUND", quote(k))
	}
	if l.TradeNo = strings.TrimSpace(f[col.tradeNo]); l.TradeNo == "" {
		return Line{}, lineErr(no, "trade_no empty")
	}
	if l.ChannelTxnID = strings.TrimSpace(f[col.txn]); l.ChannelTxnID == "" {
		return Line{}, lineErr(no, "channel_txn_id empty")
	}
	amount := strings.TrimSpace(f[col.amount])
	if l.AmountFen, err = parseUint(amount); err != nil || l.AmountFen == 0 {
		return Line{}, lineErr(no, "amount_fen %s: want minor units, digits only, above zero", quote(amount))
	}
	var ok bool
	if l.Currency, ok = currencyCode(strings.TrimSpace(f[col.currency])); !ok {
		return Line{}, lineErr(no, "currency %s: want an ISO 4217 code", quote(f[col.currency]))
	}
	ts := strings.TrimSpace(f[col.time])
	if l.Time, err = time.Parse(time.RFC3339, ts); err != nil {
		return Line{}, lineErr(no, "time %s: want RFC 3339", quote(ts))
	}
	if col.fee >= 0 {
		if fee := strings.TrimSpace(f[col.fee]); fee != "" {
			if l.FeeFen, err = parseSigned(fee); err != nil {
				return Line{}, lineErr(no, "fee_fen %s: want minor units, digits with an optional '-'", quote(fee))
			}
			l.FeeStated, l.FeeBaseFen = true, l.AmountFen
		}
	}
	l.No = no
	return l, nil
}
