package simulate

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/signers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/notify"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

const (
	wxMchID    = "1900000001"
	wxAppID    = "wx0000000000000000"
	wxAPIv3Key = "0123456789abcdefghijABCDEFGHIJ01"
	wxKeyID    = "PUB_KEY_ID_0119000000012025010100000000"
)

func testWeChatSigner(tb testing.TB) WeChatPaySigner {
	tb.Helper()
	return WeChatPaySigner{MchID: wxMchID, AppID: wxAppID, APIv3Key: wxAPIv3Key, Serial: wxKeyID, Key: testenv.RSAKey(tb, "wechatpay")}
}

func wxRequest(tb testing.TB, m Message) *http.Request {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://gateway/notify/wechatpay", bytes.NewReader(m.Body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = m.Header.Clone()
	return req
}

// TestWeChatPaySignerAgainstSDK: what the simulator sends, the SDK's own notify handler accepts,
// decrypts and reads back as the payment; and the signature is byte for byte the one the SDK's
// signer makes (PKCS #1 v1.5 is deterministic).
func TestWeChatPaySignerAgainstSDK(t *testing.T) {
	s := testWeChatSigner(t)
	handler, err := notify.NewRSANotifyHandler(wxAPIv3Key, verifiers.NewSHA256WithRSAPubkeyVerifier(wxKeyID, s.Key.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		p                     Payment
		wantEvent, wantAD     string
		wantState, wantRefund string
	}{
		"paid":   {Payment{TradeNo: "T1", AmountFen: 8888}, "TRANSACTION.SUCCESS", "transaction", "SUCCESS", ""},
		"refund": {Payment{TradeNo: "T1", AmountFen: 8888, RefundFen: 100, Status: StatusRefund, RefundID: "50300000012025010100000001"}, "REFUND.SUCCESS", "refund", "", "SUCCESS"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := s.Sign(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var content map[string]any
			n, err := handler.ParseNotifyRequest(context.Background(), wxRequest(t, m), &content)
			if err != nil {
				t.Fatalf("SDK refused the simulator's notification: %v", err)
			}
			if n.EventType != tt.wantEvent || n.ResourceType != "encrypt-resource" || n.Resource.AssociatedData != tt.wantAD ||
				n.Resource.OriginalType != tt.wantAD || n.CreateTime == nil || n.ID == "" {
				t.Errorf("envelope %+v, resource %+v", n, n.Resource)
			}
			if content["out_trade_no"] != "T1" || content["mchid"] != wxMchID {
				t.Errorf("content %v", content)
			}
			if tt.wantState != "" && (content["trade_state"] != tt.wantState || content["appid"] != wxAppID) {
				t.Errorf("trade_state/appid in %v, want %s", content, tt.wantState)
			}
			if tt.wantRefund != "" {
				amount, _ := content["amount"].(map[string]any)
				if content["refund_status"] != tt.wantRefund || content["refund_id"] != tt.p.RefundID || content["out_refund_no"] == "" ||
					amount["refund"] != float64(tt.p.RefundFen) || amount["total"] != float64(tt.p.AmountFen) {
					t.Errorf("refund resource %v, want %s, refund_id %s, amount.refund %d of %d", content, tt.wantRefund, tt.p.RefundID, tt.p.RefundFen, tt.p.AmountFen)
				}
			}
			if !regexp.MustCompile(`^[A-Za-z0-9]{12}$`).MatchString(n.Resource.Nonce) {
				t.Errorf("resource nonce %q", n.Resource.Nonce)
			}

			h := m.Header
			msg := h.Get("Wechatpay-Timestamp") + "\n" + h.Get("Wechatpay-Nonce") + "\n" + string(m.Body) + "\n"
			sdkSig, err := utils.SignSHA256WithRSA(msg, s.Key)
			if err != nil {
				t.Fatal(err)
			}
			if sdkSig != h.Get("Wechatpay-Signature") {
				t.Error("the simulator's signature differs from the SDK signer's over the same message")
			}
			if !regexp.MustCompile(`^[A-Za-z0-9]{32}$`).MatchString(h.Get("Wechatpay-Nonce")) {
				t.Errorf("Wechatpay-Nonce %q", h.Get("Wechatpay-Nonce"))
			}
			if h.Get("Wechatpay-Serial") != wxKeyID || h.Get("Wechatpay-Signature-Type") != "WECHATPAY2-SHA256-RSA2048" ||
				h.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", h)
			}
		})
	}
}

// TestWeChatPaySignBody: arbitrary bodies and timestamps, checked by the SDK's validator.
func TestWeChatPaySignBody(t *testing.T) {
	s := testWeChatSigner(t)
	v := validators.NewWechatPayNotifyValidator(verifiers.NewSHA256WithRSAPubkeyVerifier(wxKeyID, s.Key.PublicKey))
	ts := time.Now().Add(-time.Minute)
	for name, body := range map[string][]byte{"json": []byte(`{"a":1}`), "empty": nil, "binary": {0, 0xff, '\n'}} {
		t.Run(name, func(t *testing.T) {
			h, err := s.SignBody(body, ts)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Get("Wechatpay-Timestamp"); got != strconv.FormatInt(ts.Unix(), 10) {
				t.Errorf("Wechatpay-Timestamp = %s", got)
			}
			if err := v.Validate(context.Background(), wxRequest(t, Message{Body: body, Header: h})); err != nil {
				t.Errorf("SDK validator: %v", err)
			}
			if err := v.Validate(context.Background(), wxRequest(t, Message{Body: append(body, 'x'), Header: h})); err == nil {
				t.Error("SDK validator accepted a changed body")
			}
		})
	}
}

// TestWeChatPaySDKSignerAgainstGateway is the other direction: a notification signed by the
// SDK's own signer, not the simulator, verifies in the gateway's channel.
func TestWeChatPaySDKSignerAgainstGateway(t *testing.T) {
	s := testWeChatSigner(t)
	w, err := wechatpay.New(wechatpay.Config{MchID: wxMchID, AppID: wxAppID, APIv3Key: wxAPIv3Key,
		PublicKeyID: wxKeyID, PublicKey: &s.Key.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m, err := s.Sign(Payment{TradeNo: "T42", AmountFen: 4200, Time: now})
	if err != nil {
		t.Fatal(err)
	}

	// Re-sign the simulator's body with the SDK's signer and a nonce of our own.
	stamp, nonce := strconv.FormatInt(now.Unix(), 10), "5K8264ILTKCH16CQ2502SI8ZNMTM67VS"
	res, err := (&signers.SHA256WithRSASigner{MchID: wxMchID, CertificateSerialNo: wxKeyID, PrivateKey: s.Key}).
		Sign(context.Background(), stamp+"\n"+nonce+"\n"+string(m.Body)+"\n")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Wechatpay-Timestamp", stamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", res.Signature)
	h.Set("Wechatpay-Serial", wxKeyID)
	h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")

	ev, err := w.Verify(m.Body, h, now)
	if err != nil {
		t.Fatalf("gateway refused the SDK-signed notification: %v", err)
	}
	if ev.Kind != payment.KindPaid || ev.TradeNo != "T42" || ev.AmountFen != 4200 {
		t.Errorf("event %+v", ev)
	}

	// And the simulator's own headers verify too.
	if _, err := w.Verify(m.Body, m.Header, now); err != nil {
		t.Errorf("gateway refused the simulator's notification: %v", err)
	}
}

func TestWeChatPaySignerErrors(t *testing.T) {
	s := testWeChatSigner(t)
	tests := map[string]struct {
		s WeChatPaySigner
		p Payment
	}{
		"unknown status": {s, Payment{TradeNo: "T1", Status: "lost"}},
		// WeChat notifies only successful payments and refunds: the simulator sends nothing else.
		"closed":         {s, Payment{TradeNo: "T1", AmountFen: 1, Status: StatusClosed}},
		"pending":        {s, Payment{TradeNo: "T1", AmountFen: 1, Status: StatusPending}},
		"short key":      {WeChatPaySigner{APIv3Key: "short", Key: s.Key}, Payment{TradeNo: "T1"}},
		"no private key": {WeChatPaySigner{APIv3Key: wxAPIv3Key}, Payment{TradeNo: "T1"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := tt.s.Sign(tt.p); err == nil {
				t.Error("Sign succeeded")
			}
		})
	}
	if s.Channel() != "wechatpay" {
		t.Errorf("Channel = %q", s.Channel())
	}
}

func TestWeChatNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := wechatNonce(32)
		if !regexp.MustCompile(`^[A-Za-z0-9]{32}$`).MatchString(n) || seen[n] {
			t.Fatalf("nonce %q (or a repeat)", n)
		}
		seen[n] = true
	}
}
