package simulate

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
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
	NotifyID  string    // "" derives one that is the same for every repeat of this payment and status
	RefundFen int64     // for refund: the refunded amount ("" = the whole amount)
	Time      time.Time // zero means now
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

// normalized fills a Payment's defaults for channel.
func (p Payment) normalized(channel, txnPrefix string) Payment {
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
	if p.NotifyID == "" {
		p.NotifyID = digest(channel, p.TradeNo, p.TxnID, p.Status)[:32]
	}
	if p.Status == StatusRefund && p.RefundFen == 0 {
		p.RefundFen = p.AmountFen
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
