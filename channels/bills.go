package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/config"
)

// Bill downloads: each channel's daily bill fetched over the same outbound plumbing as its trade
// query (the same SDK clients, merchant keys, transports and response verification), and
// handed over as a file in the channel's real format, for the matching reader of package bills.

// BillDownloader fetches one channel's bill of a day.
type BillDownloader interface {
	Name() string
	// DownloadBill fetches the bill of day: its year, month and day are read as they are, as the
	// channel's own date (Beijing time for the Chinese channels, the configured zone for Stripe).
	// The caller closes the BillFile. Errors wrap ErrQueryFailed (the channel could not be asked,
	// or has no bill yet: ask again later), ErrBadSignature or ErrMalformed, and ErrNoCredentials
	// from the constructors; none carries key material.
	DownloadBill(ctx context.Context, day time.Time) (*BillFile, error)
}

// Bill file formats, each read by one reader of package bills.
const (
	billAlipayZip   = "alipay zip"   // bills.NewAlipay
	billWeChat      = "wechat"       // bills.NewWeChat (gzip or not)
	billUnionPayZip = "unionpay zip" // bills.NewUnionPayZip
	billCSV         = "csv"          // bills.NewCSV: paygw's generic format (Stripe's lines)
	billEmpty       = "empty"        // the channel states there is no bill: a day without trades
)

// BillFile is a downloaded bill, spooled to a temporary file so that memory stays flat whatever
// its size. Close removes the file.
type BillFile struct {
	Channel string
	Day     time.Time
	format  string
	f       *os.File
	size    int64
}

// Size is the bill's size in bytes as stored (compressed when the channel compresses it).
func (b *BillFile) Size() int64 { return b.size }

// Empty reports that the channel stated it has no bill for the day: no trades.
func (b *BillFile) Empty() bool { return b.format == billEmpty }

// Reader opens the bill with the reader of its format. bills.Reader errors (bad lines, a format
// error) come from its Next. An empty day reads as a bill of no lines and no summary.
func (b *BillFile) Reader() (bills.Reader, error) {
	switch b.format {
	case billEmpty:
		return emptyBill{}, nil
	case billAlipayZip:
		return bills.NewAlipay(b.f, b.size)
	case billUnionPayZip:
		return bills.NewUnionPayZip(b.f, b.size, b.Day)
	case billWeChat:
		return bills.NewWeChat(io.NewSectionReader(b.f, 0, b.size)), nil
	case billCSV:
		return bills.NewCSV(io.NewSectionReader(b.f, 0, b.size)), nil
	}
	return nil, fmt.Errorf("channels: bill of unknown format %q", b.format)
}

// Close removes the spooled file.
func (b *BillFile) Close() error {
	if b == nil || b.f == nil {
		return nil
	}
	err := b.f.Close()
	if rmErr := os.Remove(b.f.Name()); err == nil {
		err = rmErr
	}
	b.f = nil
	return err
}

// emptyBill is the bill of a day without trades.
type emptyBill struct{}

func (emptyBill) Next() (bills.Line, error) { return bills.Line{}, io.EOF }
func (emptyBill) Summary() bills.Summary    { return bills.Summary{} }

// maxBillBytes bounds a downloaded bill as stored (and, for UnionPay, as decompressed): far above
// any real merchant's day, it keeps a broken or hostile server from filling the disk.
const maxBillBytes = 2 << 30

// errBillTooLarge: the bill went past maxBillBytes.
var errBillTooLarge = errors.New("larger than the 2 GiB a bill may take")

// errBillSource: reading the bill's source failed (the connection, or the decompression of what
// came over it), as opposed to writing the spooled copy.
var errBillSource = errors.New("reading the bill")

type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errBillSource, err)
	}
	return n, err
}

// spoolBill copies r into a new temporary file, at most maxBillBytes of it. The file is
// positioned anywhere: callers read it with ReadAt.
func spoolBill(channel, format string, day time.Time, r io.Reader) (*BillFile, error) {
	f, err := os.CreateTemp("", "paygw-bill-"+channel+"-*")
	if err != nil {
		return nil, fmt.Errorf("channels: %s: spooling the bill: %w", channel, err)
	}
	b := &BillFile{Channel: channel, Day: day, format: format, f: f}
	n, err := io.Copy(f, io.LimitReader(sourceReader{r}, maxBillBytes+1))
	switch {
	case err == nil && n > maxBillBytes:
		err = errBillTooLarge
	case err == nil:
		b.size = n
		return b, nil
	}
	_ = b.Close()
	return nil, err
}

// emptyBillFile is the bill of a day the channel says had no trades.
func emptyBillFile(channel string, day time.Time) *BillFile {
	return &BillFile{Channel: channel, Day: day, format: billEmpty}
}

// billDate is day's date as the channels write it (yyyy-MM-dd), whatever day's zone.
func billDate(day time.Time) string { return day.Format(time.DateOnly) }

// BillDownloadersFromConfig builds the bill downloader of every enabled channel, as
// QueriersFromConfig builds the queriers: a channel without outbound credentials is left out and
// its ErrNoCredentials error is in skipped; any other error stops the start. stripeDay is the
// zone of Stripe's day (reconcile.stripe_timezone).
func BillDownloadersFromConfig(c config.Channels, chs []Channel, stripeDay *time.Location, hc *http.Client) (ds []BillDownloader, skipped []error, err error) {
	for _, ch := range chs {
		var d BillDownloader
		var err error
		switch v := ch.(type) {
		case *Alipay:
			d, err = NewAlipayBills(c.Alipay, v, hc)
		case *WeChatPay:
			d, err = NewWeChatPayBills(c.WeChatPay, v, hc)
		case *Stripe:
			d, err = NewStripeBills(c.Stripe, stripeDay, hc)
		case *UnionPay:
			d, err = NewUnionPayBills(c.UnionPay, v, hc)
		default:
			continue
		}
		switch {
		case errors.Is(err, ErrNoCredentials):
			skipped = append(skipped, err)
		case err != nil:
			return nil, nil, err
		default:
			ds = append(ds, d)
		}
	}
	return ds, skipped, nil
}
