// Package simulate plays the payment channels' side: it signs notifications in each channel's
// real format with sandbox keys. Its signing code is written apart from channels/ on purpose, so
// that a bug shared by signer and verifier cannot hide.
package simulate

import (
	"cmp"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- Alipay's legacy sign_type RSA is SHA1withRSA; simulated on request
	"crypto/sha256"
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

// AlipayPayment describes one Alipay trade_status_sync notification.
type AlipayPayment struct {
	AppID       string
	SellerID    string
	TradeNo     string // ours: out_trade_no
	AlipayTxn   string // Alipay's trade_no
	NotifyID    string
	AmountFen   int64
	TradeStatus string // TRADE_SUCCESS, TRADE_FINISHED, TRADE_CLOSED, WAIT_BUYER_PAY
	// RefundFen is refund_fee, the trade's refunded total so far: > 0 makes it a refund notice
	// (with TRADE_SUCCESS a partial refund, with TRADE_CLOSED the full one), sent with gmt_refund
	// and out_biz_no = RefundID ("" = derived from TradeNo and RefundFen).
	RefundFen int64
	RefundID  string
	Subject   string // "" = "paygw order"
	Charset   string // utf-8 (default), gbk or gb2312: what the values are signed and sent in
	Time      time.Time
	SignType  string // RSA2 (default) or RSA
	Extra     map[string]string
}

// Form returns the notification's parameters, unsigned, in UTF-8 whatever the Charset.
func (p AlipayPayment) Form() url.Values {
	at := p.Time
	if at.IsZero() {
		at = time.Now()
	}
	stamp := at.In(bills.ChinaTime).Format("2006-01-02 15:04:05")
	v := url.Values{}
	v.Set("notify_time", stamp)
	v.Set("notify_type", "trade_status_sync")
	v.Set("notify_id", p.NotifyID)
	v.Set("app_id", p.AppID)
	v.Set("charset", cmp.Or(p.Charset, "utf-8"))
	v.Set("version", "1.0")
	v.Set("trade_no", p.AlipayTxn)
	v.Set("out_trade_no", p.TradeNo)
	v.Set("total_amount", Yuan(p.AmountFen))
	v.Set("trade_status", p.TradeStatus)
	v.Set("gmt_create", stamp)
	v.Set("buyer_id", "2088102177846875")
	v.Set("subject", cmp.Or(p.Subject, "paygw order"))
	if p.SellerID != "" {
		v.Set("seller_id", p.SellerID)
	}
	if p.TradeStatus == "TRADE_SUCCESS" || p.TradeStatus == "TRADE_FINISHED" || p.RefundFen > 0 {
		v.Set("receipt_amount", Yuan(p.AmountFen))
		v.Set("buyer_pay_amount", Yuan(p.AmountFen))
		v.Set("gmt_payment", stamp)
	}
	if p.TradeStatus == "TRADE_CLOSED" {
		v.Set("gmt_close", stamp)
	}
	if p.RefundFen > 0 {
		v.Set("refund_fee", Yuan(p.RefundFen))
		v.Set("gmt_refund", at.In(bills.ChinaTime).Format("2006-01-02 15:04:05.000"))
		v.Set("out_biz_no", cmp.Or(p.RefundID, p.TradeNo+"-R"+strconv.FormatInt(p.RefundFen, 10)))
	}
	for k, x := range p.Extra {
		v.Set(k, x)
	}
	return v
}

// SignAlipay adds sign_type and sign to form: SHA256withRSA for RSA2, SHA1withRSA for RSA, over
// the sorted k=v pairs of every non-empty parameter but sign and sign_type.
func SignAlipay(form url.Values, signType string, key *rsa.PrivateKey) error {
	if signType == "" {
		signType = "RSA2"
	}
	signed := sortedForm(form, func(k, v string) bool { return k != "sign" && k != "sign_type" && v != "" })
	var digest []byte
	var h crypto.Hash
	switch signType {
	case "RSA2":
		sum := sha256.Sum256([]byte(signed))
		digest, h = sum[:], crypto.SHA256
	case "RSA":
		sum := sha1.Sum([]byte(signed)) // #nosec G401 -- see import
		digest, h = sum[:], crypto.SHA1
	default:
		return fmt.Errorf("unknown sign_type %q", signType)
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, h, digest)
	if err != nil {
		return err
	}
	form.Set("sign_type", signType)
	form.Set("sign", base64.StdEncoding.EncodeToString(sig))
	return nil
}

// AlipayBody is the signed, url-encoded notification body. With a GBK or GB2312 Charset the
// values are encoded in it first, then signed and percent-encoded as those bytes, as Alipay does.
func AlipayBody(p AlipayPayment, key *rsa.PrivateKey) ([]byte, error) {
	form := p.Form()
	switch cs := strings.ToLower(cmp.Or(p.Charset, "utf-8")); cs {
	case "utf-8":
	case "gbk", "gb2312":
		enc := simplifiedchinese.GBK.NewEncoder()
		for k, vs := range form {
			for i, v := range vs {
				b, err := enc.String(v)
				if err != nil {
					return nil, fmt.Errorf("alipay: %s cannot be written in %s: %w", k, cs, err)
				}
				vs[i] = b
			}
		}
	default:
		return nil, fmt.Errorf("alipay: unknown charset %q", p.Charset)
	}
	if err := SignAlipay(form, p.SignType, key); err != nil {
		return nil, err
	}
	return []byte(form.Encode()), nil
}

// Yuan formats minor units as Alipay's decimal yuan string.
func Yuan(fen int64) string {
	return fmt.Sprintf("%d.%02d", fen/100, fen%100)
}

// AlipaySigner signs Alipay notifications with the sandbox "Alipay" private key.
type AlipaySigner struct {
	AppID    string
	SellerID string
	Key      *rsa.PrivateKey
	SignType string // RSA2 (default) or RSA
	Charset  string // utf-8 (default), gbk or gb2312
}

func (s AlipaySigner) Channel() string { return "alipay" }

// Sign renders p as a trade_status_sync notification: paid TRADE_SUCCESS, pending
// WAIT_BUYER_PAY, closed TRADE_CLOSED unpaid; a refund TRADE_SUCCESS with refund_fee =
// RefundTotalFen, or TRADE_CLOSED with it when that is the whole amount (a full refund closes
// the trade), out_biz_no = RefundID.
func (s AlipaySigner) Sign(p Payment) (Message, error) {
	p = p.normalized("alipay")
	status := map[string]string{
		StatusPaid: "TRADE_SUCCESS", StatusClosed: "TRADE_CLOSED",
		StatusRefund: "TRADE_SUCCESS", StatusPending: "WAIT_BUYER_PAY",
	}[p.Status]
	if status == "" {
		return Message{}, fmt.Errorf("alipay: unknown status %q", p.Status)
	}
	ap := AlipayPayment{
		AppID: s.AppID, SellerID: s.SellerID, TradeNo: p.TradeNo, AlipayTxn: p.TxnID, NotifyID: p.NotifyID,
		AmountFen: p.AmountFen, TradeStatus: status, Time: p.Time, SignType: s.SignType, Charset: s.Charset,
	}
	if p.Status == StatusRefund {
		ap.RefundFen, ap.RefundID = p.RefundTotalFen, p.RefundID
		if p.RefundTotalFen >= p.AmountFen {
			ap.TradeStatus = "TRADE_CLOSED"
		}
	}
	body, err := AlipayBody(ap, s.Key)
	if err != nil {
		return Message{}, err
	}
	contentType := "application/x-www-form-urlencoded;charset=" + cmp.Or(s.Charset, "utf-8")
	return Message{Body: body, Header: http.Header{"Content-Type": {contentType}}}, nil
}
