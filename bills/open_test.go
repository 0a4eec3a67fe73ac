package bills

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// TestFileFormat: the format of a file an operator gives, by channel and name.
func TestFileFormat(t *testing.T) {
	tests := map[string]struct {
		channel, name string
		want          Format
	}{
		"alipay zip":          {"alipay", "20880211096256330156_20190916.csv.ZIP", FormatAlipayZip},
		"alipay detail csv":   {"alipay", "业务明细.csv", FormatAlipayCSV},
		"wechatpay":           {"wechatpay", "bill.gz", FormatWeChat},
		"unionpay zip":        {"unionpay", "ZM.zip", FormatUnionPayZip},
		"unionpay ZM file":    {"unionpay", "INN24123188ZM_777290058110048", FormatUnionPayZM},
		"stripe":              {"stripe", "balance.csv", FormatStripe},
		"paygw's generic csv": {"csv", "lines.zip", FormatCSV},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := FileFormat(tt.channel, tt.name); got != tt.want || err != nil {
				t.Errorf("FileFormat = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := FileFormat("paypal", "x.csv"); err == nil {
		t.Error("a channel without a bill format was given one")
	}
}

// TestOpen: every format opens with its reader; an empty day is no lines and no summary.
func TestOpen(t *testing.T) {
	empty, err := Open(FormatEmpty, nil, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.Next(); err != io.EOF || empty.Summary().Present {
		t.Errorf("empty bill: Next %v, summary %+v", err, empty.Summary())
	}
	csv := []byte("trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\nT1,ch_1,PAY,100,CNY,2024-05-01T10:00:00+08:00,\n")
	r, err := Open(FormatCSV, bytes.NewReader(csv), int64(len(csv)), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := r.Next(); err != nil || l.TradeNo != "T1" || l.AmountFen != 100 {
		t.Errorf("csv: %+v, %v", l, err)
	}
	if _, err := Open(FormatAlipayZip, bytes.NewReader(csv), int64(len(csv)), time.Time{}); !errors.Is(err, ErrFormat) {
		t.Errorf("a csv opened as Alipay's zip: %v, want ErrFormat", err)
	}
	if _, err := Open("pdf", bytes.NewReader(nil), 0, time.Time{}); err == nil {
		t.Error("an unknown format opened")
	}
}

// TestDayZone: the Chinese channels count their day in Beijing time, any other in the zone given.
func TestDayZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for channel, want := range map[string]*time.Location{"alipay": ChinaTime, "wechatpay": ChinaTime, "unionpay": ChinaTime, "stripe": ny, "csv": ny} {
		if got := DayZone(channel, ny); got != want {
			t.Errorf("%s: %v, want %v", channel, got, want)
		}
	}
	if _, off := time.Date(2026, 7, 1, 0, 0, 0, 0, ChinaTime).Zone(); off != 8*3600 {
		t.Errorf("ChinaTime is UTC%+d s", off)
	}
}
