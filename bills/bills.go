// Package bills reads the channels' daily bills, in each channel's real format, into lines paygw
// can match against its own books. Every reader streams: it holds one line at a time, whatever
// the bill's size. Open is the one way in, for a downloaded bill and an operator's file alike;
// DayZone says which day a channel's bill covers.
package bills

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what a bill line records.
type Kind string

const (
	KindPay    Kind = "PAY"
	KindRefund Kind = "REFUND"
)

// Line is one transaction of a bill, in paygw's words. Money is in minor units, exact.
type Line struct {
	No           int    // line number in the file (1-based), for messages
	Kind         Kind   // PAY or REFUND
	TradeNo      string // the merchant order number as the bill states it (ours if it is ours)
	ChannelTxnID string // the channel's transaction id: the same the notification carries
	RefundID     string // for refunds: the channel's refund id, or the merchant's refund number, when the bill has one
	AmountFen    int64  // always positive: a refund's amount, not its negative
	Currency     string // ISO 4217, upper case
	Time         time.Time
	// Whose line it is, where the format states it on every line (Header names the columns):
	// Merchant is WeChat's 商户号 or UnionPay's 商户代码, AppID WeChat's 公众账号ID; "" otherwise.
	Merchant string
	AppID    string

	// Fees, where the format states them on its lines. FeeFen is the channel's fee on the line in
	// paygw's sign: positive when charged, negative when returned (a refund's share of its payment's
	// fee), whatever sign the bill writes it with; FeeBaseFen is the amount the channel's rate is
	// charged on (each reader says which column). NetFen is what the line settles to the merchant,
	// signed: AmountFen − FeeFen for a payment, −AmountFen − FeeFen for a refund. FeeStated and
	// NetStated say whether the line states them; a reader whose format has no such column leaves
	// them false.
	FeeFen, FeeBaseFen, NetFen int64
	FeeStated, NetStated       bool
}

// Header is what a bill states about itself before its lines: whose bill it is and which period
// it covers, where its format states them (Alipay's # lines), and the names its format gives the
// fields a check may quote. Valid once Next has been called.
type Header struct {
	Account     string    // Alipay #账号: the partner id (2088…) and its 4-digit account suffix
	AccountLine int       // the line stating it; 0 when the bill states none
	From, To    time.Time // Alipay #起始日期 and 终止日期, Beijing time; zero when unreadable
	PeriodLine  int       // the line stating them; 0 when the bill states none
	// Stated: the format states an account and a period before its lines (Alipay's), so a bill
	// of it that leaves either out is not as the channel makes it.
	Stated bool

	// TimeField names Line.Time's column. MerchantField and AppIDField name Line.Merchant's and
	// Line.AppID's, and are "" when the format states no such thing on its lines.
	TimeField, MerchantField, AppIDField string
}

// Headed is a Reader that states a Header. Every reader of this package is one; a Reader that
// is not states nothing but lines.
type Headed interface {
	Header() Header
}

// Summary is what a bill states about itself, when it does (counts and totals in minor units).
// A reader fills it once it has read past the detail lines; Present is false for bills that
// state none.
type Summary struct {
	Present        bool
	PayCount       int
	PayTotalFen    int64
	RefundCount    int
	RefundTotalFen int64

	// RowCount is a count of every detail row whatever its kind or state, for bills that state
	// that instead of counts per kind (WeChat's 总交易单数); PayCount and RefundCount are then 0.
	RowCount int
	// Skipped counts detail rows read and deliberately not yielded: kinds paygw does not
	// reconcile (each reader documents which). Set for every bill, with a summary or without.
	Skipped int
	// FeeStated: the summary states the bill's fee total, FeeTotalFen, in paygw's sign (positive
	// when charged; the sum of the lines' FeeFen). SkippedFeeFen is the fee on the rows counted in
	// Skipped, which the summary's total includes and no line carries.
	FeeStated     bool
	FeeTotalFen   int64
	SkippedFeeFen int64
	// Mismatch is set when the bill's summary disagrees with its detail rows, compared in the
	// bill's own terms by the reader that knows them (which column a total sums, which rows a
	// count counts). Bad lines cannot be summed, so a bill with any usually mismatches too.
	Mismatch string
}

// LineError is a detail line that could not be read. Readers report it and go on: a bad line is
// counted, never dropped silently and never turned into a match.
type LineError struct {
	No     int
	Reason string // names the column or the problem; never more than a short quote of input
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.No, e.Reason) }

// ErrFormat means the file is not a bill of the format asked for (wrong encoding, a missing column,
// a truncated archive). The run stops; the error names the file position.
var ErrFormat = errors.New("bills: not a bill of this format")

// Reader yields a bill's lines one at a time.
type Reader interface {
	// Next returns the next line; io.EOF after the last. A *LineError is a bad line: the caller
	// counts it and calls Next again. An error wrapping ErrFormat ends the bill.
	Next() (Line, error)
	// Summary is the bill's own statement of itself, valid once Next has returned io.EOF.
	Summary() Summary
}
