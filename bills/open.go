package bills

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Format names the layout of a bill file; Open reads each with its reader. A downloaded bill
// and a file an operator gives both go through Open.
type Format string

// The bill formats.
const (
	FormatAlipayZip   Format = "alipay zip"   // Alipay's download, a zip holding the 业务明细 CSV
	FormatAlipayCSV   Format = "alipay csv"   // the 业务明细 CSV alone
	FormatWeChat      Format = "wechat"       // WeChat Pay's tradebill, gzip or not
	FormatUnionPayZip Format = "unionpay zip" // UnionPay's file download, a zip holding the ZM file
	FormatUnionPayZM  Format = "unionpay zm"  // the ZM file alone
	FormatStripe      Format = "stripe"       // Stripe's balance transactions export
	FormatCSV         Format = "csv"          // paygw's generic format (also what Stripe's download is written in)
	FormatEmpty       Format = "empty"        // the channel states there is no bill: a day without trades
)

// Open reads the bill r holds (size bytes) with the reader of format. day is the bill's day, in
// the channel's zone: UnionPay's lines state only MMDD. FormatEmpty reads as a bill of no lines
// and no summary, whatever r. Errors of the readers' own (bad lines, ErrFormat) come from Next,
// or from Open for a zip that cannot be opened.
func Open(format Format, r io.ReaderAt, size int64, day time.Time) (Reader, error) {
	whole := func() io.Reader { return io.NewSectionReader(r, 0, size) }
	switch format {
	case FormatEmpty:
		return emptyBill{}, nil
	case FormatAlipayZip:
		return NewAlipay(r, size)
	case FormatAlipayCSV:
		return NewAlipayCSV(whole()), nil
	case FormatWeChat:
		return NewWeChat(whole()), nil
	case FormatUnionPayZip:
		return NewUnionPayZip(r, size, day)
	case FormatUnionPayZM:
		return NewUnionPayZM(whole(), day), nil
	case FormatStripe:
		return NewStripe(whole()), nil
	case FormatCSV:
		return NewCSV(whole()), nil
	}
	return nil, fmt.Errorf("bills: unknown format %q", format)
}

// FileFormat is the format of a bill file name that an operator gives as channel's bill:
// Alipay's and UnionPay's as downloaded when the name ends in .zip, else their inner file;
// "csv" is paygw's generic format.
func FileFormat(channel, name string) (Format, error) {
	zipped := strings.HasSuffix(strings.ToLower(name), ".zip")
	switch channel {
	case "alipay":
		if zipped {
			return FormatAlipayZip, nil
		}
		return FormatAlipayCSV, nil
	case "wechatpay":
		return FormatWeChat, nil
	case "unionpay":
		if zipped {
			return FormatUnionPayZip, nil
		}
		return FormatUnionPayZM, nil
	case "stripe":
		return FormatStripe, nil
	case "csv":
		return FormatCSV, nil
	}
	return "", fmt.Errorf("no bill format for %q: want alipay, wechatpay, stripe, unionpay or csv", channel)
}

// emptyBill is the bill of a day without trades.
type emptyBill struct{}

func (emptyBill) Next() (Line, error) { return Line{}, io.EOF }
func (emptyBill) Summary() Summary    { return Summary{} }
