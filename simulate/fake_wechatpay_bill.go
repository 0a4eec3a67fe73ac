package simulate

import (
	"bytes"
	"compress/gzip"
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- WeChat Pay states its bills' digest as SHA1
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
)

// wechatPayBillRoutes serves WeChat Pay's trade bill: GET /v3/bill/tradebill (the merchant's
// Authorization checked, the answer signed as every answer is) naming a download_url, and that
// download: the bill text gzip-compressed, without Wechatpay-* headers, as WeChat sends it. A day
// without trades is 400 NO_STATEMENT_EXIST; today's bill is 400 STATEMENT_CREATING.
func (f *Fake) wechatPayBillRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v3/bill/tradebill", f.wechatHandler(f.wechatTradeBill))
	mux.HandleFunc("GET /v3/billdownload/file", f.wechatHandler(f.wechatBillDownload))
}

func (f *Fake) wechatTradeBill(w http.ResponseWriter, r *http.Request, merchantKey *rsa.PublicKey, signer WeChatPaySigner) {
	fail := func(status int, code, message string) { f.wechatFail(w, r, signer, status, code, message) }
	if reason := f.wechatAuthorized(r, merchantKey); reason != "" {
		fail(http.StatusUnauthorized, "SIGN_ERROR", reason)
		return
	}
	q := r.URL.Query()
	day, ok := parseBillDay(q.Get("bill_date"), bills.ChinaTime)
	switch {
	case !ok || q.Get("bill_type") != "ALL" || q.Get("tar_type") != "GZIP":
		fail(http.StatusBadRequest, "PARAM_ERROR", "bill_date, bill_type=ALL and tar_type=GZIP: this fake serves no other")
		return
	case !day.Before(startOfDay(time.Now(), bills.ChinaTime)):
		fail(http.StatusBadRequest, "STATEMENT_CREATING", "账单生成中")
		return
	}
	text, n := f.WeChatBill(day)
	if n == 0 {
		fail(http.StatusBadRequest, "NO_STATEMENT_EXIST", "账单文件不存在")
		return
	}
	sum := sha1.Sum(text) // #nosec G401 -- the channel's stated digest
	body, _ := json.Marshal(map[string]string{
		"hash_type": "SHA1", "hash_value": hex.EncodeToString(sum[:]),
		"download_url": "https://api.mch.weixin.qq.com/v3/billdownload/file?" + url.Values{"token": {"fake-" + day.Format("20060102")}}.Encode(),
	})
	f.wechatWrite(w, r, http.StatusOK, body, signer)
}

func (f *Fake) wechatBillDownload(w http.ResponseWriter, r *http.Request, merchantKey *rsa.PublicKey, _ WeChatPaySigner) {
	if reason := f.wechatAuthorized(r, merchantKey); reason != "" {
		http.Error(w, reason, http.StatusUnauthorized)
		return
	}
	date, ok := strings.CutPrefix(r.URL.Query().Get("token"), "fake-")
	day, err := time.ParseInLocation("20060102", date, bills.ChinaTime)
	if !ok || err != nil {
		http.Error(w, "unknown token", http.StatusBadRequest)
		return
	}
	text, _ := f.WeChatBill(day)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(text) // a bytes.Buffer: cannot fail
	_ = zw.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(z.Bytes())
}

// WeChatBillHeader is the ALL bill's header.
const WeChatBillHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
	"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率," +
	"订单金额,申请退款金额,费率备注"

// WeChatBillRow is one detail row of the ALL bill.
type WeChatBillRow struct {
	AppID, MchID, TxnID, TradeNo, Currency, Goods string
	Refund                                        bool  // a REFUND row (订单金额 0.00), else a SUCCESS row
	Fen                                           int64 // the payment's or the refund's amount in fen
	At                                            time.Time
	RefundID                                      string // 微信退款单号; 商户退款单号 is "R"+RefundID
}

// Line is the row as the bill writes it (each cell behind a backquote), without its CRLF.
func (r WeChatBillRow) Line() string {
	status, order, refund, refundID, outRefund := "SUCCESS", r.Fen, int64(0), "", ""
	if r.Refund {
		status, order, refund, refundID, outRefund = "REFUND", 0, r.Fen, r.RefundID, "R"+r.RefundID
	}
	cells := []string{r.At.In(bills.ChinaTime).Format(time.DateTime), r.AppID, r.MchID, "0", "", r.TxnID, r.TradeNo,
		"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", "NATIVE", status, "OTHERS", r.Currency, Yuan(order), "0.00", refundID, outRefund, Yuan(refund), "0.00",
		"", "", r.Goods, "", "0.00000", "0.60%", Yuan(order), Yuan(refund), ""}
	if r.Refund {
		cells[18], cells[19] = "ORIGINAL", "SUCCESS"
	}
	return "`" + strings.Join(cells, ",`")
}

// WeChatBillSummary is the ALL bill's summary, both lines with their CRLF: rows detail rows,
// orderFen paid and refundFen refunded.
func WeChatBillSummary(rows int, orderFen, refundFen int64) string {
	return "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n" +
		"`" + strings.Join([]string{itoa(rows), Yuan(orderFen), Yuan(refundFen), "0.00", "0.00000", Yuan(orderFen), Yuan(refundFen)}, ",`") + "\r\n"
}

// WeChatBill is the ALL trade bill of day (Beijing time) for the fake's WeChat Pay trades, and its
// number of detail rows: a SUCCESS row per payment, a REFUND row per refund (微信退款单号 the
// refund_id its notification carries; 订单金额 0.00 there), then the summary.
func (f *Fake) WeChatBill(day time.Time) ([]byte, int) {
	day = startOfDay(day, bills.ChinaTime)
	m := f.manifest.WeChatPay
	var b strings.Builder
	b.WriteString(WeChatBillHeader + "\r\n")
	rows := 0
	var orderFen, refundFen int64
	row := func(r WeChatBillRow) {
		r.AppID, r.MchID, r.Goods = m.AppID, m.MchID, "fake goods"
		b.WriteString(r.Line() + "\r\n")
		rows++
		if r.Refund {
			refundFen += r.Fen
		} else {
			orderFen += r.Fen
		}
	}
	for _, t := range f.dayTrades("wechatpay", day) {
		row(WeChatBillRow{TxnID: t.TxnID, TradeNo: t.TradeNo, Currency: t.Currency, Fen: t.AmountFen, At: t.PaidAt})
		if t.RefundID != "" {
			row(WeChatBillRow{TxnID: t.TxnID, TradeNo: t.TradeNo, Currency: t.Currency, Refund: true, Fen: t.RefundAmt, At: t.PaidAt,
				RefundID: t.RefundID})
		}
	}
	if rows == 0 {
		return nil, 0
	}
	b.WriteString(WeChatBillSummary(rows, orderFen, refundFen))
	return []byte(b.String()), rows
}
