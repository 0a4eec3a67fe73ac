package payment_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/paygw/paygw/payment"
)

// Every outcome, what it is written as, whether it is an anomaly and what the channel is told.
// The table must name every Outcome constant of payment.go (TestOutcomeTableIsComplete).
var outcomes = map[string]struct {
	outcome payment.Outcome
	text    string // stored in idempotent_record and notify_journal: never renamed
	anomaly bool
	reply   payment.Reply
}{
	"OutcomeApplied":              {payment.OutcomeApplied, "APPLIED", false, payment.ReplySuccess},
	"OutcomeRepeat":               {payment.OutcomeRepeat, "REPEAT", false, payment.ReplySuccess},
	"OutcomeAmountMismatch":       {payment.OutcomeAmountMismatch, "AMOUNT_MISMATCH", true, payment.ReplySuccess},
	"OutcomePaidAfterClose":       {payment.OutcomePaidAfterClose, "PAID_AFTER_CLOSE", true, payment.ReplySuccess},
	"OutcomeDuplicatePayment":     {payment.OutcomeDuplicatePayment, "DUPLICATE_PAYMENT", true, payment.ReplySuccess},
	"OutcomeClosed":               {payment.OutcomeClosed, "CLOSED", false, payment.ReplySuccess},
	"OutcomeJournalled":           {payment.OutcomeJournalled, "JOURNALLED", false, payment.ReplySuccess},
	"OutcomeUnknownOrder":         {payment.OutcomeUnknownOrder, "UNKNOWN_ORDER", false, payment.ReplyRetry},
	"OutcomeRefunded":             {payment.OutcomeRefunded, "REFUNDED", false, payment.ReplySuccess},
	"OutcomeRefundPending":        {payment.OutcomeRefundPending, "REFUND_PENDING", false, payment.ReplySuccess},
	"OutcomeRefundExceedsPayment": {payment.OutcomeRefundExceedsPayment, "REFUND_EXCEEDS_PAYMENT", true, payment.ReplySuccess},
	"OutcomeAnomalyRefunded":      {payment.OutcomeAnomalyRefunded, "ANOMALY_REFUNDED", false, payment.ReplySuccess},
}

func TestOutcomes(t *testing.T) {
	for name, c := range outcomes {
		t.Run(name, func(t *testing.T) {
			if string(c.outcome) != c.text {
				t.Errorf("%s = %q, want %q (stored in the database: never renamed)", name, c.outcome, c.text)
			}
			if got := c.outcome.IsAnomaly(); got != c.anomaly {
				t.Errorf("%s.IsAnomaly() = %v, want %v", name, got, c.anomaly)
			}
			if got := c.outcome.Reply(); got != c.reply {
				t.Errorf("%s.Reply() = %v, want %v", name, got, c.reply)
			}
		})
	}
}

// The table above names every Outcome constant, so a new outcome cannot go untested.
func TestOutcomeTableIsComplete(t *testing.T) {
	var declared []string
	for _, d := range payment.DeclaredOutcomes(t) {
		declared = append(declared, d.Name)
	}
	if len(declared) == 0 {
		t.Fatal("found no Outcome constant in payment.go")
	}
	for _, name := range declared {
		if _, ok := outcomes[name]; !ok {
			t.Errorf("%s is not in the outcome table", name)
		}
	}
	for name := range outcomes {
		if !slices.Contains(declared, name) {
			t.Errorf("the table names %s, which payment.go does not declare", name)
		}
	}
}

// An outcome paygw never wrote (an old or corrupt row) is no anomaly and is answered success:
// only UNKNOWN_ORDER asks the channel to deliver again.
func TestUnknownOutcomeText(t *testing.T) {
	o := payment.Outcome("SOMETHING_ELSE")
	if o.IsAnomaly() || o.Reply() != payment.ReplySuccess {
		t.Fatalf("%q: anomaly %v, reply %v", o, o.IsAnomaly(), o.Reply())
	}
}

func TestValidTradeNo(t *testing.T) {
	for name, c := range map[string]struct {
		in   string
		want bool
	}{
		"empty":             {"", false},
		"one character":     {"T", true},
		"all allowed":       {"Az09_-", true},
		"32 characters":     {strings.Repeat("7", payment.MaxTradeNo), true},
		"33 characters":     {strings.Repeat("7", payment.MaxTradeNo+1), false},
		"space":             {"T 1", false},
		"quote":             {"T1'", false},
		"semicolon":         {"T1;", false},
		"dot":               {"T1.2", false},
		"slash":             {"T1/2", false},
		"NUL":               {"T1\x00", false},
		"non-ASCII letter":  {"Té", false},
		"full-width digit":  {"T１", false},
		"brace (hash tags)": {"T{1}", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := payment.ValidTradeNo(c.in); got != c.want {
				t.Fatalf("ValidTradeNo(%q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}
