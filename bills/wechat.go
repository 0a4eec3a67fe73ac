package bills

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// WeChat reads a WeChat Pay v3 trade bill (/v3/bill/tradebill, bill_type ALL, SUCCESS or REFUND),
// as downloaded: UTF-8 text, or gzip of it (tar_type=GZIP; recognised by its magic bytes), LF or
// CRLF:
//
//	交易时间,公众账号ID,商户号,...,订单金额,申请退款金额,费率备注      <- the header: columns by name
//	`2021-01-28 17:07:11,`wx81be3101902f7cb2,...,`0.01,`0.00,`     <- every field after a backtick
//	总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额
//	`3,`0.03,`0.00,`0.00,`0.00000,`0.03,`0.00
//
// Rows: 交易状态 SUCCESS is a payment of 订单金额 (the amount the notification's amount.total
// states; 应结订单金额 leaves out non-recharge coupons), REFUND a refund of 退款金额 with RefundID =
// 微信退款单号 (the refund_id refund notifications carry) and ChannelTxnID = 微信订单号, the
// payment it undoes; Merchant = 商户号 and AppID = 公众账号ID. REVOKED (a cancelled micropay, no
// money moved) is skipped and counted in Summary.Skipped; any other state is a bad line. 交易时间
// is the Line's time, Beijing time (for a refund row it is the refund's time). Fields are split
// at ",`", so commas inside a field (a product name) are kept.
//
// Summary: RowCount = 总交易单数 (it counts every row, refunds and revoked ones included),
// PayTotalFen = 订单总金额 (the 订单金额 column summed over every row: refund rows carry 0.00
// there), RefundTotalFen = 退款总金额 (退款金额 summed). WeChat states no count per kind, so
// PayCount and RefundCount stay 0. FeeTotalFen = 手续费总金额, when the summary has the column.
//
// Fees: 手续费, when the header has it, is the line's fee, written with five decimals but rounded
// to the fen by WeChat (a real bill: 6.00 at 0.60% is 0.04000), so digits past the currency's
// exponent must be zeros. WeChat signs it as paygw does: positive on a SUCCESS row, negative on a
// REFUND row (the fee returned with the refund; a REFUND bill's 手续费总金额 is negative), and its
// 手续费总金额 is the signed sum over every row, REVOKED ones too (their fee is in
// Summary.SkippedFeeFen). The rate applies to 应结订单金额 (the amount settled: WeChat charges no
// fee on the non-recharge coupons 订单金额 includes), or to 订单金额 when the header has no such
// column. The bill states no net per line. A bill that ends without its summary was cut short: ErrFormat
// once the lines are read.
type WeChat struct {
	src    io.Reader
	lr     *lineReader
	state  int
	n      int
	col    wechatColumns
	sumCol wechatSummaryColumns
	fields []string
	sum    Summary
	seen   wechatTally
	err    error // sticky: io.EOF or an ErrFormat
}

const (
	wechatHeader = iota
	wechatDetail
	wechatSummaryLine
	wechatAfter
)

type wechatColumns struct{ time, txn, trade, status, currency, amount, refundID, refundAmt, mchID, appID, fee, settled int }

type wechatSummaryColumns struct{ rows, orderTotal, refundTotal, feeTotal, n int }

type wechatTally struct {
	rows, bad           int
	orderFen, refundFen int64
	exp                 int // the bill's currency exponent, for the summary amounts
}

var _ Reader = (*WeChat)(nil)

// NewWeChat reads a trade bill, gzip or not. Errors come from Next.
func NewWeChat(r io.Reader) *WeChat {
	return &WeChat{src: r, seen: wechatTally{exp: 2}}
}

// Summary is valid once Next has returned io.EOF.
func (w *WeChat) Summary() Summary { return w.sum }

// Header names the columns: the bill has no period line; every row states its 商户号 and 公众账号ID.
func (w *WeChat) Header() Header {
	return Header{TimeField: "交易时间", MerchantField: "商户号", AppIDField: "公众账号ID"}
}

// open recognises gzip by its magic bytes and starts the line reader on the plain text.
func (w *WeChat) open() error {
	br := bufio.NewReaderSize(w.src, 64<<10)
	w.src = nil
	magic, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return ioErr(0, err)
	}
	var r io.Reader = br
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return formatErr("wechat: gzip: %v", err)
		}
		r = zr
	}
	w.lr = newLineReader(r)
	return nil
}

// Next returns the next payment or refund row.
func (w *WeChat) Next() (Line, error) {
	if w.lr == nil && w.err == nil {
		w.err = w.open()
	}
	for w.err == nil {
		raw, err := w.lr.next()
		no := w.lr.no
		switch {
		case err == io.EOF:
			w.finish()
			continue
		case err == errLineTooLong && w.state == wechatDetail:
			w.seen.rows++
			w.seen.bad++
			return Line{}, lineErr(no, "longer than 64 KiB")
		case err != nil:
			w.err = ioErr(no, err)
			continue
		}
		if no == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\ufeff"))
		}
		if !utf8.Valid(raw) {
			w.err = formatErr("wechat: line %d: not UTF-8 (WeChat bills are UTF-8; a GBK file?)", no)
			continue
		}
		text := string(raw)
		if strings.TrimSpace(text) == "" {
			continue
		}
		switch w.state {
		case wechatHeader:
			w.err = w.header(no, text)
			w.state = wechatDetail
		case wechatDetail:
			if strings.HasPrefix(text, "总交易单数") {
				w.err = w.summaryHeader(no, text)
				w.state = wechatSummaryLine
				continue
			}
			w.seen.rows++
			l, skip, err := w.row(no, text)
			if err != nil {
				w.seen.bad++
				return Line{}, err
			}
			if !skip {
				return l, nil
			}
		case wechatSummaryLine:
			w.state = wechatAfter
			if err := w.summaryLine(no, text); err != nil {
				return Line{}, err
			}
		case wechatAfter:
			return Line{}, lineErr(no, "a line after the summary")
		}
	}
	return Line{}, w.err
}

func (w *WeChat) header(no int, text string) error {
	c := newColumns(strings.Split(text, ","))
	var err error
	need := c.needer(fmt.Sprintf("wechat: line %d", no), &err)
	w.col = wechatColumns{
		time:      need("交易时间"),
		txn:       need("微信订单号"),
		trade:     need("商户订单号"),
		status:    need("交易状态"),
		currency:  need("货币种类"),
		amount:    need("订单金额"),
		refundID:  c.opt("微信退款单号"), // bill type SUCCESS has no refund columns
		refundAmt: c.opt("退款金额"),
		mchID:     c.opt("商户号"), // whose row it is: missing, the bill run cannot check it
		appID:     c.opt("公众账号ID"),
		fee:       c.opt("手续费"),
		settled:   c.opt("应结订单金额"),
	}
	w.n = strings.Count(text, ",") + 1
	return err
}

// fieldsOf splits a backtick row: "`a,`b,`" is a, b and an empty last field.
func (w *WeChat) fieldsOf(text string) ([]string, bool) {
	if !strings.HasPrefix(text, "`") {
		return nil, false
	}
	w.fields = splitInto(w.fields[:0], text[1:], ",`")
	return w.fields, true
}

func (w *WeChat) row(no int, text string) (l Line, skip bool, err error) {
	f, ok := w.fieldsOf(text)
	if !ok {
		return Line{}, false, lineErr(no, "a detail row must start with a backtick")
	}
	if len(f) != w.n {
		return Line{}, false, lineErr(no, "%d fields, the header has %d", len(f), w.n)
	}
	c := w.col
	cur, ok := currencyCode(trimField(f[c.currency]))
	if !ok {
		return Line{}, false, lineErr(no, "货币种类 %s: want an ISO 4217 code", quote(f[c.currency]))
	}
	exp := minorDigits(cur)
	w.seen.exp = exp
	amount, err := parseDecimal(trimField(f[c.amount]), exp)
	if err != nil {
		return Line{}, false, lineErr(no, "订单金额 %s: %v", quote(f[c.amount]), err)
	}
	fee, base, err := w.fee(f, exp, amount)
	if err != nil {
		return Line{}, false, lineErr(no, "%v", err)
	}
	w.seen.orderFen += amount
	status := trimField(f[c.status])
	switch status {
	case "SUCCESS":
		l.Kind = KindPay
		if amount <= 0 {
			return Line{}, false, lineErr(no, "订单金额 %s: a SUCCESS row wants a positive amount", quote(f[c.amount]))
		}
		l.AmountFen = amount
	case "REFUND":
		l.Kind = KindRefund
		if c.refundID < 0 || c.refundAmt < 0 {
			return Line{}, false, lineErr(no, "a REFUND row, but the header has no 微信退款单号 or 退款金额 column")
		}
		s := trimField(f[c.refundAmt])
		if l.AmountFen, err = parseDecimal(s, exp); err != nil {
			return Line{}, false, lineErr(no, "退款金额 %s: %v", quote(s), err)
		}
		if l.AmountFen <= 0 {
			return Line{}, false, lineErr(no, "退款金额 %s: a REFUND row wants a positive amount", quote(s))
		}
		w.seen.refundFen += l.AmountFen
		if l.RefundID = trimField(f[c.refundID]); l.RefundID == "" {
			return Line{}, false, lineErr(no, "微信退款单号 empty on a REFUND row")
		}
	case "REVOKED":
		w.sum.Skipped++
		w.sum.SkippedFeeFen += fee
		return Line{}, true, nil
	default:
		return Line{}, false, lineErr(no, "交易状态 %s: want SUCCESS, REFUND or REVOKED", quote(status))
	}
	l.No, l.Currency = no, cur
	if l.ChannelTxnID = trimField(f[c.txn]); l.ChannelTxnID == "" {
		return Line{}, false, lineErr(no, "微信订单号 empty")
	}
	if l.TradeNo = trimField(f[c.trade]); l.TradeNo == "" {
		return Line{}, false, lineErr(no, "商户订单号 empty")
	}
	ts := trimField(f[c.time])
	if l.Time, err = time.ParseInLocation(time.DateTime, ts, ChinaTime); err != nil {
		return Line{}, false, lineErr(no, "交易时间 %s: want yyyy-MM-dd HH:mm:ss", quote(ts))
	}
	if c.mchID >= 0 {
		l.Merchant = trimField(f[c.mchID])
	}
	if c.appID >= 0 {
		l.AppID = trimField(f[c.appID])
	}
	if c.fee >= 0 {
		l.FeeFen, l.FeeStated, l.FeeBaseFen = fee, true, base
		if l.Kind == KindRefund {
			l.FeeBaseFen = l.AmountFen
		}
	}
	return l, false, nil
}

// fee reads a row's 手续费 (0 when the header has no such column) and the amount the rate applies
// to: 应结订单金额, else amount (订单金额).
func (w *WeChat) fee(f []string, exp int, amount int64) (fee, base int64, err error) {
	c := w.col
	if c.fee < 0 {
		return 0, 0, nil
	}
	s := trimField(f[c.fee])
	if fee, err = parseDecimalPadded(s, exp); err != nil {
		return 0, 0, fmt.Errorf("手续费 %s: %v", quote(s), err)
	}
	base = amount
	if c.settled >= 0 {
		s := trimField(f[c.settled])
		if base, err = parseDecimal(s, exp); err != nil {
			return 0, 0, fmt.Errorf("应结订单金额 %s: %v", quote(s), err)
		}
	}
	return fee, base, nil
}

func (w *WeChat) summaryHeader(no int, text string) error {
	c := newColumns(strings.Split(text, ","))
	var err error
	need := c.needer(fmt.Sprintf("wechat: line %d: the summary header", no), &err)
	w.sumCol = wechatSummaryColumns{
		rows:        need("总交易单数"),
		orderTotal:  need("订单总金额"),
		refundTotal: need("退款总金额"),
		feeTotal:    c.opt("手续费总金额"),
		n:           strings.Count(text, ",") + 1,
	}
	return err
}

func (w *WeChat) summaryLine(no int, text string) error {
	f, ok := w.fieldsOf(text)
	if !ok || len(f) != w.sumCol.n {
		return lineErr(no, "the summary line: want %d backtick fields", w.sumCol.n)
	}
	c := w.sumCol
	rows, err := parseUint(trimField(f[c.rows]))
	if err != nil || rows > 1<<31 {
		return lineErr(no, "总交易单数 %s: want a count", quote(f[c.rows]))
	}
	order, err := parseDecimal(trimField(f[c.orderTotal]), w.seen.exp)
	if err != nil {
		return lineErr(no, "订单总金额 %s: %v", quote(f[c.orderTotal]), err)
	}
	refund, err := parseDecimal(trimField(f[c.refundTotal]), w.seen.exp)
	if err != nil {
		return lineErr(no, "退款总金额 %s: %v", quote(f[c.refundTotal]), err)
	}
	w.sum.Present, w.sum.RowCount, w.sum.PayTotalFen, w.sum.RefundTotalFen = true, int(rows), order, refund
	if c.feeTotal >= 0 { // after the totals: an unreadable fee total leaves them checked
		s := trimField(f[c.feeTotal])
		fee, err := parseDecimalPadded(s, w.seen.exp)
		if err != nil {
			return lineErr(no, "手续费总金额 %s: %v", quote(f[c.feeTotal]), err)
		}
		w.sum.FeeStated, w.sum.FeeTotalFen = true, fee
	}
	return nil
}

func (w *WeChat) finish() {
	switch w.state {
	case wechatHeader:
		w.err = formatErr("wechat: the file is empty")
		return
	case wechatDetail, wechatSummaryLine:
		w.err = formatErr("wechat: line %d: the file ends without its summary line (cut short?)", w.lr.no)
		return
	}
	w.err = io.EOF
	if !w.sum.Present {
		return
	}
	s, t := &w.sum, w.seen
	var diffs []string
	if s.RowCount != t.rows {
		diffs = append(diffs, fmt.Sprintf("总交易单数 %d, the detail has %d rows", s.RowCount, t.rows))
	}
	if s.PayTotalFen != t.orderFen {
		diffs = append(diffs, fmt.Sprintf("订单总金额 %d, the detail sums %d", s.PayTotalFen, t.orderFen))
	}
	if w.col.refundAmt >= 0 && s.RefundTotalFen != t.refundFen {
		diffs = append(diffs, fmt.Sprintf("退款总金额 %d, the detail sums %d", s.RefundTotalFen, t.refundFen))
	}
	if len(diffs) > 0 && t.bad > 0 {
		diffs = append(diffs, fmt.Sprintf("%d bad lines", t.bad))
	}
	s.Mismatch = strings.Join(diffs, "; ")
}
