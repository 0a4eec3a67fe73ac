package bills

import (
	"io"
	"strings"
	"testing"
)

// TestIssue20Case08UnterminatedQuoteNoPanic: a quoted field that never closes, over the 1 MiB a
// record may hold, once crashed `paygw reconcile bill --channel csv` (csv.Reader.FieldPos after a
// read error before the record's first field ended). Each RFC 4180 reader must end the bill with
// an ErrFormat that names where the record starts and why, and keep returning it.
func TestIssue20Case08UnterminatedQuoteNoPanic(t *testing.T) {
	open := `"` + strings.Repeat("x", 2<<20) // no closing quote, no newline
	readers := map[string]struct {
		header, row string
		open        func(io.Reader) Reader
	}{
		"csv": {
			"trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id",
			"T1,ch_1,PAY,1999,CNY,2024-05-01T10:20:30+08:00,",
			func(r io.Reader) Reader { return NewCSV(r) },
		},
		"stripe": {
			"balance_transaction_id,created_utc,currency,gross,reporting_category,payment_intent_id,payment_metadata[trade_no],source_id",
			"txn_1,2024-05-01 10:00:00,usd,2.50,charge,pi_1,T1,ch_1",
			func(r io.Reader) Reader { return NewStripe(r) },
		},
	}
	for name, rd := range readers {
		cases := map[string]struct {
			input string
			lines int    // good lines before the bad record
			want  string // where and why, as the error states it
		}{
			"in the first field of a row": {rd.header + "\n" + rd.row + "\n" + open, 1, ": the record after line 2: a record longer than 1 MiB"},
			"in a later field of a row":   {rd.header + "\n" + rd.row + "\n" + "a,b," + open, 1, ": line 3: a record longer than 1 MiB"},
			"in the header":               {open, 0, ": the first record: a record longer than 1 MiB"},
			"after blank lines":           {rd.header + "\n\n\n" + open + "\n" + rd.row + "\n", 0, ": the record after line 1: "},
			"after a multi-line record":   {rd.header + "\n" + "\"T\n1\r\n\"" + rd.row[strings.Index(rd.row, ","):] + "\n" + open, 1, ": the record after line 4: "},
		}
		for cname, tc := range cases {
			t.Run(name+"/"+cname, func(t *testing.T) {
				res := readAllNoPanic(t, rd.open(strings.NewReader(tc.input)))
				if res.err == nil {
					t.Fatalf("no error: lines %d, bad %v", len(res.lines), res.bad)
				}
				wantFormat(t, res, name+tc.want)
				if len(res.lines) != tc.lines || len(res.bad) != 0 {
					t.Errorf("lines %d (want %d), bad %v", len(res.lines), tc.lines, res.bad)
				}
			})
		}
	}
}

// readAllNoPanic is readAll reporting a panic as a failure with its value, instead of ending the
// whole test binary.
func readAllNoPanic(t *testing.T, r Reader) (res result) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Next panicked: %v", p)
		}
	}()
	return readAll(t, r, 100)
}
