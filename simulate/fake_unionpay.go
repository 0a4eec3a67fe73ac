package simulate

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
)

// unionPayRoutes serves UnionPay's transaction status query (ACP 5.1.0 queryTrans.do) for the
// trades in the fake's store. The request must be signed with the sandbox merchant certificate
// (certId its serial); the answer is signed with the sandbox UnionPay signing certificate as the
// notifications are, and written as UnionPay writes synchronous answers (unencoded k=v&k=v).
//
// A trade is found by orderId alone: the fake keeps no order send time, so it does not match
// txnTime as UnionPay does, and answers with the txnTime its notification carries. Answers: paid
// and refunded (a consume query does not tell of refunds) origRespCode 00; pending 05; closed
// 01 (the consume failed); an unknown orderId respCode 34. A request that does not verify is
// answered respCode 11, one with a field missing or wrong respCode 10.
func (f *Fake) unionPayRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /gateway/api/queryTrans.do", f.unionPayQuery)
}

func (f *Fake) unionPayQuery(w http.ResponseWriter, r *http.Request) {
	echo := []string{"version", "encoding", "bizType", "txnType", "txnSubType", "accessType", "merId", "orderId", "txnTime"}
	f.unionPayAnswer(w, r, echo, func(req, answer url.Values) error {
		if code, msg := f.checkUnionPayQuery(req); code != "" {
			answer.Set("respCode", code)
			answer.Set("respMsg", msg)
			return nil
		}
		t, found := f.Trade("unionpay", req.Get("orderId"))
		if !found {
			answer.Set("respCode", "34")
			answer.Set("respMsg", "查无此交易")
			return nil
		}
		return unionPayTradeAnswer(answer, t)
	})
}

// unionPayAnswer serves one ACP synchronous exchange: it reads the request, echoes the fields
// named in echo, lets fill complete the answer (an error from it is a 500), then signs and writes
// the answer. A broken channel alters the signed answer: its txnAmt where it has one, else respMsg.
func (f *Fake) unionPayAnswer(w http.ResponseWriter, r *http.Request, echo []string, fill func(req, answer url.Values) error) {
	signer, req, ok := f.unionPayRequest(w, r)
	if !ok {
		return
	}
	answer := url.Values{}
	for _, k := range echo {
		if v := req.Get(k); v != "" {
			answer.Set(k, v)
		}
	}
	answer.Set("signMethod", "01")
	if err := fill(req, answer); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	answer.Set("signPubKeyCert", string(signer.CertPEM))
	if err := SignUnionPay(answer, signer.Key); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if f.broken("unionpay") {
		if amt, err := strconv.ParseInt(answer.Get("txnAmt"), 10, 64); err == nil {
			answer.Set("txnAmt", strconv.FormatInt(amt+1, 10))
		} else {
			answer.Set("respMsg", answer.Get("respMsg")+" (altered)")
		}
	}
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	_, _ = w.Write(UnionPayResponseBody(answer))
}

// checkUnionPayQuery checks a query as UnionPay would: its fields, merId, certId against the
// merchant certificate, and the signature. It returns a respCode and message to refuse with, or "".
func (f *Fake) checkUnionPayQuery(req url.Values) (code, msg string) {
	for k, want := range map[string]string{"version": "5.1.0", "signMethod": "01", "txnType": "00", "txnSubType": "00", "accessType": "0"} {
		if req.Get(k) != want {
			return "10", "报文格式错误: " + k
		}
	}
	if !strings.EqualFold(req.Get("encoding"), "UTF-8") {
		return "10", "报文格式错误: encoding"
	}
	if req.Get("merId") != f.manifest.UnionPay.MerID {
		return "10", "报文格式错误: merId"
	}
	if req.Get("orderId") == "" || req.Get("bizType") == "" {
		return "10", "交易要素缺失"
	}
	if _, err := time.Parse("20060102150405", req.Get("txnTime")); err != nil {
		return "10", "报文格式错误: txnTime"
	}
	return f.checkUnionPaySignature(req)
}

// checkUnionPaySignature checks a request's certId against the merchant certificate and its
// signature with that certificate's key, returning a respCode and message to refuse with, or "".
func (f *Fake) checkUnionPaySignature(req url.Values) (code, msg string) {
	cert, err := f.unionPayMerchantCert()
	if err != nil {
		return "11", "商户证书不可用: " + err.Error()
	}
	if req.Get("certId") != cert.SerialNumber.String() {
		return "11", "证书ID不匹配"
	}
	if err := verifyUnionPayForm(req, cert); err != nil {
		return "11", "验证签名失败"
	}
	return "", ""
}

// unionPayTradeAnswer fills a found trade's fields, as the notification of it carries them.
func unionPayTradeAnswer(answer url.Values, t FakeTrade) error {
	code := unionPayCurrencyCodes[strings.ToUpper(t.Currency)]
	if code == "" {
		return fmt.Errorf("unionpay: no ACP currency code for %q", t.Currency)
	}
	queryID := t.TxnID
	if !unionPayDigitsOnly(queryID) { // as the signer derives it
		queryID = unionPayQueryID(t.TradeNo, t.TxnID)
	}
	at := t.PaidAt.In(bills.ChinaTime)
	answer.Set("respCode", "00")
	answer.Set("respMsg", "成功[0000000]")
	answer.Set("txnType", "01")
	answer.Set("txnSubType", "01")
	answer.Set("txnTime", at.Format("20060102150405"))
	answer.Set("queryId", queryID)
	answer.Set("txnAmt", strconv.FormatInt(t.AmountFen, 10))
	answer.Set("currencyCode", code)
	answer.Set("traceNo", unionPayQueryID(t.TradeNo, StatusPaid, "trace")[15:])
	answer.Set("traceTime", at.Format("0102150405"))
	answer.Set("accNo", "6216***********0018")
	answer.Set("payCardType", "01")
	answer.Set("payType", "0001")
	switch t.Status {
	case FakePaid, FakeRefunded:
		answer.Set("origRespCode", "00")
		answer.Set("origRespMsg", "成功[0000000]")
		answer.Set("settleAmt", strconv.FormatInt(t.AmountFen, 10))
		answer.Set("settleCurrencyCode", "156")
		answer.Set("settleDate", at.Format("0102"))
	case FakePending:
		answer.Set("origRespCode", "05")
		answer.Set("origRespMsg", "交易已受理，请稍后查询交易结果")
	default: // closed: the consume failed
		answer.Set("origRespCode", "01")
		answer.Set("origRespMsg", "交易失败")
	}
	return nil
}

// unionPayMerchantCert reads the merchant's certificate the manifest names.
func (f *Fake) unionPayMerchantCert() (*x509.Certificate, error) {
	name := f.manifest.UnionPay.MerchantCertFile
	b, err := os.ReadFile(filepath.Join(f.dir, name)) // #nosec G304 -- a file of the sandbox directory, named by its manifest
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", name)
	}
	return x509.ParseCertificate(block.Bytes)
}

// verifyUnionPayForm checks form's signature (SignUnionPay's double hash) with cert's key.
func verifyUnionPayForm(form url.Values, cert *x509.Certificate) error {
	key, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("certificate key is not RSA")
	}
	sig, err := base64.StdEncoding.DecodeString(form.Get("signature"))
	if err != nil {
		return errors.New("signature is not base64")
	}
	digest := unionPayDigest(form)
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig)
}

// UnionPayResponseBody writes form as UnionPay writes a synchronous answer: k=v joined by '&',
// sorted by name, values as they are (not percent-encoded).
func UnionPayResponseBody(form url.Values) []byte {
	return []byte(sortedForm(form, func(string, string) bool { return true }))
}

// unionPayRequest reads an ACP request form, answering the HTTP error itself when it cannot.
func (f *Fake) unionPayRequest(w http.ResponseWriter, r *http.Request) (UnionPaySigner, url.Values, bool) {
	signer, ok := f.signers["unionpay"].(UnionPaySigner)
	if !ok {
		http.Error(w, "no UnionPay signer in the sandbox keys", http.StatusInternalServerError)
		return signer, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return signer, nil, false
	}
	req, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "body is not a form", http.StatusBadRequest)
		return signer, nil, false
	}
	return signer, req, true
}
