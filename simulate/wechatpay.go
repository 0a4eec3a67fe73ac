package simulate

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/paygw/paygw/bills"
)

// WeChatPaySignatureType is the only Wechatpay-Signature-Type WeChat Pay API v3 sends.
const WeChatPaySignatureType = "WECHATPAY2-SHA256-RSA2048"

// WeChatPaySigner signs WeChat Pay API v3 notifications as the WeChat platform does: the resource
// encrypted with AEAD_AES_256_GCM under the merchant's APIv3 key, the request signed with the
// platform private key whose public half the gateway knows as Serial (a certificate serial or a
// PUB_KEY_ID_...).
type WeChatPaySigner struct {
	MchID    string
	AppID    string
	APIv3Key string // exactly 32 bytes
	Serial   string
	Key      *rsa.PrivateKey
}

func (s WeChatPaySigner) Channel() string { return "wechatpay" }

type wechatEnvelope struct {
	ID           string         `json:"id"`
	CreateTime   string         `json:"create_time"`
	ResourceType string         `json:"resource_type"`
	EventType    string         `json:"event_type"`
	Summary      string         `json:"summary"`
	Resource     wechatResource `json:"resource"`
}

type wechatResource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

type wechatTransaction struct {
	AppID          string `json:"appid"`
	MchID          string `json:"mchid"`
	OutTradeNo     string `json:"out_trade_no"`
	TransactionID  string `json:"transaction_id"`
	TradeType      string `json:"trade_type"`
	TradeState     string `json:"trade_state"`
	TradeStateDesc string `json:"trade_state_desc"`
	BankType       string `json:"bank_type,omitempty"`
	Attach         string `json:"attach"`
	SuccessTime    string `json:"success_time,omitempty"`
	Payer          struct {
		OpenID string `json:"openid"`
	} `json:"payer"`
	Amount struct {
		Total         int64  `json:"total"`
		PayerTotal    int64  `json:"payer_total"`
		Currency      string `json:"currency"`
		PayerCurrency string `json:"payer_currency"`
	} `json:"amount"`
}

type wechatRefund struct {
	MchID               string `json:"mchid"`
	OutTradeNo          string `json:"out_trade_no"`
	TransactionID       string `json:"transaction_id"`
	OutRefundNo         string `json:"out_refund_no"`
	RefundID            string `json:"refund_id"`
	RefundStatus        string `json:"refund_status"`
	SuccessTime         string `json:"success_time"`
	UserReceivedAccount string `json:"user_received_account"`
	Amount              struct {
		Total       int64 `json:"total"`
		Refund      int64 `json:"refund"`
		PayerTotal  int64 `json:"payer_total"`
		PayerRefund int64 `json:"payer_refund"`
	} `json:"amount"`
}

// Sign renders p as WeChat notifies it, signed at p.Time: paid as TRANSACTION.SUCCESS with
// trade_state SUCCESS, refund as REFUND.SUCCESS (refund_id = RefundID, amount.refund =
// RefundFen). WeChat notifies nothing else (no closes, no unpaid trades), so closed and pending
// are errors rather than notifications WeChat never sends.
func (s WeChatPaySigner) Sign(p Payment) (Message, error) {
	p = p.normalized("wechatpay")
	stamp := p.Time.In(bills.ChinaTime).Format(time.RFC3339)

	var plain any
	var eventType, summary, originalType string
	switch p.Status {
	case StatusPaid:
		t := wechatTransaction{
			AppID: s.AppID, MchID: s.MchID, OutTradeNo: p.TradeNo, TransactionID: p.TxnID,
			TradeType: "NATIVE", TradeState: "SUCCESS", TradeStateDesc: "支付成功", BankType: "OTHERS", SuccessTime: stamp,
		}
		t.Payer.OpenID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"
		t.Amount.Total, t.Amount.PayerTotal, t.Amount.Currency, t.Amount.PayerCurrency = p.AmountFen, p.AmountFen, p.Currency, p.Currency
		plain, eventType, summary, originalType = t, "TRANSACTION.SUCCESS", "支付成功", "transaction"
	case StatusRefund:
		r := wechatRefund{
			MchID: s.MchID, OutTradeNo: p.TradeNo, TransactionID: p.TxnID,
			OutRefundNo: "R" + digest("wechatpay", "out_refund_no", p.RefundID)[:30], RefundID: p.RefundID,
			RefundStatus: "SUCCESS", SuccessTime: stamp, UserReceivedAccount: "支付用户零钱",
		}
		r.Amount.Total, r.Amount.Refund = p.AmountFen, p.RefundFen
		r.Amount.PayerTotal, r.Amount.PayerRefund = p.AmountFen, p.RefundFen
		plain, eventType, summary, originalType = r, "REFUND.SUCCESS", "退款成功", "refund"
	case StatusClosed, StatusPending:
		return Message{}, fmt.Errorf("wechatpay: WeChat sends no notification for a %s trade", p.Status)
	default:
		return Message{}, fmt.Errorf("wechatpay: unknown status %q", p.Status)
	}

	plaintext, err := json.Marshal(plain)
	if err != nil {
		return Message{}, err
	}
	resource, err := s.encrypt(plaintext, originalType)
	if err != nil {
		return Message{}, err
	}
	body, err := json.Marshal(wechatEnvelope{
		ID: p.NotifyID, CreateTime: stamp, ResourceType: "encrypt-resource",
		EventType: eventType, Summary: summary, Resource: resource,
	})
	if err != nil {
		return Message{}, err
	}
	header, err := s.SignBody(body, p.Time)
	if err != nil {
		return Message{}, err
	}
	return Message{Body: body, Header: header}, nil
}

// EncryptResource encrypts plaintext as WeChat encrypts a notification resource: AES-256-GCM
// under the APIv3 key, a fresh 12-character nonce, associatedData as the additional data.
// Tests use it to build resources the gateway must refuse after decryption.
func (s WeChatPaySigner) EncryptResource(plaintext []byte, associatedData string) (ciphertext, nonce string, err error) {
	r, err := s.encryptWith(plaintext, associatedData, wechatNonce(12))
	if err != nil {
		return "", "", err
	}
	return r.Ciphertext, r.Nonce, nil
}

func (s WeChatPaySigner) encrypt(plaintext []byte, originalType string) (wechatResource, error) {
	return s.encryptWith(plaintext, originalType, wechatNonce(12))
}

func (s WeChatPaySigner) encryptWith(plaintext []byte, associatedData, nonce string) (wechatResource, error) {
	if len(s.APIv3Key) != 32 {
		return wechatResource{}, fmt.Errorf("wechatpay: APIv3 key is %d bytes, want 32", len(s.APIv3Key))
	}
	block, err := aes.NewCipher([]byte(s.APIv3Key))
	if err != nil {
		return wechatResource{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return wechatResource{}, err
	}
	sealed := aead.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))
	return wechatResource{
		OriginalType:   associatedData,
		Algorithm:      "AEAD_AES_256_GCM",
		Ciphertext:     base64.StdEncoding.EncodeToString(sealed),
		AssociatedData: associatedData,
		Nonce:          nonce,
	}, nil
}

// SignBody returns the headers WeChat sends with body at ts: the signature over
// "timestamp\nnonce\nbody\n" (SHA256withRSA, PKCS #1 v1.5), a fresh 32-character nonce, the
// serial, the signature type and the content type. Tests use it to sign arbitrary bodies and
// timestamps.
func (s WeChatPaySigner) SignBody(body []byte, ts time.Time) (http.Header, error) {
	if s.Key == nil {
		return nil, errors.New("wechatpay: no private key")
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	nonce := wechatNonce(32)
	msg := make([]byte, 0, len(stamp)+len(nonce)+len(body)+3)
	msg = append(msg, stamp...)
	msg = append(msg, '\n')
	msg = append(msg, nonce...)
	msg = append(msg, '\n')
	msg = append(msg, body...)
	msg = append(msg, '\n')
	sum := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA256, sum[:])
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Timestamp", stamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", base64.StdEncoding.EncodeToString(sig))
	h.Set("Wechatpay-Serial", s.Serial)
	h.Set("Wechatpay-Signature-Type", WeChatPaySignatureType)
	return h, nil
}

// wechatNonce returns n random characters of [A-Za-z0-9], as WeChat's nonces are.
func wechatNonce(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic(err) // crypto/rand.Read never fails on supported platforms
		}
		for _, b := range buf {
			// 248 = 4*62: reject the top values so every character is equally likely.
			if b < 248 && len(out) < n {
				out = append(out, alphabet[b%62])
			}
		}
	}
	return string(out)
}
