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
	return alipayPID + "0156_" + day.Format("20060102")
}

// alipayPID is the fake merchant's Alipay partner id.
const alipayPID = "2088102177846875"

func (f *Fake) alipayBillZip(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("file"), ".csv.zip")
	date, ok2 := strings.CutPrefix(name, alipayPID+"0156_")
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

// AlipayBillZip is the bill zip of day (Beijing time) for the fake's Alipay trades: a 交易 row
// per payment, a 退款 row per refund (negative amounts, 退款批次号/请求号 the refund's out_biz_no
// as its notification carries it), and the totals lines.
func (f *Fake) AlipayBillZip(day time.Time) ([]byte, error) {
	day = startOfDay(day, bills.ChinaTime)
	var b strings.Builder
	b.WriteString("#支付宝业务明细查询\n#账号：[" + alipayPID + "0156]\n")
	b.WriteString("#起始日期：[" + day.Format("2006年01月02日") + " 00:00:00]   终止日期：[" + day.AddDate(0, 0, 1).Format("2006年01月02日") + " 00:00:00]\n")
	b.WriteString("#-----------------------------------------业务明细列表----------------------------------------\n")
	b.WriteString(alipayBillHeader + "\n")
	var pays, refunds int
	var payFen, refundFen int64
	row := func(t fakeBillTrade, kind string, fen int64, at time.Time, refundID string) {
		when := at.In(bills.ChinaTime).Format(time.DateTime)
		fields := []string{t.TxnID + "\t", t.TradeNo + "\t", kind + "\t", "fake goods", when, when, "\t", "\t", "\t", "\t",
			"159****5620\t", signedYuan(fen), signedYuan(fen), "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00\t", "0.00",
			refundID + "\t", "0.00", "0.00", ""}
		b.WriteString(strings.Join(fields, ",") + "\n")
	}
	for _, t := range f.dayTrades("alipay", day) {
		row(t, "交易", t.AmountFen, t.PaidAt, "")
		pays++
		payFen += t.AmountFen
		if t.RefundID != "" {
			row(t, "退款", -t.RefundAmt, t.PaidAt, t.RefundID)
			refunds++
			refundFen += t.RefundAmt
		}
	}
	b.WriteString("#-----------------------------------------业务明细列表结束------------------------------------\n")
	b.WriteString("#交易合计：" + itoa(pays) + "笔，商家实收共" + Yuan(payFen) + "元，商家优惠共0.00元\n")
	b.WriteString("#退款合计：" + itoa(refunds) + "笔，商家实收退款共" + signedYuan(-refundFen) + "元，商家优惠退款共0.00元\n")
	b.WriteString("#导出时间：[" + time.Now().In(bills.ChinaTime).Format("2006年01月02日 15:04:05") + "]\n")
	summary := "#支付宝业务汇总查询\n#账号：[" + alipayPID + "0156]\n门店编号,门店名称,交易订单总笔数,退款订单总笔数\n" +
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
