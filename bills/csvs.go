package bills

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// What the two RFC 4180 formats (Stripe's report and the generic CSV) share: a csv.Reader over
// a reader that bounds a record's size, UTF-8 checked field by field, whose first record is the
// header.

// boundedReader fails once more than limit bytes are read without a reset: a quoted field that
// never closes would otherwise have csv.Reader hold the rest of the file in memory.
type boundedReader struct {
	r     io.Reader
	n     int
	limit int
	err   error // what Read returns past the limit
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

// csvRecords yields records with their line numbers.
type csvRecords struct {
	br   *boundedReader
	cr   *csv.Reader
	last int // the line the last record read ended on; 0 before the first
}

func newCSVRecords(r io.Reader) *csvRecords { return newCSVRecordsLimit(r, maxRecord) }

// maxRecord bounds one record of the RFC 4180 formats, quoted newlines included.
const maxRecord = 1 << 20

// newCSVRecordsLimit is newCSVRecords with another bound, so that tests and fuzz targets reach
// the bound with small inputs.
func newCSVRecordsLimit(r io.Reader, limit int) *csvRecords {
	size := fmt.Sprintf("%d bytes", limit)
	if limit%(1<<20) == 0 {
		size = fmt.Sprintf("%d MiB", limit>>20)
	}
	// The bound is the only thing that stops a quoted field that never closes: say so.
	br := &boundedReader{r: r, limit: limit, err: fmt.Errorf("a record longer than %s (a quoted field that never closes?)", size)}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // a short or long row is a bad line, counted by the caller
	cr.ReuseRecord = true
	return &csvRecords{br: br, cr: cr}
}

// next returns the next record and its line number; a *LineError for a row csv cannot read; an
// ErrFormat for input that is not UTF-8 or cannot be read (a record over the bound, a failing
// reader below); io.EOF at the end.
func (c *csvRecords) next(what string) ([]string, int, error) {
	c.br.n = 0
	rec, err := c.cr.Read()
	var pe *csv.ParseError
	switch {
	case err == io.EOF:
		return nil, 0, io.EOF
	case errors.As(err, &pe) && !isReadErr(pe.Err):
		c.last = pe.Line
		return nil, pe.StartLine, lineErr(pe.StartLine, "%v", pe.Err)
	case err != nil:
		// csv.Reader states no position for a read error, and has none for the fields it had not
		// finished: FieldPos panics for them. Name the record by what is known.
		if len(rec) > 0 {
			line, _ := c.cr.FieldPos(0)
			return nil, line, formatErr("%s: line %d: %v", what, line, err)
		}
		if c.last == 0 {
			return nil, 0, formatErr("%s: the first record: %v", what, err)
		}
		return nil, 0, formatErr("%s: the record after line %d: %v", what, c.last, err)
	}
	line, _ := c.cr.FieldPos(0) // a record read without error has at least one field
	lastLine, _ := c.cr.FieldPos(len(rec) - 1)
	c.last = lastLine + strings.Count(rec[len(rec)-1], "\n") // csv keeps a quoted line break as one \n
	for _, f := range rec {
		if !utf8.ValidString(f) {
			return nil, line, formatErr("%s: line %d: not UTF-8", what, line)
		}
	}
	return rec, line, nil
}

// headedRecords reads the records of a file whose first record is its header. Once it fails
// (the file is empty, the header is bad, the input cannot be read, or io.EOF) it returns that
// error from then on; a row that csv cannot parse, or whose fields the header does not count,
// is a *LineError, and reading goes on past it.
type headedRecords struct {
	rs     *csvRecords
	header bool
	n      int // the header's fields
	err    error
}

// next returns the next record after the header and its line number. It hands the header to
// readHeader, whose error ends the file; what names the format in errors.
func (h *headedRecords) next(what string, readHeader func(rec []string) error) ([]string, int, error) {
	for h.err == nil {
		rec, no, err := h.rs.next(what)
		switch {
		case err == io.EOF && !h.header:
			h.err = formatErr("%s: the file is empty", what)
			continue
		case err == io.EOF:
			h.err = io.EOF
			continue
		case err != nil:
			if le, bad := err.(*LineError); bad {
				if h.header {
					return nil, no, err
				}
				err = formatErr("%s: the header: %v", what, le)
			}
			h.err = err
			continue
		}
		if !h.header {
			h.err = readHeader(rec)
			h.header, h.n = true, len(rec)
			continue
		}
		if len(rec) != h.n {
			return nil, no, lineErr(no, "%d fields, the header has %d", len(rec), h.n)
		}
		return rec, no, nil
	}
	return nil, 0, h.err
}

// isReadErr tells a reading failure (a gzip or zip below, the bound above) from csv's own syntax
// errors.
func isReadErr(err error) bool {
	return err != csv.ErrBareQuote && err != csv.ErrQuote && err != csv.ErrFieldCount
}
