package payment

import (
	"errors"
	"time"
)

// The sentinels every layer shares. repository turns MySQL's errors into them, the services
// return them wrapped, and handlers maps them to HTTP answers in one table.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique key already holds this row (a repeat, or a lost race).
	ErrConflict = errors.New("conflict")
	// ErrInFlight: a twin of this request or notification is being worked on right now; ask again.
	ErrInFlight = errors.New("in flight")
	// ErrOutOfStock: the stock row exists but holds fewer units than asked.
	ErrOutOfStock = errors.New("out of stock")
)

// Order statuses.
const (
	OrderWaitPay = "WAIT_PAY"
	OrderPaid    = "PAID"
	OrderClosed  = "CLOSED"
)

// Order is one of our orders. Channel, ChannelTxnID and PaidTime are set once it is PAID;
// RefundedFen is what the channels have refunded of that payment so far, as the refund ledger
// derives it.
//
// Amounts are integers in the ISO 4217 minor units of Currency (money.Exponent), whatever the
// `Fen` in their names. An order without stock (created with an amount, not a SKU) has SKU ""
// and Num 1. MerchantOrderID is the merchant's own id for it ("" when none was given), unique per
// API client.
type Order struct {
	TradeNo         string
	UserID          int64
	SKU             string
	Num             int
	AmountFen       int64
	Currency        string
	MerchantOrderID string
	Status          string
	Channel         string
	ChannelTxnID    string
	PaidTime        *time.Time
	RefundedFen     int64
	CreateTime      time.Time
	UpdateTime      time.Time
}

// Stock is a SKU's level and unit price, in Currency's minor units ("" is read as CNY when
// stored).
type Stock struct {
	SKU      string
	Num      int
	PriceFen int64
	Currency string
}

// Anomaly statuses.
const (
	AnomalyOpen     = "open"     // needs a person
	AnomalyRefunded = "refunded" // the channel has refunded the payment it is about
)

// Anomaly is a verified payment or refund that was recorded but not applied.
type Anomaly struct {
	ID                int64
	Kind              Outcome
	TradeNo           string
	Channel           string
	ChannelTxnID      string
	AmountFen         int64
	Currency          string
	ExpectedAmountFen *int64
	Detail            string
	Status            string
	CreatedTime       time.Time
	// Resolved by a person: who (the API token's name), when, and what they noted.
	ResolvedBy  string
	ResolvedAt  *time.Time
	ResolveNote string
}

// Refund statuses.
const (
	RefundApplied = "APPLIED" // counted in its order's refunded_fen
	RefundPending = "PENDING" // its payment is not applied yet; counted when it is
	RefundAnomaly = "ANOMALY" // refunds a payment that was never applied (see the anomaly)
	RefundRefused = "REFUSED" // would exceed what was paid: REFUND_EXCEEDS_PAYMENT
)

// Refund kinds: one channel refund, or a payment's running total.
const (
	RefundItem  = "ITEM"
	RefundTotal = "TOTAL"
)

// Refund is one row of the refund ledger: an ITEM is one channel refund, once per channel refund
// id (or per bill line, for a bill that names none: IDKnown false); the TOTAL of a payment is the
// largest running total any source stated for it.
type Refund struct {
	ID           int64
	Channel      string
	RefundID     string
	Kind         string // ITEM or TOTAL
	IDKnown      bool
	BillKey      string // the id-less bill line that matched it, if any
	TradeNo      string // "" while no order is known (a refund that came before its payment)
	ChannelTxnID string // the payment it undoes
	AmountFen    *int64 // an item's own amount (nil: not stated yet), or the TOTAL
	Currency     string
	Status       string
	CreatedTime  time.Time
}

// Notification is one journalled notification, without its raw body.
type Notification struct {
	Channel       string
	Source        Source
	NotifyID      string
	TradeNo       string
	ChannelTxnID  string
	Event         Kind
	ChannelStatus string
	AmountFen     int64
	Currency      string
	Subject       string
	Outcome       Outcome
	ReceivedTime  time.Time
}

// Attempt is the order service sending a buyer to a channel: the channel to ask about the order
// when its notification does not come.
type Attempt struct {
	TradeNo     string
	Channel     string
	ChannelRef  string // Stripe's PaymentIntent id, UnionPay's txnTime; "" when none
	CreatedTime time.Time
	NextQueryAt time.Time
	QueryCount  int
	LastQueryAt *time.Time
	LastAnswer  string
	LastStatus  string
}
