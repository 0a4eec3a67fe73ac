package simulate

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
)

// wechatPayRoutes serves WeChat Pay API v3's order query by out_trade_no and its platform
// certificate download.
func (f *Fake) wechatPayRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{out_trade_no}", f.wechatHandler(f.wechatQuery))
	certificates := f.wechatHandler(f.wechatCertificates)
	mux.HandleFunc("GET /v3/certificates", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.asked[wechatCertificatesAsked]++
		f.mu.Unlock()
		certificates(w, r)
	})
}

// wechatHandler makes h a handler holding the sandbox's WeChat Pay keys: merchantKey to check a
// request's Authorization, signer to sign the answer. It answers 500 where the sandbox lacks them.
func (f *Fake) wechatHandler(h func(w http.ResponseWriter, r *http.Request, merchantKey *rsa.PublicKey, signer WeChatPaySigner)) http.HandlerFunc {
	merchantKey, signer, err := f.wechatKeys()
	return func(w http.ResponseWriter, r *http.Request) {
		if sandboxKeysFailed(w, err) {
			return
		}
		h(w, r, merchantKey, signer)
	}
}

// wechatCertificatesAsked counts the certificate downloads among the questions (Asked); no
// trade_no contains a slash, so it names no trade.
const wechatCertificatesAsked = "wechatpay/v3/certificates"

// WeChatCertificateDownloads is how many requests GET /v3/certificates received.
func (f *Fake) WeChatCertificateDownloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[wechatCertificatesAsked]
}

// wechatCertificate is one entry of the certificate download: the certificate PEM encrypted with
// AEAD_AES_256_GCM under the merchant's APIv3 key, associated data "certificate".
type wechatCertificate struct {
	SerialNo           string `json:"serial_no"`
	EffectiveTime      string `json:"effective_time"`
	ExpireTime         string `json:"expire_time"`
	EncryptCertificate struct {
		Algorithm      string `json:"algorithm"`
		Nonce          string `json:"nonce"`
		AssociatedData string `json:"associated_data"`
		Ciphertext     string `json:"ciphertext"`
	} `json:"encrypt_certificate"`
}

// wechatCertificates answers GET /v3/certificates as WeChat does: after the merchant's
// Authorization, every platform certificate of the sandbox's platform_cert_file (read at each
// request, so that a certificate appended to the file is served from then on, as WeChat serves a
// new certificate ahead of a rotation), encrypted with the APIv3 key, the answer signed as every
// other answer.
func (f *Fake) wechatCertificates(w http.ResponseWriter, r *http.Request, merchantKey *rsa.PublicKey, signer WeChatPaySigner) {
	if reason := f.wechatAuthorized(r, merchantKey); reason != "" {
		f.wechatFail(w, r, signer, http.StatusUnauthorized, "SIGN_ERROR", reason)
		return
	}
	certs, err := f.wechatPlatformCertificates()
	if sandboxKeysFailed(w, err) {
		return
	}
	list := struct {
		Data []wechatCertificate `json:"data"`
	}{Data: []wechatCertificate{}}
	for _, c := range certs {
		sealed, err := signer.encryptWith(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), "certificate", wechatNonce(12))
		if sandboxKeysFailed(w, err) {
			return
		}
		e := wechatCertificate{SerialNo: wechatCertSerial(c),
			EffectiveTime: c.NotBefore.In(bills.ChinaTime).Format(time.RFC3339), ExpireTime: c.NotAfter.In(bills.ChinaTime).Format(time.RFC3339)}
		e.EncryptCertificate.Algorithm, e.EncryptCertificate.Nonce = sealed.Algorithm, sealed.Nonce
		e.EncryptCertificate.AssociatedData, e.EncryptCertificate.Ciphertext = sealed.AssociatedData, sealed.Ciphertext
		list.Data = append(list.Data, e)
	}
	body, _ := json.Marshal(list) // plain fields: cannot fail
	f.wechatWrite(w, r, http.StatusOK, body, signer)
}

// wechatPlatformCertificates reads the certificates of the sandbox's platform_cert_file; none
// when the sandbox has no such file.
func (f *Fake) wechatPlatformCertificates() ([]*x509.Certificate, error) {
	if f.manifest.WeChatPay.PlatformCertFile == "" {
		return nil, nil
	}
	rest, err := os.ReadFile(filepath.Join(f.dir, f.manifest.WeChatPay.PlatformCertFile)) // #nosec G304 -- a file of the sandbox directory, named by its manifest
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return certs, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.manifest.WeChatPay.PlatformCertFile, err)
		}
		certs = append(certs, c)
	}
}

// wechatCertSerial is a certificate's serial as WeChat writes it: upper-case hex of its bytes.
func wechatCertSerial(c *x509.Certificate) string { return fmt.Sprintf("%X", c.SerialNumber.Bytes()) }

// wechatAnswerSigner is the platform key an answer to r is signed with. The request's
// Wechatpay-Serial names the platform key the merchant can verify with: a platform certificate
// serial gets the answer signed with the platform certificate the fake holds the private key of
// (a merchant in certificate mode); anything else, the platform public key (PUB_KEY_ID_...).
func (f *Fake) wechatAnswerSigner(r *http.Request, signer WeChatPaySigner) WeChatPaySigner {
	asked := r.Header.Get("Wechatpay-Serial")
	if asked == "" || strings.HasPrefix(asked, "PUB_KEY_ID_") || signer.Key == nil {
		return signer
	}
	certs, err := f.wechatPlatformCertificates()
	if err != nil {
		return signer
	}
	for _, c := range certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&signer.Key.PublicKey) {
			signer.Serial = wechatCertSerial(c)
			return signer
		}
	}
	return signer
}

// wechatQueryOrder is the order as WeChat's query answers it; an unpaid order has no
// transaction_id, success_time or payer.
type wechatQueryOrder struct {
	AppID          string `json:"appid"`
	MchID          string `json:"mchid"`
	OutTradeNo     string `json:"out_trade_no"`
	TransactionID  string `json:"transaction_id,omitempty"`
	TradeType      string `json:"trade_type,omitempty"`
	TradeState     string `json:"trade_state"`
	TradeStateDesc string `json:"trade_state_desc"`
	BankType       string `json:"bank_type,omitempty"`
	Attach         string `json:"attach"`
	SuccessTime    string `json:"success_time,omitempty"`
	Payer          *struct {
		OpenID string `json:"openid"`
	} `json:"payer,omitempty"`
	Amount struct {
		Total         int64  `json:"total"`
		PayerTotal    int64  `json:"payer_total,omitempty"`
		Currency      string `json:"currency"`
		PayerCurrency string `json:"payer_currency"`
	} `json:"amount"`
}

// wechatQuery checks the request's Authorization as WeChat does (merchant, serial, clock, the
// signature with the merchant's API key over method, URI, timestamp, nonce and the empty body)
// and answers from the trade store, signed with the platform key as every WeChat response is,
// errors included.
func (f *Fake) wechatQuery(w http.ResponseWriter, r *http.Request, merchantKey *rsa.PublicKey, signer WeChatPaySigner) {
	fail := func(status int, code, message string) { f.wechatFail(w, r, signer, status, code, message) }
	if reason := f.wechatAuthorized(r, merchantKey); reason != "" {
		fail(http.StatusUnauthorized, "SIGN_ERROR", reason)
		return
	}
	if r.URL.Query().Get("mchid") != f.manifest.WeChatPay.MchID {
		fail(http.StatusBadRequest, "PARAM_ERROR", "mchid 与请求方商户号不一致")
		return
	}
	outTradeNo := r.PathValue("out_trade_no")
	t, ok := f.Trade("wechatpay", outTradeNo)
	if !ok {
		fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
		return
	}
	body, _ := json.Marshal(f.wechatOrder(t)) // plain fields: cannot fail
	f.wechatWrite(w, r, http.StatusOK, body, signer)
}

// wechatOrder is what the query says about a trade of the store.
func (f *Fake) wechatOrder(t FakeTrade) wechatQueryOrder {
	o := wechatQueryOrder{AppID: f.manifest.WeChatPay.AppID, MchID: f.manifest.WeChatPay.MchID, OutTradeNo: t.TradeNo}
	o.Amount.Total, o.Amount.Currency, o.Amount.PayerCurrency = t.AmountFen, t.Currency, t.Currency
	paid := func(state, desc string) {
		o.TradeState, o.TradeStateDesc = state, desc
		o.TransactionID, o.TradeType, o.BankType = t.TxnID, "NATIVE", "OTHERS"
		o.SuccessTime = t.PaidAt.In(bills.ChinaTime).Format(time.RFC3339)
		o.Payer = &struct {
			OpenID string `json:"openid"`
		}{OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		o.Amount.PayerTotal = t.AmountFen
	}
	switch t.Status {
	case FakePaid:
		paid("SUCCESS", "支付成功")
	case FakeRefunded:
		paid("REFUND", "转入退款")
	case FakeClosed:
		o.TradeState, o.TradeStateDesc = "CLOSED", "订单已关闭"
	default: // FakePending
		o.TradeState, o.TradeStateDesc = "NOTPAY", "订单未支付"
	}
	return o
}

// wechatAuthorized returns why the request's Authorization is refused, or "".
func (f *Fake) wechatAuthorized(r *http.Request, key *rsa.PublicKey) string {
	const scheme = "WECHATPAY2-SHA256-RSA2048 "
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, scheme) {
		return "Authorization 缺失或类型错误"
	}
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, scheme), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		uq, err := strconv.Unquote(v)
		if !ok || err != nil {
			return "Authorization 格式错误"
		}
		fields[k] = uq
	}
	ts, err := strconv.ParseInt(fields["timestamp"], 10, 64)
	switch {
	case fields["mchid"] != f.manifest.WeChatPay.MchID:
		return "商户号错误"
	case subtle.ConstantTimeCompare([]byte(fields["serial_no"]), []byte(f.manifest.WeChatPay.MerchantSerialNo)) != 1:
		return "商户证书序列号错误"
	case err != nil || time.Since(time.Unix(ts, 0)).Abs() >= 5*time.Minute:
		return "时间戳错误"
	case fields["nonce_str"] == "":
		return "随机串缺失"
	}
	sig, err := base64.StdEncoding.DecodeString(fields["signature"])
	if err != nil {
		return "签名错误"
	}
	// r.RequestURI is the request target as sent: the path and query the merchant signed.
	msg := r.Method + "\n" + r.RequestURI + "\n" + fields["timestamp"] + "\n" + fields["nonce_str"] + "\n\n"
	sum := sha256.Sum256([]byte(msg))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		return "签名错误"
	}
	return ""
}

// wechatFail sends WeChat Pay's error answer, {"code", "message"}, signed as every answer is.
func (f *Fake) wechatFail(w http.ResponseWriter, r *http.Request, signer WeChatPaySigner, status int, code, message string) {
	body, _ := json.Marshal(map[string]string{"code": code, "message": message}) // strings: cannot fail
	f.wechatWrite(w, r, status, body, signer)
}

// wechatWrite sends body, the answer to r, with the Wechatpay-* headers of a platform-signed
// response.
func (f *Fake) wechatWrite(w http.ResponseWriter, r *http.Request, status int, body []byte, signer WeChatPaySigner) {
	h, err := f.wechatAnswerSigner(r, signer).SignBody(body, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if f.broken("wechatpay") {
		sig, _ := base64.StdEncoding.DecodeString(h.Get("Wechatpay-Signature")) // ours: valid base64
		sig[len(sig)/2] ^= 0x01
		h.Set("Wechatpay-Signature", base64.StdEncoding.EncodeToString(sig))
	}
	for k, vs := range h {
		w.Header()[k] = vs
	}
	w.Header().Set("Request-ID", wechatNonce(32))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
