package simulate

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
)

// alipayRoutes serves Alipay's openapi gateway: POST /gateway.do, method alipay.trade.query.
func (f *Fake) alipayRoutes(mux *http.ServeMux) {
	appKey, signer, err := f.alipayKeys()
	mux.HandleFunc("POST /gateway.do", func(w http.ResponseWriter, r *http.Request) {
		if sandboxKeysFailed(w, err) {
			return
		}
		f.alipayGateway(w, r, appKey, signer.Key)
	})
}

// alipayQueryNode is alipay_trade_query_response as Alipay writes it, in a fixed field order.
type alipayQueryNode struct {
	Code           string `json:"code"`
	Msg            string `json:"msg"`
	SubCode        string `json:"sub_code,omitempty"`
	SubMsg         string `json:"sub_msg,omitempty"`
	BuyerLogonID   string `json:"buyer_logon_id,omitempty"`
	BuyerPayAmount string `json:"buyer_pay_amount,omitempty"`
	BuyerUserID    string `json:"buyer_user_id,omitempty"`
	InvoiceAmount  string `json:"invoice_amount,omitempty"`
	OutTradeNo     string `json:"out_trade_no,omitempty"`
	PointAmount    string `json:"point_amount,omitempty"`
	ReceiptAmount  string `json:"receipt_amount,omitempty"`
	SendPayDate    string `json:"send_pay_date,omitempty"`
	TotalAmount    string `json:"total_amount,omitempty"`
	TradeNo        string `json:"trade_no,omitempty"`
	TradeStatus    string `json:"trade_status,omitempty"`
}

// alipayTimestampWindow is how far a request's timestamp may be from the fake's clock.
const alipayTimestampWindow = 15 * time.Minute

// alipayGateway checks the request as Alipay does (app_id, RSA2 sign with the merchant's app
// key, timestamp) and answers from the trade store, signing the response node with the
// "Alipay" private key. Refusals are answered in the method's node, signed, as Alipay does.
func (f *Fake) alipayGateway(w http.ResponseWriter, r *http.Request, appKey *rsa.PublicKey, key *rsa.PrivateKey) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	params := r.Form
	if params.Get("method") != "alipay.trade.query" {
		// Unknown methods have no node of their own: Alipay's error_response, unsigned.
		f.alipayWrite(w, "error_response", alipayQueryNode{Code: "40002", Msg: "Invalid Arguments",
			SubCode: "isv.invalid-method", SubMsg: "不存在的方法名"}, nil)
		return
	}
	refuse := func(subCode, subMsg string) {
		f.alipayWrite(w, "alipay_trade_query_response", alipayQueryNode{Code: "40002", Msg: "Invalid Arguments",
			SubCode: subCode, SubMsg: subMsg}, key)
	}
	if params.Get("app_id") != f.manifest.Alipay.AppID {
		refuse("isv.invalid-app-id", "无效的AppID参数")
		return
	}
	if params.Get("sign_type") != "RSA2" {
		refuse("isv.invalid-signature-type", "无效的签名类型")
		return
	}
	if !alipayRequestSigned(params, appKey) {
		refuse("isv.invalid-signature", "验签出错")
		return
	}
	if cs := strings.ToLower(params.Get("charset")); cs != "" && cs != "utf-8" {
		refuse("isv.invalid-charset", "字符集错误")
		return
	}
	ts, err := time.ParseInLocation("2006-01-02 15:04:05", params.Get("timestamp"), bills.ChinaTime)
	if err != nil || time.Since(ts).Abs() > alipayTimestampWindow {
		refuse("isv.invalid-timestamp", "非法的时间戳参数")
		return
	}
	var biz struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	if err := json.Unmarshal([]byte(params.Get("biz_content")), &biz); err != nil || biz.OutTradeNo == "" {
		// Alipay also answers by its own trade_no; paygw asks by out_trade_no only, and so
		// does the fake.
		refuse("isv.missing-out-trade-no", "缺少商户订单号")
		return
	}

	t, ok := f.Trade("alipay", biz.OutTradeNo)
	f.alipayWrite(w, "alipay_trade_query_response", alipayTradeNode(biz.OutTradeNo, t, ok), key)
}

// alipayTradeNode is what alipay.trade.query says about a trade of the store. A refund of the
// whole amount closes an Alipay trade (TRADE_CLOSED, still with its send_pay_date); after a
// partial refund it stays TRADE_SUCCESS.
func alipayTradeNode(outTradeNo string, t FakeTrade, ok bool) alipayQueryNode {
	if !ok {
		return alipayQueryNode{Code: "40004", Msg: "Business Failed", SubCode: "ACQ.TRADE_NOT_EXIST", SubMsg: "交易不存在",
			BuyerPayAmount: "0.00", InvoiceAmount: "0.00", OutTradeNo: outTradeNo, PointAmount: "0.00", ReceiptAmount: "0.00"}
	}
	n := alipayQueryNode{Code: "10000", Msg: "Success", OutTradeNo: t.TradeNo, TradeNo: t.TxnID,
		TotalAmount: Yuan(t.AmountFen), BuyerPayAmount: "0.00", InvoiceAmount: "0.00", PointAmount: "0.00", ReceiptAmount: "0.00"}
	paid := func(status string) {
		n.TradeStatus = status
		n.BuyerLogonID, n.BuyerUserID = "159****5620", "2088102177846875"
		n.BuyerPayAmount, n.InvoiceAmount, n.ReceiptAmount = n.TotalAmount, n.TotalAmount, n.TotalAmount
		n.SendPayDate = t.PaidAt.In(bills.ChinaTime).Format("2006-01-02 15:04:05")
	}
	switch t.Status {
	case FakePaid:
		paid("TRADE_SUCCESS")
	case FakeRefunded:
		if t.RefundFen > 0 && t.RefundFen < t.AmountFen {
			paid("TRADE_SUCCESS")
		} else {
			paid("TRADE_CLOSED")
		}
	case FakeClosed:
		n.TradeStatus = "TRADE_CLOSED"
	default: // FakePending
		n.TradeStatus = "WAIT_BUYER_PAY"
	}
	return n
}

// alipayWrite answers {"<name>":<node>,"sign":"..."}: the sign is SHA256withRSA over the node's
// bytes exactly as written; key nil leaves sign out. node is a struct, its fields in Alipay's order.
func (f *Fake) alipayWrite(w http.ResponseWriter, name string, node any, key *rsa.PrivateKey) {
	raw, err := json.Marshal(node)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body := `{"` + name + `":` + string(raw)
	if key != nil {
		sum := sha256.Sum256(raw)
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if f.broken("alipay") {
			sig[len(sig)/2] ^= 0x01
		}
		body += `,"sign":"` + base64.StdEncoding.EncodeToString(sig) + `"`
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_, _ = w.Write([]byte(body + "}"))
}

// alipayRequestSigned checks a request's sign: SHA256withRSA with the merchant's app key over
// every non-empty parameter but sign, sorted by name, as k=v joined by & (unlike notifications,
// sign_type is signed too).
func alipayRequestSigned(params map[string][]string, key *rsa.PublicKey) bool {
	var pairs []string
	for k, vs := range params {
		if k == "sign" || len(vs) == 0 || vs[0] == "" {
			continue
		}
		if len(vs) > 1 {
			return false
		}
		pairs = append(pairs, k+"="+vs[0])
	}
	sort.Strings(pairs)
	sig, err := base64.StdEncoding.DecodeString(firstValue(params["sign"]))
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(strings.Join(pairs, "&")))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) == nil
}

func firstValue(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// loadFakePublicKey reads a PKIX PEM public key of the sandbox directory.
func loadFakePublicKey(dir, name string) (*rsa.PublicKey, error) {
	if name == "" {
		return nil, errors.New("the manifest names no merchant public key (run paygw simulate keys again)")
	}
	b, err := os.ReadFile(filepath.Join(dir, name)) // #nosec G304 -- a file of the sandbox directory, named by its manifest
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", name)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rk, ok := key.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an RSA key", name)
	}
	return rk, nil
}
