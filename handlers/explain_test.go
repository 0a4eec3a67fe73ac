package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

func (h *harness) explanation(tradeNo string) explain.Explanation {
	h.t.Helper()
	r := h.do("GET", "/v1/payments/"+tradeNo, testToken, nil, "")
	if r.code != http.StatusOK {
		h.t.Fatalf("GET /v1/payments/%s: %d %s", tradeNo, r.code, r.body)
	}
	var v struct {
		Explanation explain.Explanation `json:"explanation"`
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		h.t.Fatal(err)
	}
	return v.Explanation
}

func hasFact(e explain.Explanation, source, text string) bool {
	for _, f := range e.Facts {
		if f.Source == source && strings.Contains(f.Text, text) {
			return true
		}
	}
	return false
}

// "Why is this order not paid?" for the cases an operator meets.
func TestWhyIsThisOrderNotPaid(t *testing.T) {
	h := newHarness(t, options{})

	t.Run("never notified", func(t *testing.T) {
		tn := h.seedOrder(1999)
		if e := h.explanation(tn); !strings.Contains(e.Summary, "no notification has come, and no payment attempt") {
			t.Fatalf("summary %q", e.Summary)
		}
		if r := h.attempt(tn, `{"channel":"alipay"}`); r.code != 201 {
			t.Fatal(r.body)
		}
		e := h.explanation(tn)
		if !strings.Contains(e.Summary, "sent to alipay") || !hasFact(e, "attempt", "buyer sent to alipay") {
			t.Fatalf("with an attempt: %+v", e)
		}
	})
	t.Run("notified with a bad signature", func(t *testing.T) {
		tn := h.seedOrder(1999)
		m, err := sandbox.signers["alipay"].Sign(simulate.Payment{TradeNo: tn, AmountFen: 1999})
		if err != nil {
			t.Fatal(err)
		}
		m.Body = []byte(strings.Replace(string(m.Body), "total_amount=19.99", "total_amount=19.98", 1)) // the signature no longer holds
		for range 3 {
			wantChannelReply(t, "alipay", h.deliver("alipay", m), payment.ReplyRefuse)
		}
		e := h.explanation(tn)
		if !strings.Contains(e.Summary, "3 notification(s) from alipay refused") || !strings.Contains(e.Summary, "sign does not match") ||
			!hasFact(e, "refused", "alipay refused") {
			t.Fatalf("explanation %+v", e)
		}
		if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ?`, tn); n != 0 {
			t.Fatalf("a refused notification reached the database (%d journal rows)", n)
		}
	})
	t.Run("amount mismatch", func(t *testing.T) {
		tn := h.seedOrder(1999)
		wantChannelReply(t, "alipay", h.send("alipay", simulate.Payment{TradeNo: tn, AmountFen: 1000}), payment.ReplySuccess)
		e := h.explanation(tn)
		if !strings.Contains(e.Summary, "does not match the order") || !hasFact(e, "anomaly", "AMOUNT_MISMATCH") || !hasFact(e, "notify", "AMOUNT_MISMATCH") {
			t.Fatalf("explanation %+v", e)
		}
	})
	t.Run("paid", func(t *testing.T) {
		tn := h.paidOrder(t, "wechatpay", 1999)
		e := h.explanation(tn)
		if !strings.HasPrefix(e.Summary, "Paid through wechatpay") || !hasFact(e, "notify", "19.99 CNY: APPLIED") || !hasFact(e, "order", "19.99 CNY") {
			t.Fatalf("explanation %+v", e)
		}
	})
}
