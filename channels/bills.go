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
)

// Bill downloads: each channel's daily bill fetched over the same outbound plumbing as its trade
// query (the same SDK clients, merchant keys, transports and response verification), and
// handed over as a file in the channel's real format, which bills.Open reads. Download here, read in
// bills, match in reconcile (Job.MatchBill).

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

// BillFile is a downloaded bill, spooled to a temporary file so that memory stays flat whatever
// its size. Close removes the file.
type BillFile struct {
	Channel string
	Day     time.Time
	format  bills.Format
	f       *os.File
	size    int64
}

// Size is the bill's size in bytes as stored (compressed when the channel compresses it).
func (b *BillFile) Size() int64 { return b.size }

// Empty reports that the channel stated it has no bill for the day: no trades.
func (b *BillFile) Empty() bool { return b.format == bills.FormatEmpty }

// Open reads the bill with the reader of its format (bills.Open), as a file an operator gives is
// read. An empty day reads as a bill of no lines and no summary.
func (b *BillFile) Open() (bills.Reader, error) {
	return bills.Open(b.format, b.f, b.size, b.Day)
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

// MaxBillBytes bounds a downloaded bill as stored (and, for UnionPay, as decompressed): far above
// any real merchant's day, it keeps a broken or hostile server from filling the disk.
const MaxBillBytes = 2 << 30

// ErrBillTooLarge means the bill went past MaxBillBytes.
var ErrBillTooLarge = errors.New("larger than the 2 GiB a bill may take")

// ErrBillSource means reading the bill's source failed (the connection, or the decompression of what
// came over it), as opposed to writing the spooled copy.
var ErrBillSource = errors.New("reading the bill")

type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrBillSource, err)
	}
	return n, err
}

// NewBillFile starts channel's bill of day in format, as an empty temporary file, for a channel
// that writes its bill itself (Stripe's, page by page). It is written with Write and closed, and
// removed, by the caller on failure.
func NewBillFile(channel string, format bills.Format, day time.Time) (*BillFile, error) {
	f, err := os.CreateTemp("", "paygw-bill-"+channel+"-*")
	if err != nil {
		return nil, fmt.Errorf("channels: %s: spooling the bill: %w", channel, err)
	}
	return &BillFile{Channel: channel, Day: day, format: format, f: f}, nil
}

// Write appends p to the bill.
func (b *BillFile) Write(p []byte) (int, error) {
	n, err := b.f.Write(p)
	b.size += int64(n)
	return n, err
}

// Stored is the bill as stored, from its first byte (compressed when the channel compresses it).
func (b *BillFile) Stored() *io.SectionReader { return io.NewSectionReader(b.f, 0, b.size) }

// SpoolBill copies r, channel's bill of day in format, into a new temporary file, at most
// MaxBillBytes of it: past that, ErrBillTooLarge; a failure reading r wraps ErrBillSource.
func SpoolBill(channel string, format bills.Format, day time.Time, r io.Reader) (*BillFile, error) {
	b, err := NewBillFile(channel, format, day)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(b, io.LimitReader(sourceReader{r}, MaxBillBytes+1))
	switch {
	case err == nil && b.size > MaxBillBytes:
		err = ErrBillTooLarge
	case err == nil:
		return b, nil
	}
	_ = b.Close()
	return nil, err
}

// FetchBill sends req, a GET of channel's bill file of day whose URL may carry a download token,
// over hc and spools the answer (SpoolBill) as format. what names the file in messages ("bill",
// "bill zip"). Errors: ErrQueryFailed when the bill cannot be fetched, a status other than 200, or
// a failure reading it; ErrMalformed for a bill larger than MaxBillBytes. None names the URL.
func FetchBill(hc *http.Client, req *http.Request, channel, what string, format bills.Format, day time.Time) (*BillFile, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: downloading the bill: %w", ErrQueryFailed, channel, URLCause(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: downloading the bill: HTTP %d", ErrQueryFailed, channel, resp.StatusCode)
	}
	b, err := SpoolBill(channel, format, day, resp.Body)
	switch {
	case errors.Is(err, ErrBillTooLarge):
		return nil, fmt.Errorf("%w: %s: the %s is %w", ErrMalformed, channel, what, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: downloading the bill: %w", ErrQueryFailed, channel, err)
	}
	return b, nil
}

// NoBill is the bill of a day the channel says had no trades.
func NoBill(channel string, day time.Time) *BillFile {
	return &BillFile{Channel: channel, Day: day, format: bills.FormatEmpty}
}

// BillDate is day's date as the channels write it (yyyy-MM-dd), whatever day's zone.
func BillDate(day time.Time) string { return day.Format(time.DateOnly) }
