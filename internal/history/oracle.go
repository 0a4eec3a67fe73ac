package history

import (
	"fmt"
	"slices"
	"time"
)

// Order statuses and anomaly kinds the oracle speaks of (payment's words).
const (
	StatusWaitPay = "WAIT_PAY"
	StatusPaid    = "PAID"
	StatusClosed  = "CLOSED"

	AnomalyDuplicatePayment = "DUPLICATE_PAYMENT"
)

// Bill line classes (reconcile's words).
const (
	ClassMatched        = "MATCHED"
	ClassStatusMismatch = "STATUS_MISMATCH"
	ClassRefundMatched  = "REFUND_MATCHED"
)

// Line is one line of a channel's bill that the history puts there.
type Line struct {
	Channel   string
	Day       int // the channel day whose bill carries it
	Refund    bool
	Attempt   int
	RefundK   int // index into History.Refunds, for refunds
	AmountFen int64
	At        time.Duration
}

// nearMidnight: a payment this close before its day's end is carried by the next day's bill of
// the Chinese channels, which settle payments that straddle midnight on the next day.
const nearMidnight = 100 * time.Second

// Lines lists the bill lines of h: a payment line per paid attempt, on the bill of its channel
// day (the next day's for a payment in the last nearMidnight of its day), and a refund line per
// refund on its own day's bill.
func (h History) Lines() []Line {
	var ls []Line
	for i, a := range h.Attempts {
		if a.Outcome != Paid {
			continue
		}
		day := DayOf(a.Channel, a.At)
		if a.Channel != Stripe && dayEnd(a.Channel, day)-a.At <= nearMidnight {
			day++
		}
		ls = append(ls, Line{Channel: a.Channel, Day: day, Attempt: i, AmountFen: 0, At: a.At})
	}
	for k, r := range h.Refunds {
		ch := h.Attempts[r.Attempt].Channel
		ls = append(ls, Line{Channel: ch, Day: DayOf(ch, r.At), Refund: true, Attempt: r.Attempt, RefundK: k, AmountFen: r.Fen, At: r.At})
	}
	for i := range ls {
		if !ls[i].Refund {
			ls[i].AmountFen = h.AmountFen
		}
	}
	return ls
}

// BillDay names one channel's day.
type BillDay struct {
	Channel string
	Day     int
}

func (b BillDay) String() string { return fmt.Sprintf("%s/day%d", b.Channel, b.Day) }

// BillDays lists the channel days whose bills carry lines of h, in order.
func (h History) BillDays() []BillDay {
	var out []BillDay
	for _, l := range h.Lines() {
		bd := BillDay{l.Channel, l.Day}
		if !slices.Contains(out, bd) {
			out = append(out, bd)
		}
	}
	slices.SortFunc(out, func(a, b BillDay) int {
		if a.Day != b.Day {
			return a.Day - b.Day
		}
		return slices.Index(Channels, a.Channel) - slices.Index(Channels, b.Channel)
	})
	return out
}

// Payers are the attempts the buyer paid.
func (h History) Payers() []int {
	var p []int
	for i, a := range h.Attempts {
		if a.Outcome == Paid {
			p = append(p, i)
		}
	}
	return p
}

// Expected is what paygw's books must hold once every source has been seen.
type Expected struct {
	Status string
	// Holder: the attempt whose payment the order holds; any of Payers may be (the first applied
	// wins), so the driver passes the one it found and the oracle checks it is a payer.
	Holder      int
	RefundedFen int64
	// Anomalies, as "KIND channel txn-index" strings (the driver maps its rows the same way).
	Anomalies []Anomaly
	// Classes per bill day: how many of the history's lines the final re-run of that day must
	// classify as each class.
	Classes map[BillDay]map[string]int
}

// Anomaly is an anomaly the oracle expects: a kind about one attempt's payment.
type Anomaly struct {
	Kind    string
	Attempt int
}

// Expect is the oracle. holder is the attempt whose payment the order holds (-1 when it holds
// none); it is an error for the caller when Expect says holder cannot be that.
//
//   - Status: PAID if any attempt was paid; CLOSED if none was and every attempt was closed at its
//     channel in a way the channel can prove; WAIT_PAY otherwise. Refused attempts do not count:
//     paygw never recorded them, and an order whose every attempt was refused stays WAIT_PAY. A Stripe Checkout attempt
//     records no PaymentIntent, and Stripe's search (which lags) never proves a close: such an
//     attempt stays open until reconcile.query_max_age, which no history reaches.
//   - The order holds one of the paid attempts; with two, the other is a DUPLICATE_PAYMENT anomaly,
//     and no other anomaly exists.
//   - refunded_fen: the sum of the refunds of the payment the order holds.
//   - The final re-run of each day's bill classifies the history's lines: the held payment
//     MATCHED, the duplicate payment STATUS_MISMATCH (its order is PAID by another payment, and
//     reconcile.billRun.payments finds the order by trade_no: neither MATCHED nor CHANNEL_ONLY),
//     every refund REFUND_MATCHED (the refunds of the duplicate payment too: they are the
//     channel's refunds, each recorded once), and nothing else (no LOCAL_ONLY: every payment is on
//     a bill of its day or the next).
func (h History) Expect(holder int) (Expected, error) {
	e := Expected{Holder: holder, Classes: map[BillDay]map[string]int{}}
	payers := h.Payers()
	switch {
	case len(payers) > 0:
		e.Status = StatusPaid
	case slices.ContainsFunc(h.Attempts, func(a Attempt) bool { return !a.Refused }) &&
		!slices.ContainsFunc(h.Attempts, func(a Attempt) bool { return !a.Refused && (a.Outcome != Closed || a.Channel == Stripe && a.Checkout) }):
		e.Status = StatusClosed
	default:
		e.Status = StatusWaitPay
	}
	if len(payers) > 0 && !slices.Contains(payers, holder) {
		return e, fmt.Errorf("the order holds attempt %d's payment; the paid attempts are %v", holder, payers)
	}
	if len(payers) == 0 && holder >= 0 {
		return e, fmt.Errorf("the order holds attempt %d's payment, but no attempt was paid", holder)
	}
	for _, p := range payers {
		if p != holder {
			e.Anomalies = append(e.Anomalies, Anomaly{Kind: AnomalyDuplicatePayment, Attempt: p})
		}
	}
	for _, r := range h.Refunds {
		if r.Attempt == holder {
			e.RefundedFen += r.Fen
		}
	}
	for _, l := range h.Lines() {
		bd := BillDay{l.Channel, l.Day}
		if e.Classes[bd] == nil {
			e.Classes[bd] = map[string]int{}
		}
		switch {
		case l.Refund:
			e.Classes[bd][ClassRefundMatched]++
		case l.Attempt == holder:
			e.Classes[bd][ClassMatched]++
		default:
			e.Classes[bd][ClassStatusMismatch]++
		}
	}
	return e, nil
}
