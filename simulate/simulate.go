package simulate

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
)

// Payment is what a simulated channel reports, in channel-neutral words; each Signer renders it
// in its channel's real format.
type Payment struct {
	TradeNo   string
	AmountFen int64
	Currency  string    // ISO 4217; "" means CNY
	Status    string    // paid (default), closed, refund, pending
	TxnID     string    // the channel's transaction id; "" derives one from TradeNo
	NotifyID  string    // "" derives one that is the same for every repeat of this payment and status (and refund)
	Time      time.Time // zero means now

	// For refund. RefundFen is this refund's amount (0 = the whole AmountFen), which WeChat
	// (amount.refund) and UnionPay (txnAmt) send. Alipay (refund_fee) and Stripe
	// (amount_refunded) send the payment's refunded total after this refund instead:
	// RefundTotalFen, which is RefundFen unless set (a first refund). RefundID is the channel's id
	// of the refund ("" derives one from the payment and both amounts, so a second refund needs
	// its own RefundTotalFen or RefundID to be told from the first).
	RefundFen      int64
	RefundTotalFen int64
	RefundID       string
}

// Statuses a Payment can report.
const (
	StatusPaid    = "paid"
	StatusClosed  = "closed"
	StatusRefund  = "refund"
	StatusPending = "pending"
)

// Message is a signed notification as the channel would send it.
type Message struct {
	Body   []byte
	Header http.Header // Content-Type and the channel's signature headers
}

// Signer renders and signs payments for one channel.
type Signer interface {
	Channel() string
	Sign(p Payment) (Message, error)
}

// idPrefixes are how each channel's transaction and refund ids begin.
var idPrefixes = map[string]struct{ txn, refund string }{
	"alipay":    {"2026", "R"},
	"wechatpay": {"4200", "50"},
	"stripe":    {"pi_", "re_"},
	"unionpay":  {"", ""},
}

// normalized fills a Payment's defaults for channel; derived ids start with the channel's
// prefixes for transactions and refunds.
func (p Payment) normalized(channel string) Payment {
	txnPrefix, refundPrefix := idPrefixes[channel].txn, idPrefixes[channel].refund
	if p.Currency == "" {
		p.Currency = "CNY"
	}
	if p.Status == "" {
		p.Status = StatusPaid
	}
	if p.Time.IsZero() {
		p.Time = time.Now()
	}
	if p.TxnID == "" {
		p.TxnID = txnPrefix + digest(channel, p.TradeNo)[:24]
	}
	if p.Status != StatusRefund {
		p.RefundFen, p.RefundTotalFen, p.RefundID = 0, 0, ""
	} else {
		if p.RefundFen == 0 {
			p.RefundFen = p.AmountFen
		}
		if p.RefundTotalFen == 0 {
			p.RefundTotalFen = p.RefundFen
		}
		if p.RefundID == "" {
			p.RefundID = refundPrefix + digest(channel, p.TradeNo, p.TxnID, "refund",
				strconv.FormatInt(p.RefundFen, 10), strconv.FormatInt(p.RefundTotalFen, 10))[:24]
		}
	}
	if p.NotifyID == "" {
		parts := []string{channel, p.TradeNo, p.TxnID, p.Status}
		if p.Status == StatusRefund { // every refund is a notification of its own
			parts = append(parts, p.RefundID)
		}
		p.NotifyID = digest(parts...)[:32]
	}
	return p
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
