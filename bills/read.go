package bills

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"

	"github.com/paygw/paygw/money"
)

// What the readers share: bounded line reading, exact decimal amounts, GBK decoding, columns by
// header name. The Chinese channels' clock is ChinaTime (day.go).

// maxLine bounds one line of any bill. Real lines are a few hundred bytes; a longer one is a bad
// line (or not a bill), and the bound is what keeps memory flat on hostile input.
const maxLine = 64 << 10

// maxMinor bounds any single amount in minor units (one trillion major units at two decimals):
// larger is a parsing accident, not a trade, and the bound keeps sums far from overflow.
const maxMinor = 100_000_000_000_000

var errLineTooLong = errors.New("line longer than 64 KiB")

// formatErr wraps ErrFormat with what was wrong.
func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// lineErr is a bad line.
func lineErr(no int, format string, args ...any) *LineError {
	return &LineError{No: no, Reason: fmt.Sprintf(format, args...)}
}

// ioErr turns a read error into the error that ends the bill: a truncated or corrupt input is
// not a bill of the format, whatever layer (gzip, zip, flate) noticed it.
func ioErr(no int, err error) error {
	if errors.Is(err, ErrFormat) {
		return err
	}
	return fmt.Errorf("%w: line %d: reading: %w", ErrFormat, no, err)
}

// lineReader yields lines without their LF or CRLF, one at a time, each valid until the next call.
type lineReader struct {
	br  *bufio.Reader
	no  int // number of the line last returned (1-based)
	buf []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line, io.EOF after the last, errLineTooLong for a line over maxLine
// (its rest is skipped, so the caller may go on), or the underlying read error.
func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	tooLong, any := false, false
	for {
		frag, err := l.br.ReadSlice('\n')
		any = any || len(frag) > 0
		if !tooLong {
			if len(l.buf)+len(frag) > maxLine+2 {
				tooLong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if !any {
				return nil, io.EOF
			}
			break
		}
		if err != nil {
			return nil, err
		}
		break
	}
	l.no++
	if tooLong {
		return nil, errLineTooLong
	}
	line := bytes.TrimSuffix(l.buf, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// gbkLine decodes GBK lines into UTF-8, reusing one buffer.
type gbkLine struct {
	dec transform.Transformer
	buf []byte
}

func newGBKLine() *gbkLine { return &gbkLine{dec: simplifiedchinese.GBK.NewDecoder()} }

// decode returns the UTF-8 text of raw, valid until the next call, and false if raw is not valid
// GBK (the decoder writes U+FFFD for every byte sequence GBK does not define, and GBK itself
// cannot encode U+FFFD, so its presence proves an invalid input).
func (g *gbkLine) decode(raw []byte) ([]byte, bool) {
	if n := 3*len(raw) + 4; cap(g.buf) < n { // a GBK byte pair becomes at most 3 UTF-8 bytes; 0x80 alone becomes €
		g.buf = make([]byte, n)
	}
	g.dec.Reset()
	n, _, err := g.dec.Transform(g.buf[:cap(g.buf)], raw, true)
	out := g.buf[:n]
	if err != nil || bytes.Contains(out, []byte(string(utf8.RuneError))) {
		return out, false
	}
	return out, true
}

// decodeGBK decodes a short GBK string (a zip entry name, a fixed-width field).
func decodeGBK(raw []byte) (string, bool) {
	g := newGBKLine()
	out, ok := g.decode(raw)
	return string(out), ok
}

// columns maps header names to positions. Header cells are trimmed of spaces, TABs and the
// backtick WeChat puts before fields; the first occurrence of a name wins.
type columns map[string]int

func newColumns(header []string) columns {
	c := make(columns, len(header))
	for i, h := range header {
		h = strings.Trim(h, " \t`\ufeff")
		if _, dup := c[h]; !dup {
			c[h] = i
		}
	}
	return c
}

// need returns the position of the first of names present, or an ErrFormat naming names[0].
func (c columns) need(what string, names ...string) (int, error) {
	if i := c.opt(names...); i >= 0 {
		return i, nil
	}
	return 0, formatErr("%s: no column %q in the header", what, names[0])
}

// needer returns a need for what that keeps the first missing column's error in *err, so that
// a struct of positions is filled in one expression and checked once.
func (c columns) needer(what string, err *error) func(names ...string) int {
	return func(names ...string) int {
		i, e := c.need(what, names...)
		if *err == nil {
			*err = e
		}
		return i
	}
}

// opt returns the position of the first of names present, or -1.
func (c columns) opt(names ...string) int {
	for _, n := range names {
		if i, ok := c[n]; ok {
			return i
		}
	}
	return -1
}

// parseDecimal converts a signed decimal string in major units into minor units, exactly, where
// the currency has exp digits after the point. It takes an optional leading '-', ASCII digits
// without leading zeros (bar a lone "0"), and an optional '.' followed by 1 to exp digits.
// Anything else ("1,000.00", "1.234" at exp 2, "1e3", " 1", "+1", "1.") is refused: a guess at
// money is worse than a counted bad line.
func parseDecimal(s string, exp int) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	switch {
	case whole == "" || !allDigits(whole):
		return 0, errors.New("want digits before the point")
	case len(whole) > 1 && whole[0] == '0':
		return 0, errors.New("leading zero")
	case hasDot && exp == 0:
		return 0, errors.New("this currency has no decimals")
	case hasDot && (frac == "" || len(frac) > exp || !allDigits(frac)):
		return 0, fmt.Errorf("want 1 to %d digits after the point", exp)
	case len(whole) > 15:
		return 0, errors.New("too large")
	}
	var v int64
	for _, c := range whole {
		v = v*10 + int64(c-'0')
	}
	for i := range exp {
		v *= 10
		if i < len(frac) {
			v += int64(frac[i] - '0')
		}
	}
	if v > maxMinor {
		return 0, errors.New("too large")
	}
	if neg {
		v = -v
	}
	return v, nil
}

// parseUint parses a run of ASCII digits (an amount already in minor units).
func parseUint(s string) (int64, error) {
	if s == "" || !allDigits(s) {
		return 0, errors.New("want digits")
	}
	if len(s) > 1 && s[0] == '0' {
		s = strings.TrimLeft(s, "0")
		if s == "" {
			return 0, nil
		}
	}
	if len(s) > 15 {
		return 0, errors.New("too large")
	}
	var v int64
	for _, c := range s {
		v = v*10 + int64(c-'0')
	}
	if v > maxMinor {
		return 0, errors.New("too large")
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// currencyCode upper-cases an ISO 4217 code, refusing anything but three ASCII letters that name
// a currency in paygw's one table (money). Amounts in a bill are read in that currency's ISO 4217
// minor units (money.Exponent), the unit paygw counts every amount in.
func currencyCode(s string) (string, bool) {
	if len(s) != 3 {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		default:
			return "", false
		}
	}
	return string(b), money.Valid(string(b))
}

// quote is a short, safe quote of input for a reason.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// trimField trims the spaces and TABs bills pad fields with.
func trimField(s string) string { return strings.Trim(s, " \t") }

// splitInto appends s's fields, separated by sep, to dst.
func splitInto(dst []string, s, sep string) []string {
	for {
		i := strings.Index(s, sep)
		if i < 0 {
			return append(dst, s)
		}
		dst = append(dst, s[:i])
		s = s[i+len(sep):]
	}
}

// minorDigits is the ISO 4217 exponent of a code currencyCode accepted.
func minorDigits(cur string) int {
	exp, _ := money.Exponent(cur)
	return exp
}

// parseDecimalPadded is parseDecimal, but digits past the currency's exponent may be zeros (up
// to 8 after the point): Stripe's API counts ISK in hundredths, and if its report prints ISK like
// a two-decimal currency ("1000.00"), the zeros change no value; WeChat writes its fees with five
// decimals ("0.04000"), rounded to the fen. A non-zero digit there is still refused.
func parseDecimalPadded(s string, exp int) (int64, error) {
	if whole, frac, ok := strings.Cut(s, "."); ok && len(frac) > exp && len(frac) <= 8 && strings.Trim(frac[exp:], "0") == "" {
		s = whole
		if exp > 0 {
			s += "." + frac[:exp]
		}
	}
	return parseDecimal(s, exp)
}

// parseSigned parses an optional '-' and a run of ASCII digits (an amount in minor units that
// may be negative).
func parseSigned(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	v, err := parseUint(strings.TrimPrefix(s, "-"))
	if neg {
		v = -v
	}
	return v, err
}
