package bills

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Alipay reads Alipay's trade bill: the 业务明细 file of the zip that
// alipay.data.dataservice.bill.downloadurl.query points to. The file is GBK; '#' lines frame it:
//
//	#支付宝业务明细查询
//	#...
//	#-----------------------------------------业务明细列表----------------------------------------
//	支付宝交易号,商户订单号,业务类型,...           <- the header: columns are found by name
//	2019091622001458860515315453\t,...          <- detail rows, fields padded with TABs
//	#-----------------------------------------业务明细列表结束------------------------------------
//	#交易合计：6笔，商家实收共0.06元，商家优惠共0.00元
//	#退款合计：4笔，商家实收退款共-0.04元，商家优惠退款共0.00元
//
// Rows: 业务类型 交易 is a payment (订单金额（元）, positive), 退款 a refund (订单金额（元）, negative
// in the bill, positive in the Line; RefundID = 退款批次号/请求号, the out_request_no, which Alipay
// leaves empty for some full refunds). Rows of any other 业务类型 are skipped and counted in
// Summary.Skipped. 完成时间 is the Line's time (the refund's time on refund rows), Beijing time.
// Currency is CNY.
//
// Fees: 服务费（元）, when the header has it, is the line's fee. The 业务明细 signs every amount as a
// flow of the merchant's balance (订单金额 and 商家实收 are negative on 退款 rows), so a fee charged
// reads negative and a fee returned on a refund positive: FeeFen is 服务费 negated. The rate
// applies to 商家实收（元） (what the merchant receives: merchant-funded discounts are not charged),
// or to 订单金额 when the header has no 商家实收 column. An empty 服务费 states no fee. The bill
// states no net per line, and its 合计 lines no fee total.
//
// Header: #账号 is the account the bill is of, #起始日期 and 终止日期 its period (see Header).
//
// Summary: 交易合计 gives PayCount and PayTotalFen, 退款合计 RefundCount and RefundTotalFen (made
// positive). Both totals are 商家实收 sums, not 订单金额 sums, so the reader checks them against the
// 商家实收（元） column when the header has it (and the counts always); Summary.Mismatch says what
// disagreed. A file that ends inside the detail block was cut short: ErrFormat. So is a byte
// sequence GBK does not define, anywhere, and a file written in UTF-8 (recognised by the UTF-8
// bytes of 业务明细 before the header), which the error names.
type Alipay struct {
	lr     *lineReader
	gbk    *gbkLine
	state  int
	n      int // header columns
	col    alipayColumns
	fields []string
	sum    Summary
	seen   alipayTally
	head   Header
	err    error // sticky: io.EOF or an ErrFormat
}

const (
	alipayPreamble = iota
	alipayHeader
	alipayDetail
	alipayAfter
)

type alipayColumns struct{ txn, trade, kind, done, amount, refundID, received, fee int }

type alipayTally struct {
	pays, refunds            int
	payReceived, refReceived int64
	bad                      int
	payTotal, refTotal       bool // the summary stated them
}

var _ Reader = (*Alipay)(nil)

// The UTF-8 bytes of 业务明细: if a preamble line holds them, the file is UTF-8, not GBK.
var alipayUTF8Marker = []byte("业务明细")

// NewAlipayCSV reads the 业务明细 file alone (GBK). Errors come from Next.
func NewAlipayCSV(r io.Reader) *Alipay {
	return &Alipay{lr: newLineReader(r), gbk: newGBKLine()}
}

// NewAlipay reads the bill zip as downloaded (<PID>0156_<yyyyMMdd>.csv.zip). It picks the
// 业务明细 entry: its name is GBK without the zip's UTF-8 flag, so it is decoded from GBK and must
// end in 业务明细.csv without being the (汇总) file; failing that, the first entry that is not the
// 汇总 file, in archive order (Alipay writes the detail first). A zip that cannot be opened, a
// truncated one included, is ErrFormat.
func NewAlipay(r io.ReaderAt, size int64) (*Alipay, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, formatErr("alipay zip: %v", err)
	}
	f := alipayEntry(zr.File)
	if f == nil {
		return nil, formatErr("alipay zip: no 业务明细.csv entry among %d", len(zr.File))
	}
	rc, err := f.Open()
	if err != nil {
		return nil, formatErr("alipay zip: entry %d: %v", entryIndex(zr.File, f), err)
	}
	return NewAlipayCSV(rc), nil
}

// alipayEntry finds the detail file among the zip's entries.
func alipayEntry(files []*zip.File) *zip.File {
	for _, f := range files {
		name := entryName(f)
		if strings.HasSuffix(name, "业务明细.csv") && !strings.Contains(name, "汇总") {
			return f
		}
	}
	for _, f := range files {
		if !strings.Contains(entryName(f), "汇总") && !f.FileInfo().IsDir() {
			return f
		}
	}
	return nil
}

// entryName is a zip entry's name in UTF-8: as stored when it is valid UTF-8 and the flag says
// so, else decoded from GBK (what Chinese tools write without the flag).
func entryName(f *zip.File) string {
	if !f.NonUTF8 && utf8.ValidString(f.Name) {
		return f.Name
	}
	if name, ok := decodeGBK([]byte(f.Name)); ok {
		return name
	}
	return f.Name
}

func entryIndex(files []*zip.File, f *zip.File) int {
	for i := range files {
		if files[i] == f {
			return i
		}
	}
	return -1
}

// Summary is valid once Next has returned io.EOF.
func (a *Alipay) Summary() Summary { return a.sum }

// Header is the bill's #账号 and #起始日期/终止日期, once Next has been called (the first call reads
// past them).
func (a *Alipay) Header() Header {
	h := a.head
	h.TimeField, h.Stated = "完成时间", true
	return h
}

// preamble reads the # lines before the detail block: the first #账号 and #起始日期 lines count.
//
//	#账号：[20880211096256330156]
//	#起始日期：[2019年09月16日 00:00:00]   终止日期：[2019年09月17日 00:00:00]
func (a *Alipay) preamble(no int, text string) {
	switch {
	case strings.HasPrefix(text, "#账号") && a.head.AccountLine == 0:
		a.head.AccountLine = no
		a.head.Account, _ = bracketed(strings.TrimPrefix(text, "#账号"))
	case strings.HasPrefix(text, "#起始日期") && a.head.PeriodLine == 0:
		a.head.PeriodLine = no
		from, rest := bracketed(strings.TrimPrefix(text, "#起始日期"))
		_, rest, _ = strings.Cut(rest, "终止日期")
		to, _ := bracketed(rest)
		f, err1 := time.ParseInLocation(alipayPeriodLayout, from, ChinaTime)
		t, err2 := time.ParseInLocation(alipayPeriodLayout, to, ChinaTime)
		if err1 == nil && err2 == nil {
			a.head.From, a.head.To = f, t
		}
	}
}

const alipayPeriodLayout = "2006年01月02日 15:04:05"

// bracketed reads "：[value]rest" (a full-width or ASCII colon, spaces allowed) into value and
// rest; "" when there is no bracketed value.
func bracketed(s string) (value, rest string) {
	s = strings.TrimLeft(s, " \t")
	s, ok := strings.CutPrefix(s, "：")
	if !ok {
		s = strings.TrimPrefix(s, ":")
	}
	s, ok = strings.CutPrefix(strings.TrimLeft(s, " \t"), "[")
	if !ok {
		return "", s
	}
	value, rest, ok = strings.Cut(s, "]")
	if !ok {
		return "", s
	}
	return strings.TrimSpace(value), rest
}

// Next returns the next payment or refund row.
func (a *Alipay) Next() (Line, error) {
	for a.err == nil {
		raw, err := a.lr.next()
		no := a.lr.no
		switch {
		case err == io.EOF:
			a.finish()
			continue
		case err == errLineTooLong && a.state == alipayDetail:
			a.seen.bad++
			return Line{}, lineErr(no, "longer than 64 KiB")
		case err != nil:
			a.err = ioErr(no, err)
			continue
		}
		if a.state < alipayDetail && bytes.Contains(raw, alipayUTF8Marker) {
			a.err = formatErr("alipay: line %d: the file is UTF-8; Alipay bills are GBK", no)
			continue
		}
		b, ok := a.gbk.decode(raw)
		if !ok {
			a.err = formatErr("alipay: line %d: not valid GBK", no)
			continue
		}
		text := string(b)
		if strings.TrimSpace(text) == "" {
			continue
		}
		switch a.state {
		case alipayPreamble:
			switch {
			case !strings.HasPrefix(text, "#"):
				a.err = formatErr("alipay: line %d: no 业务明细列表 line before it", no)
			case strings.Contains(text, "业务明细列表"):
				a.state = alipayHeader
			default:
				a.preamble(no, text)
			}
		case alipayHeader:
			a.err = a.header(no, text)
			a.state = alipayDetail
		case alipayDetail:
			if strings.HasPrefix(text, "#") {
				a.state = alipayAfter
				continue
			}
			l, skip, err := a.row(no, text)
			if err != nil {
				a.seen.bad++
				return Line{}, err
			}
			if !skip {
				return l, nil
			}
		case alipayAfter:
			if err := a.after(no, text); err != nil {
				return Line{}, err
			}
		}
	}
	return Line{}, a.err
}

func (a *Alipay) header(no int, text string) error {
	c := newColumns(strings.Split(text, ","))
	var err error
	need := c.needer(fmt.Sprintf("alipay: line %d", no), &err)
	a.col = alipayColumns{
		txn:      need("支付宝交易号"),
		trade:    need("商户订单号"),
		kind:     need("业务类型"),
		done:     need("完成时间"),
		amount:   need("订单金额（元）", "订单金额(元)"),
		refundID: need("退款批次号/请求号"),
		received: c.opt("商家实收（元）", "商家实收(元)"),
		fee:      c.opt("服务费（元）", "服务费(元)"),
	}
	a.n = strings.Count(text, ",") + 1
	return err
}

// row reads a detail row; skip is true for a row of a kind paygw does not reconcile.
func (a *Alipay) row(no int, text string) (l Line, skip bool, err error) {
	f := splitInto(a.fields[:0], text, ",")
	a.fields = f
	if len(f) != a.n {
		return Line{}, false, lineErr(no, "%d fields, the header has %d", len(f), a.n)
	}
	c := a.col
	switch kind := trimField(f[c.kind]); kind {
	case "交易":
		l.Kind = KindPay
	case "退款":
		l.Kind = KindRefund
	case "":
		return Line{}, false, lineErr(no, "业务类型 empty")
	default:
		a.sum.Skipped++
		return Line{}, true, nil
	}
	l.No, l.Currency = no, "CNY"
	if l.ChannelTxnID = trimField(f[c.txn]); l.ChannelTxnID == "" {
		return Line{}, false, lineErr(no, "支付宝交易号 empty")
	}
	if l.TradeNo = trimField(f[c.trade]); l.TradeNo == "" {
		return Line{}, false, lineErr(no, "商户订单号 empty")
	}
	done := trimField(f[c.done])
	if l.Time, err = time.ParseInLocation(time.DateTime, done, ChinaTime); err != nil {
		return Line{}, false, lineErr(no, "完成时间 %s: want yyyy-MM-dd HH:mm:ss", quote(done))
	}
	s := trimField(f[c.amount])
	amount, err := parseDecimal(s, 2)
	if err != nil {
		return Line{}, false, lineErr(no, "订单金额（元） %s: %v", quote(s), err)
	}
	var received int64
	if c.received >= 0 {
		s := trimField(f[c.received])
		if received, err = parseDecimal(s, 2); err != nil {
			return Line{}, false, lineErr(no, "商家实收（元） %s: %v", quote(s), err)
		}
	}
	if err := alipayFee(&l, f, c, max(amount, -amount), received); err != nil {
		return Line{}, false, lineErr(no, "%v", err)
	}
	if l.Kind == KindPay {
		if amount <= 0 {
			return Line{}, false, lineErr(no, "订单金额（元） %s: a 交易 row wants a positive amount", quote(s))
		}
		l.AmountFen = amount
		a.seen.pays++
		a.seen.payReceived += received
	} else {
		if amount >= 0 {
			return Line{}, false, lineErr(no, "订单金额（元） %s: a 退款 row wants a negative amount", quote(s))
		}
		l.AmountFen = -amount
		l.RefundID = trimField(f[c.refundID])
		a.seen.refunds++
		a.seen.refReceived -= received
	}
	return l, false, nil
}

// alipayFee reads the row's 服务费 into l (see Alipay), once l.Kind is known; received is the
// row's 订单金额 made positive, received its 商家实收 as the bill signs it (read when c.received
// is a column).
func alipayFee(l *Line, f []string, c alipayColumns, amount, received int64) error {
	if c.fee < 0 {
		return nil
	}
	s := trimField(f[c.fee])
	if s == "" {
		return nil
	}
	fee, err := parseDecimal(s, 2)
	if err != nil {
		return fmt.Errorf("服务费（元） %s: %v", quote(s), err)
	}
	l.FeeFen, l.FeeStated = -fee, true
	l.FeeBaseFen = amount
	if c.received >= 0 {
		l.FeeBaseFen = max(received, -received)
	}
	return nil
}

// after reads the lines past the detail block: the totals, and comments.
func (a *Alipay) after(no int, text string) error {
	var err error
	switch {
	case strings.HasPrefix(text, "#交易合计："):
		a.sum.PayCount, a.sum.PayTotalFen, err = alipayTotal(text, "#交易合计：", "商家实收共")
		a.seen.payTotal = err == nil
	case strings.HasPrefix(text, "#退款合计："):
		a.sum.RefundCount, a.sum.RefundTotalFen, err = alipayTotal(text, "#退款合计：", "商家实收退款共")
		a.sum.RefundTotalFen = -a.sum.RefundTotalFen
		a.seen.refTotal = err == nil
	case strings.HasPrefix(text, "#"):
	default:
		err = fmt.Errorf("a row after the detail block")
	}
	if err != nil {
		a.seen.bad++
		return lineErr(no, "%v", err)
	}
	a.sum.Present = a.seen.payTotal || a.seen.refTotal
	return nil
}

// alipayTotal reads "#交易合计：6笔，商家实收共0.06元，..." into 6 and 6 fen.
func alipayTotal(text, prefix, label string) (int, int64, error) {
	rest := strings.TrimPrefix(text, prefix)
	count, rest, ok := strings.Cut(rest, "笔")
	n, err := parseUint(count)
	if !ok || err != nil || n > 1<<31 {
		return 0, 0, fmt.Errorf("%s: want a count of 笔", quote(text))
	}
	_, rest, ok = strings.Cut(rest, label)
	total, _, ok2 := strings.Cut(rest, "元")
	fen, err := parseDecimal(total, 2)
	if !ok || !ok2 || err != nil {
		return 0, 0, fmt.Errorf("%s: want %s…元", quote(text), label)
	}
	return int(n), fen, nil
}

// finish ends the bill at EOF: it must have got past its detail block.
func (a *Alipay) finish() {
	switch a.state {
	case alipayPreamble, alipayHeader:
		a.err = formatErr("alipay: line %d: the file ends before a 业务明细列表 header and block", a.lr.no)
		return
	case alipayDetail:
		a.err = formatErr("alipay: line %d: the file ends inside the detail block (cut short?)", a.lr.no)
		return
	}
	a.err = io.EOF
	s, t := &a.sum, a.seen
	var diffs []string
	if t.payTotal {
		if s.PayCount != t.pays {
			diffs = append(diffs, fmt.Sprintf("交易合计 %d笔, the detail has %d", s.PayCount, t.pays))
		}
		if a.col.received >= 0 && s.PayTotalFen != t.payReceived {
			diffs = append(diffs, fmt.Sprintf("交易 商家实收 %d fen, the detail sums %d", s.PayTotalFen, t.payReceived))
		}
	}
	if t.refTotal {
		if s.RefundCount != t.refunds {
			diffs = append(diffs, fmt.Sprintf("退款合计 %d笔, the detail has %d", s.RefundCount, t.refunds))
		}
		if a.col.received >= 0 && s.RefundTotalFen != t.refReceived {
			diffs = append(diffs, fmt.Sprintf("退款 商家实收 %d fen, the detail sums %d", s.RefundTotalFen, t.refReceived))
		}
	}
	if len(diffs) > 0 && t.bad > 0 {
		diffs = append(diffs, fmt.Sprintf("%d bad lines", t.bad))
	}
	s.Mismatch = strings.Join(diffs, "; ")
}
