package simulate

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// wechatPayRoutes serves WeChat Pay API v3's order query by out_trade_no.
func (f *Fake) wechatPayRoutes(mux *http.ServeMux) {
	merchantKey, err := loadFakePublicKey(f.dir, f.manifest.WeChatPay.MerchantPublicKeyFile)
	signer, _ := f.signers["wechatpay"].(WeChatPaySigner)
	if err == nil && signer.Key == nil {
		err = errors.New("no WeChat Pay platform private key")
	}
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{out_trade_no}", func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			http.Error(w, "sandbox keys: "+err.Error(), http.StatusInternalServerError)
			return
		}
		f.wechatQuery(w, r, merchantKey, signer)
	})
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
	fail := func(status int, code, message string) {
		body, _ := json.Marshal(map[string]string{"code": code, "message": message}) // strings: cannot fail
		f.wechatWrite(w, status, body, signer)
	}
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
	f.wechatWrite(w, http.StatusOK, body, signer)
}

// wechatOrder is what the query says about a trade of the store.
func (f *Fake) wechatOrder(t FakeTrade) wechatQueryOrder {
	o := wechatQueryOrder{AppID: f.manifest.WeChatPay.AppID, MchID: f.manifest.WeChatPay.MchID, OutTradeNo: t.TradeNo}
	o.Amount.Total, o.Amount.Currency, o.Amount.PayerCurrency = t.AmountFen, t.Currency, t.Currency
	paid := func(state, desc string) {
		o.TradeState, o.TradeStateDesc = state, desc
		o.TransactionID, o.TradeType, o.BankType = t.TxnID, "NATIVE", "OTHERS"
		o.SuccessTime = t.PaidAt.In(time.FixedZone("CST", 8*3600)).Format(time.RFC3339)
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

// wechatWrite sends body with the Wechatpay-* headers of a platform-signed response.
func (f *Fake) wechatWrite(w http.ResponseWriter, status int, body []byte, signer WeChatPaySigner) {
	h, err := signer.SignBody(body, time.Now())
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
