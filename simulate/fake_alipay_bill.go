package simulate

import (
	"archive/zip"
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/bills"
)

// alipayBillRoutes serves Alipay's bill download: the method alipay.data.dataservice.bill.
// downloadurl.query on the gateway (checked and signed as the trade query is), answered with a
// bill_download_url on the fake itself, and that URL: the zip Alipay makes, <PID>0156_<yyyyMMdd>
// .csv.zip holding the 业务明细 and 业务明细(汇总) files, GBK, with GBK entry names and no UTF-8
// flag. Every other gateway method goes to gateway, the trade query's mux.
func (f *Fake) alipayBillRoutes(mux *http.ServeMux, gateway http.Handler) {
	appKey, signer, err := f.alipayKeys()
	mux.HandleFunc("POST /gateway.do", func(w http.ResponseWriter, r *http.Request) {
		raw, rerr := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
		if rerr != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		form, _ := url.ParseQuery(string(raw))
		if form.Get("method") != "alipay.data.dataservice.bill.downloadurl.query" {
			r.Body = io.NopCloser(bytes.NewReader(raw))
			gateway.ServeHTTP(w, r)
			return
		}
		if sandboxKeysFailed(w, err) {
			return
		}
		f.alipayBillURL(w, r, form, appKey, signer.Key)
	})
	mux.HandleFunc("GET /alipay-bills/{file}", f.alipayBillZip)
}

// alipayBillNode is alipay_data_dataservice_bill_downloadurl_query_response.
type alipayBillNode struct {
	Code            string `json:"code"`
	Msg             string `json:"msg"`
	SubCode         string `json:"sub_code,omitempty"`
	SubMsg          string `json:"sub_msg,omitempty"`
	BillDownloadURL string `json:"bill_download_url,omitempty"`
}

const alipayBillMethodNode = "alipay_data_dataservice_bill_downloadurl_query_response"

func (f *Fake) alipayBillURL(w http.ResponseWriter, r *http.Request, form url.Values, appKey *rsa.PublicKey, key *rsa.PrivateKey) {
	refuse := func(subCode, subMsg string) {
		f.alipayWrite(w, alipayBillMethodNode, alipayBillNode{Code: "40004", Msg: "Business Failed", SubCode: subCode, SubMsg: subMsg}, key)
	}
	switch {
	case form.Get("app_id") != f.manifest.Alipay.AppID:
		refuse("isv.invalid-app-id", "无效的AppID参数")
		return
	case form.Get("sign_type") != "RSA2" || !alipayRequestSigned(form, appKey):
		refuse("isv.invalid-signature", "验签出错")
		return
	}
	var biz struct {
		BillType string `json:"bill_type"`
		BillDate string `json:"bill_date"`
	}
	_ = json.Unmarshal([]byte(form.Get("biz_content")), &biz)
	day, ok := parseBillDay(biz.BillDate, bills.ChinaTime)
	if biz.BillType != "trade" || !ok || !day.Before(startOfDay(time.Now(), bills.ChinaTime)) { // today's bill is not made yet
		refuse("isp.bill_not_exist", "账单不存在")
		return
	}
	link := "http://" + r.Host + "/alipay-bills/" + f.alipayBillName(day) + ".csv.zip"
	f.alipayWrite(w, alipayBillMethodNode, alipayBillNode{Code: "10000", Msg: "Success", BillDownloadURL: link}, key)
}

func startOfDay(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// alipayBillName is <PID>0156_<yyyyMMdd>.
func (f *Fake) alipayBillName(day time.Time) string {
	return AlipayPID + "0156_" + day.Format("20060102")
}

// AlipayPID is the fake merchant's Alipay partner id.
const AlipayPID = "2088102177846875"

func (f *Fake) alipayBillZip(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("file"), ".csv.zip")
	date, ok2 := strings.CutPrefix(name, AlipayPID+"0156_")
	day, err := time.ParseInLocation("20060102", date, bills.ChinaTime)
	if !ok || !ok2 || err != nil {
		http.NotFound(w, r)
		return
	}
	zipped, err := f.AlipayBillZip(day)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	_, _ = w.Write(zipped)
}

// alipayBillHeader is the 业务明细 header Alipay writes.
const alipayBillHeader = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户," +
	"订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称," +
	"商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注"

// AlipayBillHead is the start of the 业务明细 file of day (Beijing time): the preamble naming
// the account and the day, and the column header.
func AlipayBillHead(day time.Time) string {
	return "#支付宝业务明细查询\n#账号：[" + AlipayPID + "0156]\n" +
		"#起始日期：[" + day.Format("2006年01月02日") + " 00:00:00]   终止日期：[" + day.AddDate(0, 0, 1).Format("2006年01月02日") + " 00:00:00]\n" +
		"#-----------------------------------------业务明细列表----------------------------------------\n" +
		alipayBillHeader + "\n"
}

// AlipayBillRow is one row of a 业务明细 file.
type AlipayBillRow struct {
	TxnID, TradeNo, Goods string
	Refund                bool  // a 退款 row, else a 交易 row
	Fen                   int64 // the amount in fen, positive; a 退款 row shows it negative
	At                    time.Time
	RefundID              string // 退款批次号/请求号
}

// Line is the row as the file writes it, without its newline.
func (r AlipayBillRow) Line() string {
	kind, fen := "交易", r.Fen
	if r.Refund {
		kind, fen = "退款", -r.Fen
	}
	when := r.At.In(bills.ChinaTime).Format(time.DateTime)
	return strings.Join([]string{r.TxnID + "\t", r.TradeNo + "\t", kind + "\t", r.Goods, when, when, "\t", "\t", "\t", "\t",
		"159****5620\t", signedYuan(fen), signedYuan(fen), "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00\t", "0.00",
		r.RefundID + "\t", "0.00", "0.00", ""}, ",")
}

// AlipayBillFoot ends the 业务明细 file: the totals lines stating pays 交易 of payFen and
// refunds 退款 of refundFen, and the export time.
func AlipayBillFoot(pays, refunds int, payFen, refundFen int64, exported time.Time) string {
	return "#-----------------------------------------业务明细列表结束------------------------------------\n" +
		"#交易合计：" + itoa(pays) + "笔，商家实收共" + Yuan(payFen) + "元，商家优惠共0.00元\n" +
		"#退款合计：" + itoa(refunds) + "笔，商家实收退款共" + signedYuan(-refundFen) + "元，商家优惠退款共0.00元\n" +
		"#导出时间：[" + exported.In(bills.ChinaTime).Format("2006年01月02日 15:04:05") + "]\n"
}

// AlipayBillZip is the bill zip of day (Beijing time) for the fake's Alipay trades: a 交易 row
// per payment, a 退款 row per refund (negative amounts, 退款批次号/请求号 the refund's out_biz_no
// as its notification carries it), and the totals lines.
func (f *Fake) AlipayBillZip(day time.Time) ([]byte, error) {
	day = startOfDay(day, bills.ChinaTime)
	var b strings.Builder
	b.WriteString(AlipayBillHead(day))
	var pays, refunds int
	var payFen, refundFen int64
	for _, t := range f.dayTrades("alipay", day) {
		b.WriteString(AlipayBillRow{TxnID: t.TxnID, TradeNo: t.TradeNo, Goods: "fake goods", Fen: t.AmountFen, At: t.PaidAt}.Line() + "\n")
		pays++
		payFen += t.AmountFen
		if t.RefundID != "" {
			b.WriteString(AlipayBillRow{TxnID: t.TxnID, TradeNo: t.TradeNo, Goods: "fake goods", Refund: true, Fen: t.RefundAmt,
				At: t.PaidAt, RefundID: t.RefundID}.Line() + "\n")
			refunds++
			refundFen += t.RefundAmt
		}
	}
	b.WriteString(AlipayBillFoot(pays, refunds, payFen, refundFen, time.Now()))
	summary := "#支付宝业务汇总查询\n#账号：[" + AlipayPID + "0156]\n门店编号,门店名称,交易订单总笔数,退款订单总笔数\n" +
		"合计,," + itoa(pays) + "," + itoa(refunds) + "\n"

	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	base := f.alipayBillName(day)
	for _, e := range []struct{ name, text string }{{base + "_业务明细.csv", b.String()}, {base + "_业务明细(汇总).csv", summary}} {
		name, err := simplifiedchinese.GBK.NewEncoder().String(e.name)
		if err != nil {
			return nil, err
		}
		text, err := simplifiedchinese.GBK.NewEncoder().String(e.text)
		if err != nil {
			return nil, err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, NonUTF8: true, Modified: time.Now()})
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(w, text); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
