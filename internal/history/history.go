// Package history is the randomized history check of the refund ledger: a generator of one
// order's truth at the channels, the messages each channel states about it in its own shape,
// an interleaving of their delivery, and an oracle that says from the truth alone what paygw's
// books must hold at the end. The driver that delivers histories through the real gateway lives
// in the package's tests:
//
//	go test -race ./internal/history -run TestLedgerHistories            # 60 s of 128-history batches
//	LEDGER_N=50 go test ./internal/history -run TestLedgerHistories      # a quick look
//	LEDGER_SEED=123 go test -v ./internal/history -run TestLedgerHistories # one history, step by step
//	go test ./internal/history -run TestLedgerRegressions                # the scripted cases
//	go test -race ./internal/history -run TestMoneyHistories             # 30 s of GenerateMoney's histories
//
// LEDGER_START fixes the first seed of a run, LEDGER_BATCH the histories that share days and
// bills, LEDGER_SHRINK how many failure categories get a shrunk script.
package history

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels/stripe"
	"github.com/paygw/paygw/money"
)

// The channels a history's attempts go to.
const (
	Alipay   = "alipay"
	WeChat   = "wechatpay"
	Stripe   = "stripe"
	UnionPay = "unionpay"
)

// Channels lists them in a fixed order.
var Channels = []string{Alipay, WeChat, Stripe, UnionPay}

// Outcome is what became of an attempt at its channel.
type Outcome string

const (
	Paid   Outcome = "paid"   // the buyer paid
	Closed Outcome = "closed" // the channel closed it unpaid
	Open   Outcome = "open"   // neither, to the end of the history
)

// Attempt is the buyer sent to one channel. At is when it was paid or closed, as an offset from
// the history's base (midnight UTC of its first day).
type Attempt struct {
	Channel string
	Outcome Outcome
	At      time.Duration
	// Absent: the channel never created the trade (Alipay answers TRADE_NOT_EXIST, Stripe finds no
	// PaymentIntent, WeChat ORDER_NOT_EXIST) until it is paid or closed, if ever.
	Absent bool
	// Stripe: paid through Checkout (checkout.session.completed applies it, and the charge's
	// charge.refunded carries no trade metadata of ours); RefundList: the endpoint's API version
	// lists the charge's refunds in charge.refunded (before 2022-11-15), so it names the refund.
	Checkout, RefundList bool
	// Alipay: notifications signed in GBK; CloseNotify: a TRADE_CLOSED notification is sent
	// (app and wap payments; PC web payments notify TRADE_SUCCESS only).
	GBK, CloseNotify bool
	// Refused: the channel takes no payments in the order's currency (Alipay, WeChat and UnionPay
	// take CNY alone), so paygw refuses to record the attempt and the buyer never reaches the
	// channel: it is Open and Absent, and nothing of it may show in the books.
	Refused bool
}

// Refund is one refund of a paid attempt, in time order within the history.
type Refund struct {
	Attempt int
	Fen     int64
	At      time.Duration
	// NoBillID: Alipay's bill leaves 退款批次号 empty on this refund's line (it does for some full
	// refunds); the line then names no refund id.
	NoBillID bool
}

// History is one order's truth at the channels. AmountFen and every refund's Fen are in the
// ISO 4217 minor units of the order's currency, as paygw counts them; each channel states them
// in its own units (see Units).
type History struct {
	Seed      uint64
	AmountFen int64
	Attempts  []Attempt
	Refunds   []Refund
	// Currency is the order's ISO 4217 code, "" for CNY; Origin how the order is made.
	Currency string
	Origin   Origin
}

// Origin is how a history's order comes to be.
type Origin string

const (
	// OriginInsert: a CNY order of SKU HISTORY, inserted in the database as the order service of
	// old did (the histories of Generate).
	OriginInsert Origin = ""
	// OriginStock: POST /v1/orders {user_id, sku, num} of a stock of its own, put in the order's
	// currency by PUT /v1/stock/{sku}: the order takes the stock's price and currency.
	OriginStock Origin = "stock"
	// OriginStockless: POST /v1/orders {user_id, amount_fen, currency}.
	OriginStockless Origin = "stockless"
	// OriginMerchantID: the same with a merchant_order_id of its own.
	OriginMerchantID Origin = "merchant_id"
)

// Code is the order's currency code.
func (h History) Code() string { return cmp.Or(h.Currency, money.Default) }

// Accepts reports whether a channel takes payments in currency code: Stripe takes the
// currencies a history draws, the Chinese channels CNY alone (each channel's AcceptsCurrency is
// the rule paygw applies; this is the truth the oracle holds it to).
func Accepts(channel, code string) bool { return channel == Stripe || code == money.Default }

// Currencies are the currencies GenerateMoney draws from: CNY, an ordinary two-decimal currency,
// zero-decimal JPY, three-decimal KWD, and the two whose Stripe units differ from ISO 4217's
// (ISK counted in hundredths by Stripe, MGA in whole ariary). CNY is listed twice: its orders
// meet every channel, so they are drawn more often.
var Currencies = []string{"CNY", "CNY", "USD", "JPY", "KWD", "ISK", "MGA"}

// Window is how long after its base a history's events happen; Rounds cut it (plus the Beijing
// day that starts 8 hours before the base) into 8-hour rounds, so that both Beijing and UTC
// midnights fall on round boundaries.
const (
	Days      = 3
	Window    = Days * 24 * time.Hour
	RoundLen  = 8 * time.Hour
	Rounds    = Days*3 + 1
	beijingOf = 8 * time.Hour
)

// RoundOf is the round in which an event at offset at happens: rounds start 8 hours before the
// base (Beijing midnight of the first day).
func RoundOf(at time.Duration) int { return int((at + beijingOf) / RoundLen) }

// roundEnd is the offset at which round r ends.
func roundEnd(r int) time.Duration { return time.Duration(r+1)*RoundLen - beijingOf }

// Zone is a channel's day: Beijing time for the Chinese channels, UTC for Stripe (its report's
// timezone as paygw configures it here).
func Zone(channel string) *time.Location {
	if channel == Stripe {
		return time.UTC
	}
	return bills.ChinaTime
}

// DayOf is the index of the channel day holding offset at: day k is the calendar date of the
// base plus k days, in the channel's zone.
func DayOf(channel string, at time.Duration) int {
	off := at
	if channel != Stripe {
		off += beijingOf
	}
	if off < 0 {
		return -1
	}
	return int(off / (24 * time.Hour))
}

// dayEnd is the offset at which channel day k ends.
func dayEnd(channel string, k int) time.Duration {
	end := time.Duration(k+1) * 24 * time.Hour
	if channel != Stripe {
		end -= beijingOf
	}
	return end
}

// BillRound is the first round after whose end the bill of channel day k exists.
func BillRound(channel string, k int) int {
	end := dayEnd(channel, k)
	r := 0
	for roundEnd(r) < end {
		r++
	}
	return r
}

// Generate makes the history of seed: 1-3 attempts on different channels, each paid (at most two:
// a duplicate payment), closed or left open; 0-4 refunds of paid attempts, partial or full, some
// of equal amounts. The order is a CNY one, inserted (OriginInsert).
func Generate(seed uint64) History { return generate(seed, moneyDraw{}) }

// GenerateMoney makes the history of seed as Generate does, in an order whose currency (one of
// Currencies) and origin (stock, stockless, stockless with a merchant_order_id) are drawn too:
// from a stream of their own, so that Generate's histories stay what they were. Attempts on a
// channel that does not take the currency are Refused; a non-CNY history gets a Stripe attempt
// more often than chance would give it. Amounts are whole in Stripe's units (MGA: whole ariary).
func GenerateMoney(seed uint64) History {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f6e6579)) // "money"
	m := moneyDraw{
		currency:    Currencies[rng.IntN(len(Currencies))],
		origin:      []Origin{OriginStock, OriginStockless, OriginMerchantID}[rng.IntN(3)],
		stripeFirst: rng.IntN(3) != 0,
	}
	if m.currency == money.Default {
		m.currency, m.stripeFirst = "", false
	}
	return generate(seed, m)
}

// moneyDraw is what GenerateMoney draws of an order's money: its currency ("" for CNY), its
// origin, and whether Stripe is the first channel tried.
type moneyDraw struct {
	currency    string
	origin      Origin
	stripeFirst bool
}

// generate is Generate's history of seed in the money m says; the zero moneyDraw draws nothing
// more from the "ledger" stream than Generate always did.
func generate(seed uint64, m moneyDraw) History {
	rng := rand.New(rand.NewPCG(seed, 0x6c6564676572)) // "ledger"
	h := History{Seed: seed, AmountFen: 100 + rng.Int64N(50_000), Currency: m.currency, Origin: m.origin}
	if rng.IntN(4) == 0 {
		h.AmountFen = 100 * (1 + rng.Int64N(20)) // round amounts make equal refunds likelier
	}
	unit := StripeUnit(h.Code())
	h.AmountFen = max(unit, h.AmountFen/unit*unit)
	n := 1 + rng.IntN(3)
	chs := slices.Clone(Channels)
	rng.Shuffle(len(chs), func(i, j int) { chs[i], chs[j] = chs[j], chs[i] })
	if m.stripeFirst {
		k := slices.Index(chs, Stripe)
		chs[0], chs[k] = chs[k], chs[0]
	}
	paid := 0
	for i := range n {
		a := generateAttempt(rng, chs[i], paid)
		if !Accepts(a.Channel, h.Code()) {
			a = Attempt{Channel: a.Channel, Outcome: Open, At: a.At, Absent: true, Refused: true}
		}
		if a.Outcome == Paid {
			paid++
		}
		h.Attempts = append(h.Attempts, a)
	}
	if payers := h.Payers(); len(payers) > 0 {
		h.Refunds = generateRefunds(rng, h, payers, unit)
	}
	return h
}

// StripeUnit is the smallest amount of code, in ISO 4217 minor units, that Stripe's API can
// state: 1, but 100 for MGA (Stripe counts whole ariary). It is read off stripe.ToStripe, the
// channel's own rule, rather than kept here a second time.
func StripeUnit(code string) int64 {
	for unit := int64(1); unit <= 1_000_000; unit *= 10 {
		if _, ok := stripe.ToStripe(unit, code); ok {
			return unit
		}
	}
	panic("stripe states no amount of " + code) // not one of Currencies
}

// generateAttempt draws one attempt on channel ch, paid at most twice in a history (paid so far).
func generateAttempt(rng *rand.Rand, ch string, paid int) Attempt {
	a := Attempt{Channel: ch, At: randomTime(rng, 0, Window-6*time.Hour)}
	switch x := rng.IntN(10); {
	case x < 5 && paid < 2 && (paid == 0 || rng.IntN(3) == 0):
		a.Outcome = Paid
	case x < 8 && a.Channel != UnionPay: // UnionPay says nothing of a close (see Messages)
		a.Outcome = Closed
	default:
		a.Outcome = Open
	}
	a.Absent = a.Outcome != Paid && rng.IntN(3) == 0
	switch a.Channel {
	case Stripe:
		a.Checkout, a.RefundList = rng.IntN(2) == 0, rng.IntN(2) == 0
	case Alipay:
		a.GBK, a.CloseNotify = rng.IntN(3) == 0, rng.IntN(2) == 0
	}
	if day := DayOf(a.Channel, a.At); a.Outcome == Paid && a.Channel != Stripe && rng.IntN(8) == 0 && dayEnd(a.Channel, day) <= Window-6*time.Hour {
		// Near midnight: the Chinese channels' bill carries it on the next day (see Lines).
		// Stripe's report is cut by created time exactly.
		a.At = dayEnd(a.Channel, day) - time.Duration(1+rng.IntN(100))*time.Second
	}
	return a
}

// generateRefunds draws up to four refunds of h's payments (payers: the paid attempts), each
// after its payment and the refund before it, never past what was paid, in whole units (see
// StripeUnit); in time order.
func generateRefunds(rng *rand.Rand, h History, payers []int, unit int64) []Refund {
	nref := []int{0, 0, 1, 1, 2, 2, 3, 4}[rng.IntN(8)]
	left := map[int]int64{}
	last := map[int]time.Duration{}
	for _, p := range payers {
		left[p], last[p] = h.AmountFen, h.Attempts[p].At
	}
	var refunds []Refund
	prev := int64(0)
	for range nref {
		p := payers[0]
		if len(payers) == 2 && rng.IntN(2) == 0 {
			p = payers[1] // the duplicate payment is refunded: the usual way to settle it
		}
		if left[p] == 0 {
			continue
		}
		var fen int64
		switch x := rng.IntN(10); {
		case x < 3 && prev > 0 && prev <= left[p]:
			fen = prev // equal to the one before
		case x < 5:
			fen = left[p] // the rest: a full refund
		default:
			fen = unit * (1 + rng.Int64N(left[p]/unit))
		}
		if last[p]+time.Minute >= Window-time.Minute {
			continue // no time left in the window
		}
		at := randomTime(rng, last[p]+time.Minute, Window-time.Minute)
		r := Refund{Attempt: p, Fen: fen, At: at}
		if h.Attempts[p].Channel == Alipay && rng.IntN(3) == 0 {
			r.NoBillID = true
		}
		refunds = append(refunds, r)
		left[p] -= fen
		last[p] = at
		prev = fen
	}
	slices.SortStableFunc(refunds, func(a, b Refund) int { return int(a.At - b.At) })
	return refunds
}

// randomTime is a whole second in [from, to); from < to.
func randomTime(rng *rand.Rand, from, to time.Duration) time.Duration {
	return (from + time.Duration(rng.Int64N(int64(to-from)))).Truncate(time.Second)
}

// Kind is what a message says.
type Kind string

const (
	MsgPay          Kind = "pay"           // the payment (Alipay TRADE_SUCCESS, WeChat TRANSACTION.SUCCESS, Stripe payment_intent.succeeded, UnionPay consume 00)
	MsgCheckout     Kind = "checkout"      // Stripe checkout.session.completed
	MsgClose        Kind = "close"         // Alipay TRADE_CLOSED unpaid, Stripe payment_intent.canceled
	MsgRefund       Kind = "refund"        // Alipay refund_fee (running total), WeChat REFUND.SUCCESS, UnionPay refund 04, Stripe charge.refunded (running total)
	MsgRefundObject Kind = "refund_object" // Stripe refund.created: the re_ id and its own amount
)

// Message is one notification a channel sends about the history: about Attempt, and Refund (an
// index into History.Refunds) for refunds.
type Message struct {
	Kind    Kind
	Attempt int
	Refund  int
	At      time.Duration // when the event it reports happened
}

// Messages lists every notification the channels send about h, in a fixed order. WeChat and
// UnionPay notify no close, and the Stripe close (payment_intent.canceled) is one paygw only
// journals; closes are otherwise learnt from trade queries.
func (h History) Messages() []Message {
	var ms []Message
	for i, a := range h.Attempts {
		switch {
		case a.Outcome == Paid && a.Channel == Stripe && a.Checkout:
			ms = append(ms, Message{Kind: MsgCheckout, Attempt: i, At: a.At}, Message{Kind: MsgPay, Attempt: i, At: a.At})
		case a.Outcome == Paid:
			ms = append(ms, Message{Kind: MsgPay, Attempt: i, At: a.At})
		case a.Outcome == Closed && (a.Channel == Alipay && a.CloseNotify || a.Channel == Stripe):
			ms = append(ms, Message{Kind: MsgClose, Attempt: i, At: a.At})
		}
	}
	for k, r := range h.Refunds {
		ms = append(ms, Message{Kind: MsgRefund, Attempt: r.Attempt, Refund: k, At: r.At})
		if h.Attempts[r.Attempt].Channel == Stripe {
			ms = append(ms, Message{Kind: MsgRefundObject, Attempt: r.Attempt, Refund: k, At: r.At})
		}
	}
	return ms
}

// RefundedBefore is the attempt's refunded total at the channel once everything before offset
// at has happened.
func (h History) RefundedBefore(attempt int, at time.Duration) int64 {
	var sum int64
	for _, r := range h.Refunds {
		if r.Attempt == attempt && r.At < at {
			sum += r.Fen
		}
	}
	return sum
}

// RunningTotal is the attempt's refunded total right after refund k: what Alipay's refund_fee
// and Stripe's amount_refunded state in refund k's notification.
func (h History) RunningTotal(k int) int64 {
	var sum int64
	for i, r := range h.Refunds[:k+1] {
		if r.Attempt == h.Refunds[k].Attempt {
			sum += h.Refunds[i].Fen
		}
	}
	return sum
}

// IDs are a history's identifiers in one execution: trade_no, each attempt's channel
// transaction id and each refund's channel refund id, in each channel's shape. They derive from
// the seed and the execution's namespace, so that replays of one history in one database never
// collide.
type IDs struct {
	TradeNo string
	Txn     []string // per attempt
	Refund  []string // per refund: Alipay's out_biz_no, WeChat's refund_id, Stripe's re_, UnionPay's queryId
	// NotifyBase prefixes the notification ids of the history's messages.
	NotifyBase string
}

// NewIDs derives h's ids in namespace ns.
func NewIDs(h History, ns uint64) IDs {
	d := func(label string, i int) []byte {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], h.Seed)
		binary.BigEndian.PutUint64(b[8:], ns)
		sum := sha256.Sum256(append(b[:], fmt.Sprintf("%s/%d", label, i)...))
		return sum[:]
	}
	ids := IDs{TradeNo: fmt.Sprintf("H%x", d("trade", 0)[:12])}
	ids.NotifyBase = fmt.Sprintf("%x", d("notify", 0)[:8])
	for i, a := range h.Attempts {
		ids.Txn = append(ids.Txn, idForms[a.Channel].txn.make(d("txn", i)))
	}
	for k, r := range h.Refunds {
		ids.Refund = append(ids.Refund, idForms[h.Attempts[r.Attempt].Channel].refund.make(d("refund", k)))
	}
	return ids
}

// idForm is how one kind of a channel's ids looks: a prefix, then n digits or n letters and
// digits, drawn from a digest (n <= 32, the digest's length).
type idForm struct {
	prefix string
	n      int
	alnum  bool
}

// idForms are each channel's transaction and refund ids.
var idForms = map[string]struct{ txn, refund idForm }{
	Alipay:   {idForm{"2026", 24, false}, idForm{"RF", 20, true}},
	WeChat:   {idForm{"4200", 24, false}, idForm{"50", 28, false}},
	Stripe:   {idForm{"pi_3", 23, true}, idForm{"re_3", 23, true}},
	UnionPay: {idForm{"7", 20, false}, idForm{"8", 20, false}},
}

func (f idForm) make(b []byte) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var s strings.Builder
	s.WriteString(f.prefix)
	for i := range f.n {
		if f.alnum {
			s.WriteByte(letters[int(b[i])%len(letters)])
		} else {
			s.WriteByte('0' + b[i]%10)
		}
	}
	return s.String()
}
