package bills

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// UnionPay reads UnionPay ACP's ZM file (the merchant's transaction details, in the zip that the
// fileType=00 download returns): GBK, fixed width, 42 fields, each followed by one separator
// byte. Widths count BYTES of GBK, so a field holding Chinese text holds half as many
// characters; the reader cuts the raw bytes first and decodes each field after.
//
// Rows: 交易类型 (txnType) 01 (consume) is a payment, ChannelTxnID = 查询流水号 (queryId); 04
// (refund) and 31 (consume cancel) are refunds, RefundID = their own queryId and ChannelTxnID =
// 原交易查询流水号 (origQryId), the payment undone. Other txnTypes (pre-authorisation and the
// like, which paygw does not use) are skipped and counted in Summary.Skipped. TradeNo is
// 商户订单号 (orderId) without its padding, Merchant 商户代码 (merId); the amount is 交易金额,
// twelve digits of fen; the currency CNY. The time is 交易传输时间, MMDDhhmmss in Beijing time,
// which carries no year: the reader takes the year that puts it nearest the bill date, so a
// January 1st bill can hold December 31st lines of the year before; a time more than 31 days
// from the bill date is a bad line. The ZM file states no summary.
//
// Fees: 商户手续费 is the line's fee, a C or D and twelve digits of fen (PROTOCOLS.md): C credits
// the merchant, D debits it, so a fee charged is D (FeeFen positive) and one returned on a refund
// C (negative). The rate applies to 交易金额. A field of spaces states nothing; anything else but
// C/D and twelve digits is a bad line. 清算净额 (the net) is not read: no real ZM line is public
// and nothing documents how it signs a refund's net (paygw's own fake writes a bare magnitude),
// so its net is computed, not checked.
type UnionPay struct {
	lr     *lineReader
	date   time.Time
	fields [len(zmWidths)]string
	sum    Summary
	err    error
}

// zmWidths are the ZM fields' widths in bytes, in order.
var zmWidths = [...]int{3, 11, 11, 6, 10, 19, 12, 4, 2, 21, 2, 32, 2, 6, 10, 13, 13, 4, 15, 2, 2, 6, 2, 4, 32, 1, 21, 15, 1, 15, 32, 13, 13, 8, 32, 13, 13, 12, 2, 1, 32, 98}

// Positions of the fields the reader uses.
const (
	zmTime      = 4  // 交易传输时间
	zmAmount    = 6  // 交易金额
	zmQueryID   = 9  // 查询流水号
	zmOrderID   = 11 // 商户订单号
	zmTxnType   = 19 // 交易类型
	zmOrigQryID = 26 // 原交易查询流水号
	zmMerID     = 27 // 商户代码
	zmFee       = 15 // 商户手续费
)

// zmLen is a full line's length: every field and its separator (the last separator may be
// missing when a tool trimmed the line).
var zmLen = func() int {
	n := 0
	for _, w := range zmWidths {
		n += w + 1
	}
	return n
}()

var _ Reader = (*UnionPay)(nil)

// NewUnionPayZM reads a ZM file. billDate is the bill's settlement day (its year resolves the
// lines' MMDD). Errors come from Next.
func NewUnionPayZM(r io.Reader, billDate time.Time) *UnionPay {
	y, m, d := billDate.Date()
	return &UnionPay{lr: newLineReader(r), date: time.Date(y, m, d, 0, 0, 0, 0, ChinaTime)}
}

// NewUnionPayZip reads the ZM file inside the zip UnionPay's file download holds (once base64
// and zlib are undone): the entry whose base name contains "ZM_" (not "ZME_", the error file),
// or the only entry. A zip that cannot be opened, a truncated one included, is ErrFormat.
func NewUnionPayZip(r io.ReaderAt, size int64, billDate time.Time) (*UnionPay, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, formatErr("unionpay zip: %v", err)
	}
	var zm *zip.File
	for _, f := range zr.File {
		if strings.Contains(path.Base(f.Name), "ZM_") {
			zm = f
			break
		}
	}
	if zm == nil && len(zr.File) == 1 {
		zm = zr.File[0]
	}
	if zm == nil {
		return nil, formatErr("unionpay zip: no ZM_ entry among %d", len(zr.File))
	}
	rc, err := zm.Open()
	if err != nil {
		return nil, formatErr("unionpay zip: %s: %v", quote(zm.Name), err)
	}
	return NewUnionPayZM(rc, billDate), nil
}

// Summary is none, as the ZM file states none; Skipped counts the rows of other transaction types.
func (u *UnionPay) Summary() Summary { return u.sum }

// Header names the columns: the ZM file has no header; every line states its 商户代码 (merId).
func (u *UnionPay) Header() Header {
	return Header{TimeField: "交易传输时间", MerchantField: "商户代码"}
}

// Next returns the next payment or refund row.
func (u *UnionPay) Next() (Line, error) {
	for u.err == nil {
		raw, err := u.lr.next()
		no := u.lr.no
		switch {
		case err == io.EOF:
			u.err = io.EOF
			continue
		case err == errLineTooLong:
			return Line{}, lineErr(no, "longer than 64 KiB")
		case err != nil:
			u.err = ioErr(no, err)
			continue
		}
		if len(strings.TrimSpace(string(raw))) == 0 {
			continue
		}
		if len(raw) != zmLen && len(raw) != zmLen-1 {
			if utf8Instead(raw) {
				u.err = formatErr("unionpay: line %d: the file is UTF-8; a ZM file is GBK", no)
				continue
			}
			return Line{}, lineErr(no, "%d bytes, a ZM line has %d", len(raw), zmLen)
		}
		if err := u.cut(no, raw); err != nil {
			return Line{}, err
		}
		l, skip, err := u.row(no)
		if err != nil {
			return Line{}, err
		}
		if !skip {
			return l, nil
		}
	}
	return Line{}, u.err
}

// cut splits raw at the widths and decodes each field from GBK. Only the fields the reader uses
// are decoded; the others are checked for valid GBK all the same, so a UTF-8 file (whose
// Chinese would shift every width) does not pass for a ZM file.
func (u *UnionPay) cut(no int, raw []byte) error {
	at := 0
	for i, w := range zmWidths {
		b := raw[at : at+w]
		if sep := at + w; sep < len(raw) && raw[sep] != ' ' {
			return lineErr(no, "field %d: separator %q after it, want a space", i+1, raw[sep])
		}
		at += w + 1
		if ascii(b) {
			u.fields[i] = string(b)
			continue
		}
		s, ok := decodeGBK(b)
		if !ok {
			u.err = formatErr("unionpay: line %d: field %d is not valid GBK (a ZM file is GBK)", no, i+1)
			return u.err
		}
		u.fields[i] = s
	}
	return nil
}

// utf8Instead tells a ZM line written in UTF-8 (its Chinese three bytes a character, so the
// widths no longer add up) from a merely bad line: in GBK it would have the right length.
func utf8Instead(raw []byte) bool {
	if ascii(raw) || !utf8.Valid(raw) {
		return false
	}
	gbk, err := simplifiedchinese.GBK.NewEncoder().Bytes(raw)
	return err == nil && (len(gbk) == zmLen || len(gbk) == zmLen-1)
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func (u *UnionPay) row(no int) (l Line, skip bool, err error) {
	f := &u.fields
	switch t := f[zmTxnType]; t {
	case "01":
		l.Kind = KindPay
		l.ChannelTxnID = strings.TrimSpace(f[zmQueryID])
	case "04", "31":
		l.Kind = KindRefund
		l.RefundID = strings.TrimSpace(f[zmQueryID])
		if l.ChannelTxnID = strings.TrimSpace(f[zmOrigQryID]); l.ChannelTxnID == "" {
			return Line{}, false, lineErr(no, "原交易查询流水号 empty on a refund (交易类型 %s)", t)
		}
		if l.RefundID == "" {
			return Line{}, false, lineErr(no, "查询流水号 empty")
		}
	default:
		if !allDigits(t) {
			return Line{}, false, lineErr(no, "交易类型 %s: want two digits", quote(t))
		}
		u.sum.Skipped++
		return Line{}, true, nil
	}
	if l.ChannelTxnID == "" {
		return Line{}, false, lineErr(no, "查询流水号 empty")
	}
	if l.TradeNo = strings.TrimSpace(f[zmOrderID]); l.TradeNo == "" {
		return Line{}, false, lineErr(no, "商户订单号 empty")
	}
	amount := f[zmAmount]
	if l.AmountFen, err = parseUint(amount); err != nil || l.AmountFen == 0 {
		return Line{}, false, lineErr(no, "交易金额 %s: want 12 digits of fen, not zero", quote(amount))
	}
	if l.Time, err = u.resolve(f[zmTime]); err != nil {
		return Line{}, false, lineErr(no, "交易传输时间 %s: %v", quote(f[zmTime]), err)
	}
	l.No, l.Currency, l.Merchant = no, "CNY", strings.TrimSpace(f[zmMerID])
	var credit int64
	if credit, l.FeeStated, err = zmSigned(f[zmFee]); err != nil {
		return Line{}, false, lineErr(no, "商户手续费 %s: %v", quote(f[zmFee]), err)
	}
	l.FeeFen, l.FeeBaseFen = -credit, l.AmountFen
	return l, false, nil
}

// zmSigned reads a C/D amount ("D000000000006") as a credit to the merchant: C positive, D
// negative; stated is false for a field of spaces.
func zmSigned(s string) (credit int64, stated bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, nil
	}
	if len(s) != 13 || (s[0] != 'C' && s[0] != 'D') || !allDigits(s[1:]) {
		return 0, false, fmt.Errorf("want C or D and 12 digits of fen")
	}
	v, err := parseUint(s[1:])
	if err != nil {
		return 0, false, err
	}
	if s[0] == 'D' {
		v = -v
	}
	return v, true, nil
}

// zmWindow bounds how far a line's time may be from its bill's date: a day's file holds that
// day's transactions, and the ones the settlement cut-off carried over, not older ones.
const zmWindow = 31 * 24 * time.Hour

// resolve reads MMDDhhmmss in the year that puts it nearest the bill date.
func (u *UnionPay) resolve(s string) (time.Time, error) {
	if len(s) != 10 || !allDigits(s) {
		return time.Time{}, fmt.Errorf("want MMDDhhmmss")
	}
	n := func(i int) int { return int(s[i]-'0')*10 + int(s[i+1]-'0') }
	mo, d, h, mi, se := n(0), n(2), n(4), n(6), n(8)
	if mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59 {
		return time.Time{}, fmt.Errorf("no such time")
	}
	var best time.Time
	for _, y := range []int{u.date.Year() - 1, u.date.Year(), u.date.Year() + 1} {
		t := time.Date(y, time.Month(mo), d, h, mi, se, 0, ChinaTime)
		if t.Day() != d { // February 29th outside a leap year, April 31st
			continue
		}
		if best.IsZero() || absDur(t.Sub(u.date)) < absDur(best.Sub(u.date)) {
			best = t
		}
	}
	if best.IsZero() {
		return time.Time{}, fmt.Errorf("no such day")
	}
	if absDur(best.Sub(u.date)) > zmWindow {
		return time.Time{}, fmt.Errorf("more than 31 days from the bill date %s", u.date.Format(time.DateOnly))
	}
	return best, nil
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
