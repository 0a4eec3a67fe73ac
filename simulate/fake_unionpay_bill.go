package simulate

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/bills"
)

// unionPayBillRoutes serves ACP's file download (txnType 76, fileType 00) at the root, as
// filedownload.95516.com does: the request checked and verified as the trade query is, the
// answer signed with the UnionPay signing certificate, fileContent the base64 of the
// zlib-deflated zip holding the ZM file of the fake's UnionPay trades of settleDate.
func (f *Fake) unionPayBillRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /{$}", f.unionPayFileDownload)
}

func (f *Fake) unionPayFileDownload(w http.ResponseWriter, r *http.Request) {
	echo := []string{"version", "encoding", "bizType", "txnType", "txnSubType", "accessType", "merId", "settleDate", "txnTime", "fileType"}
	f.unionPayAnswer(w, r, echo, func(req, answer url.Values) error {
		day, dayOK := unionPaySettleDay(req.Get("settleDate"), req.Get("txnTime"))
		if code, msg := f.checkUnionPayFileDownload(req); code != "" {
			answer.Set("respCode", code)
			answer.Set("respMsg", msg)
			return nil
		}
		if !dayOK {
			answer.Set("respCode", "98")
			answer.Set("respMsg", "文件不存在")
			return nil
		}
		zm, err := f.UnionPayBillZip(day)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		_, _ = zw.Write(zm) // a bytes.Buffer: cannot fail
		_ = zw.Close()
		answer.Set("respCode", "00")
		answer.Set("respMsg", "成功[0000000]")
		answer.Set("fileName", unionPayZMName(f.manifest.UnionPay.MerID, day)+".zip")
		answer.Set("fileContent", base64.StdEncoding.EncodeToString(z.Bytes()))
		return nil
	})
}

// checkUnionPayFileDownload checks the request as checkUnionPayQuery checks a query.
func (f *Fake) checkUnionPayFileDownload(req url.Values) (code, msg string) {
	for k, want := range map[string]string{"version": "5.1.0", "signMethod": "01", "txnType": "76", "txnSubType": "01",
		"bizType": "000000", "accessType": "0", "fileType": "00"} {
		if req.Get(k) != want {
			return "10", "报文格式错误: " + k
		}
	}
	if req.Get("merId") != f.manifest.UnionPay.MerID {
		return "10", "报文格式错误: merId"
	}
	return f.checkUnionPaySignature(req)
}

// unionPaySettleDay resolves settleDate (MMDD, no year) to the latest such day before the
// request's txnTime day: the file of a day exists from the next day on.
func unionPaySettleDay(settleDate, txnTime string) (time.Time, bool) {
	sent, err := time.ParseInLocation("20060102150405", txnTime, bills.ChinaTime)
	if err != nil || len(settleDate) != 4 {
		return time.Time{}, false
	}
	for y := sent.Year(); y >= sent.Year()-1; y-- {
		d, err := time.ParseInLocation("20060102", strconv.Itoa(y)+settleDate, bills.ChinaTime)
		if err == nil && d.Before(startOfDay(sent, bills.ChinaTime)) {
			return d, true
		}
	}
	return time.Time{}, false
}

func unionPayZMName(merID string, day time.Time) string {
	return "INN" + day.Format("060102") + "88ZM_" + merID
}

// zmWidths are the ZM file's field widths in bytes (42 fields, each followed by one separator).
var zmWidths = [...]int{3, 11, 11, 6, 10, 19, 12, 4, 2, 21, 2, 32, 2, 6, 10, 13, 13, 4, 15, 2, 2, 6, 2, 4, 32, 1, 21, 15, 1, 15, 32, 13, 13, 8, 32, 13, 13, 12, 2, 1, 32, 98}

// UnionPayZMRecord is one record of a ZM file: a consume (txnType 01) or a refund (04).
type UnionPayZMRecord struct {
	MerID, TradeNo string
	QueryID        string // the record's own queryId
	Refund         bool
	OrigQueryID    string // a refund's origQryId: its consume's queryId
	Fen            int64
	At             time.Time
}

// Line is the record as the ZM file holds it: each field GBK, padded to its width and followed
// by a space, then CRLF. A field wider than its width is an error.
func (r UnionPayZMRecord) Line() ([]byte, error) {
	f := map[int]string{0: "S22", 1: "00049992900", 2: "00049992900", 3: r.QueryID[15:], 4: r.At.In(bills.ChinaTime).Format("0102150405"),
		5: "6216***********0018", 6: fmt.Sprintf("%012d", r.Fen), 7: "5411", 8: "07", 9: r.QueryID, 11: r.TradeNo, 12: "01",
		15: "D000000000000", 16: fmt.Sprintf("%013d", r.Fen), 17: "0001", 19: "01", 20: "01", 21: "000201", 27: r.MerID,
		32: fmt.Sprintf("%013d", r.Fen), 36: "000000000000"}
	if r.Refund {
		f[15], f[19], f[20], f[26] = "C000000000000", "04", "00", r.OrigQueryID
	}
	var b bytes.Buffer
	for i, w := range zmWidths {
		gbk, err := simplifiedchinese.GBK.NewEncoder().String(f[i])
		if err != nil {
			return nil, err
		}
		if len(gbk) > w {
			return nil, fmt.Errorf("ZM field %d: %d bytes, width %d", i, len(gbk), w)
		}
		b.WriteString(gbk + strings.Repeat(" ", w-len(gbk)) + " ")
	}
	b.WriteString("\r\n")
	return b.Bytes(), nil
}

// UnionPayZMZip is the zip UnionPay's file download holds: the ZM file zm of day, named for
// merID.
func UnionPayZMZip(merID string, day time.Time, zm []byte) ([]byte, error) {
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	w, err := zw.Create(unionPayZMName(merID, day))
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(zm); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// UnionPayBillZip is the zip of the ZM file of day (Beijing time) for the fake's UnionPay trades:
// a consume (txnType 01) per payment, its queryId the notification's; a refund (04) per refund,
// its queryId the refund notification's and origQryId the consume's. Fields are GBK, fixed width.
func (f *Fake) UnionPayBillZip(day time.Time) ([]byte, error) {
	day = startOfDay(day, bills.ChinaTime)
	merID := f.manifest.UnionPay.MerID
	var b bytes.Buffer
	for _, t := range f.dayTrades("unionpay", day) {
		queryID := t.TxnID
		if !unionPayDigitsOnly(queryID) {
			queryID = unionPayQueryID(t.TradeNo, t.TxnID)
		}
		records := []UnionPayZMRecord{{MerID: merID, TradeNo: t.TradeNo, QueryID: queryID, Fen: t.AmountFen, At: t.PaidAt}}
		if t.RefundID != "" {
			refundID := t.RefundID
			if !unionPayDigitsOnly(refundID) {
				refundID = unionPayQueryID(t.TradeNo, queryID, StatusRefund, t.RefundID)
			}
			records = append(records, UnionPayZMRecord{MerID: merID, TradeNo: t.TradeNo, QueryID: refundID, Refund: true,
				OrigQueryID: queryID, Fen: t.RefundAmt, At: t.PaidAt})
		}
		for _, r := range records {
			line, err := r.Line()
			if err != nil {
				return nil, err
			}
			b.Write(line)
		}
	}
	return UnionPayZMZip(merID, day, b.Bytes())
}
