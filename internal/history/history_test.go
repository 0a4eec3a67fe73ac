package history

import (
	"testing"
	"time"

	"github.com/paygw/paygw/channels/stripe"
)

// The generator's histories are well formed: every event happens inside the rounds, refunds
// follow their payment and never pass it, two payments at most, and every message and step
// refers to something that exists.
func TestGenerate(t *testing.T) {
	kinds := map[Kind]int{}
	for seed := range uint64(5000) {
		h := Generate(seed)
		if h.Currency != "" || h.Origin != OriginInsert {
			t.Fatalf("seed %d: %s", seed, h.GoString())
		}
		checkHistory(t, h, kinds)
	}
	for _, k := range []Kind{MsgPay, MsgCheckout, MsgClose, MsgRefund, MsgRefundObject} {
		if kinds[k] == 0 {
			t.Errorf("no %s message in 5000 histories", k)
		}
	}
}

// GenerateMoney's histories are well formed as Generate's are; besides, an attempt is refused
// exactly when its channel does not take the currency, and then is open and says nothing; every
// amount is one Stripe can state; and every currency is paid and refunded on Stripe, and every
// origin drawn, in 5000 histories.
func TestGenerateMoney(t *testing.T) {
	refundedIn := map[string]int{}
	origins := map[Origin]int{}
	refused := 0
	for seed := range uint64(5000) {
		h := GenerateMoney(seed)
		checkHistory(t, h, map[Kind]int{})
		origins[h.Origin]++
		unit := StripeUnit(h.Code())
		for _, fen := range append([]int64{h.AmountFen}, refundFens(h)...) {
			if _, ok := stripe.ToStripe(fen, h.Code()); !ok || fen%unit != 0 {
				t.Fatalf("seed %d: %d minor units of %s: Stripe cannot state them (%s)", seed, fen, h.Code(), h.GoString())
			}
		}
		for _, a := range h.Attempts {
			if a.Refused != !Accepts(a.Channel, h.Code()) || a.Refused && (a.Outcome != Open || !a.Absent) {
				t.Fatalf("seed %d: attempt %+v in %s", seed, a, h.Code())
			}
			if a.Refused {
				refused++
			}
		}
		for _, m := range h.Messages() {
			if h.Attempts[m.Attempt].Refused {
				t.Fatalf("seed %d: message %+v about a refused attempt", seed, m)
			}
		}
		for _, r := range h.Refunds {
			if h.Attempts[r.Attempt].Channel == Stripe {
				refundedIn[h.Code()]++
			}
		}
	}
	for _, c := range Currencies {
		if refundedIn[c] < 20 {
			t.Errorf("%d Stripe refunds in %s in 5000 histories", refundedIn[c], c)
		}
	}
	for _, o := range []Origin{OriginStock, OriginStockless, OriginMerchantID} {
		if origins[o] < 1000 {
			t.Errorf("%d histories of origin %s in 5000", origins[o], o)
		}
	}
	if refused < 1000 {
		t.Errorf("%d refused attempts in 5000 histories", refused)
	}
}

func refundFens(h History) []int64 {
	var fens []int64
	for _, r := range h.Refunds {
		fens = append(fens, r.Fen)
	}
	return fens
}

// checkHistory fails t unless h is well formed (see TestGenerate); it counts h's messages by kind.
func checkHistory(t *testing.T, h History, kinds map[Kind]int) {
	t.Helper()
	seed := h.Seed
	if len(h.Attempts) < 1 || len(h.Attempts) > 3 || len(h.Payers()) > 2 || len(h.Refunds) > 4 {
		t.Fatalf("seed %d: %s", seed, h.GoString())
	}
	chs := map[string]bool{}
	for _, a := range h.Attempts {
		if chs[a.Channel] || a.At < 0 || RoundOf(a.At) >= Rounds || a.Channel == UnionPay && a.Outcome == Closed {
			t.Fatalf("seed %d: attempt %+v", seed, a)
		}
		chs[a.Channel] = true
	}
	refunded := map[int]int64{}
	for k, r := range h.Refunds {
		a := h.Attempts[r.Attempt]
		refunded[r.Attempt] += r.Fen
		if a.Outcome != Paid || r.At <= a.At || r.Fen <= 0 || refunded[r.Attempt] > h.AmountFen || RoundOf(r.At) >= Rounds ||
			k > 0 && r.At < h.Refunds[k-1].At || h.RunningTotal(k) != refunded[r.Attempt] {
			t.Fatalf("seed %d: refund %d %+v of %s", seed, k, r, h.GoString())
		}
	}
	for _, m := range h.Messages() {
		kinds[m.Kind]++
	}
	for _, s := range OwnSteps(h, seed) {
		if s.R < 0 || s.R >= Rounds || s.Op == OpDeliver && s.N >= len(h.Messages()) || s.Op == OpQuery && s.N >= len(h.Attempts) {
			t.Fatalf("seed %d: step %s", seed, s)
		}
		if s.Op == OpDeliver && s.R < RoundOf(h.Messages()[s.N].At) {
			t.Fatalf("seed %d: %s before its event (round %d)", seed, s, RoundOf(h.Messages()[s.N].At))
		}
	}
	for _, l := range h.Lines() {
		if l.Day < 0 || l.Day > Days {
			t.Fatalf("seed %d: line %+v", seed, l)
		}
	}
}

// Channel days: Beijing midnight is 16:00 UTC the day before; every day's bill exists only
// after the round in which the day ends.
func TestDays(t *testing.T) {
	for _, c := range []struct {
		ch   string
		at   time.Duration
		day  int
		bill int
	}{
		{Alipay, -7 * time.Hour, 0, 2}, {Alipay, 15 * time.Hour, 0, 2}, {Alipay, 16 * time.Hour, 1, 5},
		{Stripe, 0, 0, 3}, {Stripe, 23 * time.Hour, 0, 3}, {Stripe, 24 * time.Hour, 1, 6},
	} {
		if d := DayOf(c.ch, c.at); d != c.day {
			t.Errorf("DayOf(%s, %s) = %d, want %d", c.ch, c.at, d, c.day)
		}
		if r := BillRound(c.ch, c.day); r != c.bill || roundEnd(r) < dayEnd(c.ch, c.day) {
			t.Errorf("BillRound(%s, %d) = %d, want %d", c.ch, c.day, r, c.bill)
		}
	}
}
