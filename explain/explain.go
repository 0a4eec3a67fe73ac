// Package explain answers "why is this order not paid?" from everything paygw knows of an order:
// its payment attempts and what the channels answered when asked, the journal, anomalies and
// refunds, and the notifications refused for it (kept in Redis only, never in the database).
package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/payment"
)

// Fact is one thing paygw knows, with when and how it learnt it.
type Fact struct {
	At     time.Time `json:"at"`
	Source string    `json:"source"` // order, attempt, query, notify, anomaly, refund, refused
	Text   string    `json:"text"`
}

// Explanation is a one-sentence summary and the facts behind it, oldest first.
type Explanation struct {
	Summary string `json:"summary"`
	Facts   []Fact `json:"facts"`
}

// Refusal is one refused notification that claimed to be about an order.
type Refusal struct {
	At      time.Time `json:"at"`
	Channel string    `json:"channel"`
	Reason  string    `json:"reason"` // the verifier's reason: names fields, never key material
}

// Record is everything known of one order.
type Record struct {
	Order         payment.Order
	Attempts      []payment.Attempt
	Notifications []payment.Notification
	Anomalies     []payment.Anomaly
	Refunds       []payment.Refund
	Refusals      []Refusal // newest first, as Redis keeps them
}

// Of explains r.
func Of(r Record) Explanation {
	o := r.Order
	created := "order created for " + money.Format(o.AmountFen, o.Currency)
	if o.MerchantOrderID != "" {
		created += fmt.Sprintf(" (merchant order %q)", o.MerchantOrderID)
	}
	facts := []Fact{{At: o.CreateTime, Source: "order", Text: created}}
	for _, a := range r.Attempts {
		text := "buyer sent to " + a.Channel
		if a.ChannelRef != "" {
			text += " (" + a.ChannelRef + ")"
		}
		facts = append(facts, Fact{At: a.CreatedTime, Source: "attempt", Text: text})
		if a.LastQueryAt != nil {
			facts = append(facts, Fact{At: *a.LastQueryAt, Source: "query",
				Text: fmt.Sprintf("asked %s (%d time(s)): %s %s", a.Channel, a.QueryCount, a.LastAnswer, a.LastStatus)})
		}
	}
	for _, n := range r.Notifications {
		facts = append(facts, Fact{At: n.ReceivedTime, Source: string(n.Source),
			Text: fmt.Sprintf("%s %s %s: %s", n.Channel, n.ChannelStatus, money.Format(n.AmountFen, n.Currency), n.Outcome)})
	}
	for _, a := range r.Anomalies {
		facts = append(facts, Fact{At: a.CreatedTime, Source: "anomaly", Text: fmt.Sprintf("%s (%s): %s", a.Kind, a.Status, a.Detail)})
	}
	for _, f := range r.Refunds {
		facts = append(facts, Fact{At: f.CreatedTime, Source: "refund", Text: refundFact(f)})
	}
	refused := groupRefusals(r.Refusals)
	for _, g := range refused {
		facts = append(facts, Fact{At: g.last, Source: "refused", Text: g.String()})
	}
	sort.SliceStable(facts, func(i, j int) bool { return facts[i].At.Before(facts[j].At) })
	return Explanation{Summary: summary(r, refused), Facts: facts}
}

func summary(r Record, refused []refusalGroup) string {
	o := r.Order
	switch o.Status {
	case payment.OrderPaid:
		s := fmt.Sprintf("Paid through %s (transaction %s)", o.Channel, o.ChannelTxnID)
		if o.PaidTime != nil {
			s += " at " + o.PaidTime.UTC().Format(time.RFC3339)
		}
		if o.RefundedFen > 0 {
			s += fmt.Sprintf("; %s of it refunded", money.Format(o.RefundedFen, o.Currency))
		}
		return s + "."
	case payment.OrderClosed:
		for _, a := range r.Anomalies {
			if a.Kind == payment.OutcomePaidAfterClose && a.Status == payment.AnomalyOpen {
				return "Closed, but a payment arrived after the close and needs a person (PAID_AFTER_CLOSE)."
			}
		}
		return "Closed without a payment."
	}
	for _, a := range r.Anomalies {
		if a.Kind == payment.OutcomeAmountMismatch && a.Status == payment.AnomalyOpen {
			return "Not paid: a payment arrived but does not match the order (" + a.Detail + ")."
		}
	}
	if len(refused) > 0 {
		return "Not paid: " + refused[0].String() + ". Check that channel's keys in the configuration."
	}
	var asked *payment.Attempt
	for i, a := range r.Attempts {
		if a.LastQueryAt != nil && (asked == nil || a.LastQueryAt.After(*asked.LastQueryAt)) {
			asked = &r.Attempts[i]
		}
	}
	if asked != nil {
		return fmt.Sprintf("Not paid: %s answered %s (%s) when asked at %s.", asked.Channel, asked.LastAnswer,
			asked.LastStatus, asked.LastQueryAt.UTC().Format(time.RFC3339))
	}
	if len(r.Attempts) > 0 {
		var chans []string
		for _, a := range r.Attempts {
			chans = append(chans, a.Channel)
		}
		return "Not paid: the buyer was sent to " + strings.Join(chans, ", ") + "; no notification has come and no channel was asked yet."
	}
	return "Not paid: no notification has come, and no payment attempt is recorded."
}

// refusalGroup is the refusals of one channel for one reason.
type refusalGroup struct {
	channel, reason string
	n               int
	last            time.Time
}

func (g refusalGroup) String() string {
	return fmt.Sprintf("%d notification(s) from %s refused: %s, last at %s", g.n, g.channel, g.reason, g.last.UTC().Format(time.RFC3339))
}

// groupRefusals groups refusals by channel and reason, the most recent group first.
func groupRefusals(rs []Refusal) []refusalGroup {
	var groups []refusalGroup
	index := map[string]int{}
	for _, r := range rs {
		k := r.Channel + "\x00" + r.Reason
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, refusalGroup{channel: r.Channel, reason: r.Reason})
		}
		groups[i].n++
		if r.At.After(groups[i].last) {
			groups[i].last = r.At
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].last.After(groups[j].last) })
	return groups
}

// refundFact tells one row of the refund ledger.
func refundFact(f payment.Refund) string {
	switch {
	case f.Kind == payment.RefundTotal:
		return fmt.Sprintf("%s says %s of payment %s refunded in all: %s", f.Channel, money.Format(*f.AmountFen, f.Currency), f.ChannelTxnID, f.Status)
	case f.AmountFen == nil:
		return fmt.Sprintf("%s refund %s, its amount not stated yet: %s", f.Channel, f.RefundID, f.Status)
	}
	return fmt.Sprintf("%s refund %s of %s: %s", f.Channel, f.RefundID, money.Format(*f.AmountFen, f.Currency), f.Status)
}
