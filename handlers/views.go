package handlers

import (
	"encoding/json"
	"time"

	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
)

// orderView is an order as the API shows it.
type orderView struct {
	TradeNo      string     `json:"trade_no"`
	UserID       int64      `json:"user_id"`
	SKU          string     `json:"sku"`
	Num          int        `json:"num"`
	AmountFen    int64      `json:"amount_fen"`
	Currency     string     `json:"currency"`
	MerchantID   string     `json:"merchant_order_id,omitempty"`
	Status       string     `json:"status"`
	Channel      string     `json:"channel,omitempty"`
	ChannelTxnID string     `json:"channel_txn_id,omitempty"`
	PaidAt       *time.Time `json:"paid_at,omitempty"`
	RefundedFen  int64      `json:"refunded_fen"`
	CreatedAt    time.Time  `json:"created_at"`
}

func viewOf(o payment.Order) orderView {
	return orderView{
		TradeNo: o.TradeNo, UserID: o.UserID, SKU: o.SKU, Num: o.Num, AmountFen: o.AmountFen,
		Currency: o.Currency, MerchantID: o.MerchantOrderID, Status: o.Status, Channel: o.Channel, ChannelTxnID: o.ChannelTxnID,
		PaidAt: o.PaidTime, RefundedFen: o.RefundedFen, CreatedAt: o.CreateTime,
	}
}

// RenderCreate is the create call's renderer (orders.Render): 201 with the order, or the
// problem of a final refusal. Its bytes are stored with the idempotency record and replayed.
func RenderCreate(o *payment.Order, refusal error) (int, []byte) {
	var v any
	code := 201
	if o != nil {
		v = viewOf(*o)
	} else {
		p := problemOf(refusal)
		code, v = p.Status, p
	}
	b, err := json.Marshal(v)
	if err != nil { // the views hold nothing json.Marshal can refuse
		panic(err)
	}
	return code, b
}

type notificationView struct {
	Channel      string    `json:"channel"`
	Source       string    `json:"source"`
	NotifyID     string    `json:"notify_id"`
	ChannelTxnID string    `json:"channel_txn_id"`
	Event        string    `json:"event"`
	Status       string    `json:"channel_status"`
	Subject      string    `json:"subject,omitempty"`
	Outcome      string    `json:"outcome"`
	AmountFen    int64     `json:"amount_fen"`
	Currency     string    `json:"currency"`
	ReceivedAt   time.Time `json:"received_at"`
}

type anomalyView struct {
	Kind              string    `json:"kind"`
	Channel           string    `json:"channel"`
	ChannelTxnID      string    `json:"channel_txn_id"`
	AmountFen         int64     `json:"amount_fen"`
	ExpectedAmountFen *int64    `json:"expected_amount_fen,omitempty"`
	Currency          string    `json:"currency"`
	Detail            string    `json:"detail"`
	Status            string    `json:"status"`
	CreatedAt         time.Time `json:"created_at"`
}

// refundView is a row of the refund ledger: kind ITEM (one refund; amount_fen null while no
// source has stated its own amount) or TOTAL (the largest running total a source stated).
type refundView struct {
	Channel      string    `json:"channel"`
	RefundID     string    `json:"refund_id"`
	Kind         string    `json:"kind"`
	ChannelTxnID string    `json:"channel_txn_id"`
	AmountFen    *int64    `json:"amount_fen"`
	Currency     string    `json:"currency"`
	Status       string    `json:"status"`
	CreatedAt    time.Time `json:"created_at"`
}

// paymentView is the query-callback-status answer.
type paymentView struct {
	Order         orderView           `json:"order"`
	Explanation   explain.Explanation `json:"explanation"`
	Attempts      []attemptView       `json:"attempts"`
	Notifications []notificationView  `json:"notifications"`
	Refunds       []refundView        `json:"refunds"`
	Anomalies     []anomalyView       `json:"anomalies"`
}

func paymentViewOf(r explain.Record) paymentView {
	v := paymentView{Order: viewOf(r.Order), Explanation: explain.Of(r), Attempts: []attemptView{},
		Notifications: []notificationView{}, Refunds: []refundView{}, Anomalies: []anomalyView{}}
	ns, rs, as := r.Notifications, r.Refunds, r.Anomalies
	for _, a := range r.Attempts {
		v.Attempts = append(v.Attempts, attemptViewOf(a))
	}
	for _, n := range ns {
		v.Notifications = append(v.Notifications, notificationView{
			Channel: n.Channel, Source: string(n.Source), NotifyID: n.NotifyID, ChannelTxnID: n.ChannelTxnID, Event: string(n.Event),
			Status: n.ChannelStatus, Subject: n.Subject, Outcome: string(n.Outcome), AmountFen: n.AmountFen,
			Currency: n.Currency, ReceivedAt: n.ReceivedTime,
		})
	}
	for _, r := range rs {
		v.Refunds = append(v.Refunds, refundView{
			Channel: r.Channel, RefundID: r.RefundID, Kind: r.Kind, ChannelTxnID: r.ChannelTxnID, AmountFen: r.AmountFen,
			Currency: r.Currency, Status: r.Status, CreatedAt: r.CreatedTime,
		})
	}
	for _, a := range as {
		v.Anomalies = append(v.Anomalies, anomalyViewOf(a))
	}
	return v
}

func anomalyViewOf(a payment.Anomaly) anomalyView {
	return anomalyView{
		Kind: string(a.Kind), Channel: a.Channel, ChannelTxnID: a.ChannelTxnID, AmountFen: a.AmountFen,
		ExpectedAmountFen: a.ExpectedAmountFen, Currency: a.Currency, Detail: a.Detail, Status: a.Status,
		CreatedAt: a.CreatedTime,
	}
}

var _ orders.Render = RenderCreate
