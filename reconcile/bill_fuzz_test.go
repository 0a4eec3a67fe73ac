package reconcile_test

import (
	"archive/zip"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// fuzzDay is the day every fuzzed bill is run as.
var fuzzDay = time.Date(2026, 10, 1, 0, 0, 0, 0, cst)

// fuzzFormats are the bill formats the fuzz drives, by the input's format byte (mod their
// number): the channel the run is of, the source, and the reader over the data.
var fuzzFormats = []struct {
	channel, source string
	loc             *time.Location
	open            func(data []byte) (bills.Reader, error)
}{
	{"alipay", repository.SourceChannel, cst, func(d []byte) (bills.Reader, error) { return bills.NewAlipayCSV(bytes.NewReader(d)), nil }},
	{"alipay", repository.SourceChannel, cst, func(d []byte) (bills.Reader, error) { return bills.NewAlipay(bytes.NewReader(d), int64(len(d))) }},
	{"wechatpay", repository.SourceChannel, cst, func(d []byte) (bills.Reader, error) { return bills.NewWeChat(bytes.NewReader(d)), nil }},
	{"unionpay", repository.SourceChannel, cst, func(d []byte) (bills.Reader, error) { return bills.NewUnionPayZM(bytes.NewReader(d), fuzzDay), nil }},
	{"unionpay", repository.SourceChannel, cst, func(d []byte) (bills.Reader, error) {
		return bills.NewUnionPayZip(bytes.NewReader(d), int64(len(d)), fuzzDay)
	}},
	{"stripe", repository.SourceChannel, time.UTC, func(d []byte) (bills.Reader, error) { return bills.NewStripe(bytes.NewReader(d)), nil }},
	{"alipay", repository.SourceCSV, cst, func(d []byte) (bills.Reader, error) { return bills.NewCSV(bytes.NewReader(d)), nil }},
}

// fuzzIdentity is whom the fuzzed bills of each channel must name.
var fuzzIdentity = map[string]reconcile.Identity{
	"alipay":    {Account: testPID},
	"wechatpay": {Merchant: simulate.SandboxWeChatMchID, AppIDs: []string{simulate.SandboxWeChatAppID}},
	"unionpay":  {Merchant: simulate.SandboxUnionPayMerID},
}

func zipped(tb testing.TB, name string, data []byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, NonUTF8: true})
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// FuzzBillRun drives whole bill runs (reader, staging, matching and repairs, on a real MariaDB
// through a real Applier) with fuzzed bills of every format. It must never panic, and:
//   - an error writes nothing but, at most, one run row marked failed with its error; a refused
//     bill not even that; nothing else changes (orders, refunds, anomalies, records, journal,
//     and every other run's lines and rows);
//   - an untrusted bill completes one run, keeps none of its lines, and moves no money;
//   - no run is left running.
//
// Flags in the format byte: 0x80 the bill was downloaded, 0x40 the configuration names nobody.
func FuzzBillRun(f *testing.F) {
	at := fuzzDay.Add(10 * time.Hour)
	alipay := alipayText(f, testPID+"0156", fuzzDay, "FA1", "TA1", 100, at)
	f.Add(byte(0), []byte(alipay))
	f.Add(byte(0), []byte(strings.Replace(alipay, "1\xb1\xca", "0\xb1\xca", 1))) // untrusted: its totals disagree
	f.Add(byte(0), []byte(alipayText(f, "20889999999999990156", fuzzDay, "FA1", "TA1", 100, at)))
	f.Add(byte(0xc0), []byte(alipay))
	f.Add(byte(1), zipped(f, "x_\xd2\xb5\xce\xf1\xc3\xf7\xcf\xb8.csv", []byte(alipay)))
	mch, app := simulate.SandboxWeChatMchID, simulate.SandboxWeChatAppID
	f.Add(byte(2), []byte(wechatText(
		[9]string{at.Format(time.DateTime), "SUCCESS", mch, app, "TW1", "FW1", "100", "", "0"},
		[9]string{at.Format(time.DateTime), "SUCCESS", mch, app, "TW2", "FW2", "100", "", "0"},
		[9]string{at.Format(time.DateTime), "REFUND", mch, app, "TW2", "FW2", "0", "RW2", "30"})))
	zm := zmText("FU1", "TU1", simulate.SandboxUnionPayMerID, 100, at) + zmText("FU2", "TU2", simulate.SandboxUnionPayMerID, 100, at)
	f.Add(byte(3), []byte(zm))
	f.Add(byte(4), zipped(f, "INN261001ZM_"+simulate.SandboxUnionPayMerID, []byte(zm)))
	f.Add(byte(5), []byte("balance_transaction_id,created_utc,currency,gross,reporting_category,payment_intent_id,payment_metadata[trade_no],source_id\n"+
		"txn_1,2026-10-01 10:00:00,usd,1.00,charge,pi_FS1,FS1,ch_1\n"+
		"txn_2,2026-10-01 11:00:00,usd,-0.30,refund,pi_FS2,FS2,re_1\n"))
	f.Add(byte(6), []byte("trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\n"+
		"FC1,TC1,PAY,100,CNY,2026-10-01T10:00:00+08:00,\n"+
		"FC2,TC2,REFUND,30,CNY,2026-10-01T10:00:00+08:00,RC2\n"+
		"FC2,TC2,REFUND,30,CNY,2026-08-01T10:00:00+08:00,RC3\n")) // refused: its line 4 is of August
	f.Add(byte(6), []byte("trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\n"+
		"FC1,TC1,PAY,100,CNY,2026-10-01T10:00:00+08:00,\n"+
		"FCLOSED,TC3,PAY,100,CNY,2026-10-01T10:00:00+08:00,\n"+
		"FC2,TC2,REFUND,30,CNY,2026-10-01T10:00:00+08:00,RC2\n"))

	dsn := testenv.NewDatabase(f)
	db := testenv.Open(f, dsn)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = raw.Close() })
	// Logs go nowhere: a fuzz target may not log through f.
	g := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: "paygw-test:" + testenv.Random(6) + ":", Timeout: 3 * time.Second}, zerolog.Nop())
	f.Cleanup(func() { _ = g.Close() })
	job := reconcile.New(db, apply.New(db, g, 5*time.Second, zerolog.Nop()), nil, reconcile.Config{QPS: 1}, zerolog.Nop())
	for i, o := range []struct{ trade, status, channel, txn, cur string }{
		{"FA1", "WAIT_PAY", "", "", "CNY"}, {"FA2", "PAID", "alipay", "TA2", "CNY"},
		{"FW1", "WAIT_PAY", "", "", "CNY"}, {"FW2", "PAID", "wechatpay", "TW2", "CNY"},
		{"FU1", "WAIT_PAY", "", "", "CNY"}, {"FU2", "PAID", "unionpay", "TU2", "CNY"},
		{"FS1", "WAIT_PAY", "", "", "USD"}, {"FS2", "PAID", "stripe", "pi_FS2", "USD"},
		{"FC1", "WAIT_PAY", "", "", "CNY"}, {"FC2", "PAID", "alipay", "TC2", "CNY"}, {"FCLOSED", "CLOSED", "", "", "CNY"},
	} {
		paid := sql.NullTime{Time: at.Add(time.Duration(i) * time.Minute).UTC(), Valid: o.status == "PAID"}
		testenv.Exec(f, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, channel, channel_txn_id,
			paid_time, create_time, update_time) VALUES (?, 1, 'S', 1, 100, ?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, ?)`,
			o.trade, o.cur, o.status, o.channel, o.txn, paid, at.UTC(), at.UTC())
	}

	f.Fuzz(func(t *testing.T, format byte, data []byte) {
		ctx := context.Background()
		ff := fuzzFormats[int(format&0x3f)%len(fuzzFormats)]
		r, err := ff.open(data)
		if err != nil {
			if !errors.Is(err, bills.ErrFormat) {
				t.Fatalf("opening: %v, not ErrFormat", err)
			}
			return
		}
		cfg := reconcile.BillConfig{Location: ff.loc, Source: ff.source, Downloaded: format&0x80 != 0}
		if format&0x40 == 0 {
			cfg.Identity = fuzzIdentity[ff.channel]
		}
		before := fuzzSnapshot(t, raw, -1)
		rep, err := job.MatchBill(ctx, ff.channel, fuzzDay, r, cfg, nil)
		after := fuzzSnapshot(t, raw, before.maxRun)
		if after.running != 0 {
			t.Fatalf("%d runs left running", after.running)
		}
		var refused *reconcile.RefusedError
		switch {
		case err != nil:
			want := 1
			if errors.As(err, &refused) {
				want = 0
			}
			if after.newRuns > want || after.newFailed != after.newRuns || after.newLines+after.newRows != 0 {
				t.Fatalf("error %v: %d new runs (%d failed with an error), %d lines, %d rows; want at most %d failed run and nothing else",
					err, after.newRuns, after.newFailed, after.newLines, after.newRows, want)
			}
		case !rep.Trusted:
			if after.newRuns != 1 || after.newComplete != 1 || after.newLines != 0 {
				t.Fatalf("untrusted: %d new runs, %d complete, %d lines kept", after.newRuns, after.newComplete, after.newLines)
			}
		default:
			if after.newRuns != 1 || after.newComplete != 1 {
				t.Fatalf("trusted: %d new runs, %d complete", after.newRuns, after.newComplete)
			}
			return
		}
		if after.money != before.money || after.oldLines != before.oldLines || after.oldRows != before.oldRows {
			t.Fatalf("error %v, trusted %v (%q): something moved\nbefore %+v\nafter  %+v", err, rep.Trusted, rep.Untrusted, before, after)
		}
	})
}

// fuzzState is what a bill run may or may not change, around runs after the id maxRun.
type fuzzState struct {
	money                           string // checksums of the tables that hold money and what moved it
	maxRun                          int64
	running                         int
	oldLines, oldRows               int // of runs up to maxRun
	newRuns, newFailed, newComplete int
	newLines, newRows               int
}

// fuzzSnapshot reads the state around the runs after maxRun (-1: after the latest run).
func fuzzSnapshot(t *testing.T, raw *sql.DB, maxRun int64) fuzzState {
	t.Helper()
	var s fuzzState
	if maxRun < 0 {
		if err := raw.QueryRow(`SELECT COALESCE(MAX(id), 0) FROM recon_run`).Scan(&maxRun); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := raw.Query(`CHECKSUM TABLE orders, refund, anomaly, idempotent_record, notify_journal, payment_attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var table string
		var sum sql.NullInt64
		if err := rows.Scan(&table, &sum); err != nil {
			t.Fatal(err)
		}
		s.money += fmt.Sprintf("%s=%d ", table, sum.Int64)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	const q = `SELECT (SELECT COALESCE(MAX(id), 0) FROM recon_run),
		(SELECT COUNT(*) FROM recon_run WHERE status = 'running'),
		(SELECT COUNT(*) FROM recon_line WHERE run_id <= ?), (SELECT COUNT(*) FROM recon_discrepancy WHERE run_id <= ?),
		(SELECT COUNT(*) FROM recon_run WHERE id > ?),
		(SELECT COUNT(*) FROM recon_run WHERE id > ? AND status = 'failed' AND error <> ''),
		(SELECT COUNT(*) FROM recon_run WHERE id > ? AND status = 'complete'),
		(SELECT COUNT(*) FROM recon_line WHERE run_id > ?), (SELECT COUNT(*) FROM recon_discrepancy WHERE run_id > ?)`
	if err := raw.QueryRow(q, maxRun, maxRun, maxRun, maxRun, maxRun, maxRun, maxRun).Scan(&s.maxRun, &s.running, &s.oldLines, &s.oldRows,
		&s.newRuns, &s.newFailed, &s.newComplete, &s.newLines, &s.newRows); err != nil {
		t.Fatal(err)
	}
	return s
}
