package bills

import (
	"encoding/csv"
	"errors"
	"io"
	"unicode/utf8"
)

// What the two RFC 4180 formats (Stripe's report and the generic CSV) share: a csv.Reader over
// a reader that bounds a record's size, UTF-8 checked field by field.

var errRecordTooLong = errors.New("a record longer than 1 MiB")

// boundedReader fails once more than limit bytes are read without a reset: a quoted field that
// never closes would otherwise have csv.Reader hold the rest of the file in memory.
type boundedReader struct {
	r     io.Reader
	n     int
	limit int
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, errRecordTooLong
	}
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

// csvRecords yields records with their line numbers.
type csvRecords struct {
	br *boundedReader
	cr *csv.Reader
}

func newCSVRecords(r io.Reader) *csvRecords {
	br := &boundedReader{r: r, limit: 1 << 20}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // a short or long row is a bad line, counted by the caller
	cr.ReuseRecord = true
	return &csvRecords{br: br, cr: cr}
}

// next returns the next record and its line number; a *LineError for a row csv cannot read; an
// ErrFormat for input that is not UTF-8 or cannot be read; io.EOF at the end.
func (c *csvRecords) next(what string) ([]string, int, error) {
	c.br.n = 0
	rec, err := c.cr.Read()
	var pe *csv.ParseError
	switch {
	case err == io.EOF:
		return nil, 0, io.EOF
	case errors.As(err, &pe) && pe.Err != errRecordTooLong && !isReadErr(pe.Err):
		return nil, pe.StartLine, lineErr(pe.StartLine, "%v", pe.Err)
	case err != nil:
		line, _ := c.cr.FieldPos(0)
		return nil, line, formatErr("%s: near line %d: %v", what, line, err)
	}
	line, _ := c.cr.FieldPos(0)
	for _, f := range rec {
		if !utf8.ValidString(f) {
			return nil, line, formatErr("%s: line %d: not UTF-8", what, line)
		}
	}
	return rec, line, nil
}

// isReadErr tells a reading failure (a gzip or zip below, the bound above) from csv's own syntax
// errors.
func isReadErr(err error) bool {
	return err != csv.ErrBareQuote && err != csv.ErrQuote && err != csv.ErrFieldCount
}
