package bills

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// result is everything a reader yielded.
type result struct {
	lines []Line
	bad   []*LineError
	err   error // nil after io.EOF; else the error that ended the bill
	sum   Summary
}

// readAll drains r. It fails the test if the reader breaks the contract: an error that is neither
// io.EOF, a *LineError nor an ErrFormat, a line that is not well formed, or more calls than the
// input could justify.
func readAll(tb testing.TB, r Reader, maxCalls int) result {
	tb.Helper()
	var res result
	for range maxCalls {
		l, err := r.Next()
		var le *LineError
		switch {
		case err == nil:
			if msg := checkLine(l); msg != "" {
				tb.Fatalf("line %+v: %s", l, msg)
			}
			res.lines = append(res.lines, l)
		case errors.As(err, &le):
			if le.No <= 0 || le.Reason == "" {
				tb.Fatalf("line error without a line number or reason: %#v", le)
			}
			res.bad = append(res.bad, le)
		case err == io.EOF:
			res.sum = r.Summary()
			return res
		case errors.Is(err, ErrFormat):
			res.err = err
			if _, again := r.Next(); again != err {
				tb.Fatalf("the format error is not sticky: %v, then %v", err, again)
			}
			return res
		default:
			tb.Fatalf("Next: %v: neither io.EOF, a *LineError nor ErrFormat", err)
		}
	}
	tb.Fatalf("no end after %d calls to Next", maxCalls)
	return res
}

// readClean drains r as readAll does, and fails the test unless the bill reads to its end without
// a bad line, in exactly n lines.
func readClean(tb testing.TB, r Reader, n int) result {
	tb.Helper()
	res := readAll(tb, r, 100)
	if res.err != nil || len(res.bad) != 0 || len(res.lines) != n {
		tb.Fatalf("err %v, bad %v, lines %+v; want %d lines", res.err, res.bad, res.lines, n)
	}
	return res
}

// wantLines compares the lines a reader yielded with want, field by field (times as instants).
func wantLines(tb testing.TB, got, want []Line) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%d lines, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !linesEqual(got[i], want[i]) {
			tb.Errorf("line %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func linesEqual(a, b Line) bool {
	return a.No == b.No && a.Kind == b.Kind && a.TradeNo == b.TradeNo && a.ChannelTxnID == b.ChannelTxnID &&
		a.RefundID == b.RefundID && a.AmountFen == b.AmountFen && a.Currency == b.Currency && a.Time.Equal(b.Time)
}

func checkLine(l Line) string {
	switch {
	case l.Kind != KindPay && l.Kind != KindRefund:
		return "kind"
	case l.AmountFen <= 0:
		return "amount not positive"
	case len(l.Currency) != 3:
		return "currency"
	case l.No <= 0:
		return "line number"
	case l.ChannelTxnID == "":
		return "no channel txn id"
	case l.Kind == KindPay && l.RefundID != "":
		return "refund id on a payment"
	case l.Time.IsZero():
		return "no time"
	}
	return ""
}

func gbk(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		tb.Fatalf("GBK encode %q: %v", s, err)
	}
	return b
}

type zipEntry struct {
	name []byte // raw bytes, as the archive stores them
	data []byte
}

// zipOf writes entries without the UTF-8 flag, as Alipay's and UnionPay's tools do.
func zipOf(tb testing.TB, entries ...zipEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: string(e.name), Method: zip.Deflate, NonUTF8: true})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func cst(s string) time.Time {
	t, err := time.ParseInLocation(time.DateTime, s, ChinaTime)
	if err != nil {
		panic(err)
	}
	return t
}

func wantFormat(tb testing.TB, res result, mention string) {
	tb.Helper()
	if !errors.Is(res.err, ErrFormat) {
		tb.Fatalf("want ErrFormat, got %v (lines %d, bad %d)", res.err, len(res.lines), len(res.bad))
	}
	if mention != "" && !bytes.Contains([]byte(res.err.Error()), []byte(mention)) {
		tb.Fatalf("error %q does not mention %q", res.err, mention)
	}
}
