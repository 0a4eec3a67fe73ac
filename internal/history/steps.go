package history

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Op is what a step does.
type Op string

const (
	// A history's own steps.
	OpDeliver Op = "deliver" // deliver message N of History.Messages (signed afresh, as a channel's retry is)
	OpQuery   Op = "query"   // the reconcile job asks about the order on attempt N's channel
	// Steps every history of a run shares.
	OpBill    Op = "bill"    // run the bill of Channel's day Day, in Variant
	OpPurge   Op = "purge"   // the retention purge of idempotent_record and notify_journal
	OpRestart Op = "restart" // a new process: new Applier, handlers and job; Flush: Redis emptied too
)

// Variant is how a bill run's file is spoilt.
type Variant string

const (
	BillOK        Variant = ""          // the channel's file as it is
	BillTruncated Variant = "truncated" // cut short inside its detail lines: the run must fail and change nothing
	BillUntrusted Variant = "untrusted" // its summary disagrees with its lines: it must repair nothing
	// BillInvented: a payment line for attempt N of the history of seed Seed, which was never
	// paid there, with a summary that counts only the true lines: evidence that contradicts
	// itself, and would make a wrong payment if believed.
	BillInvented Variant = "invented"
	// BillWrongDay: the file of Day, as the channel made it, run as the bill of Day+WrongDays:
	// a bill of another day must be refused before anything is written.
	BillWrongDay Variant = "wrong_day"
)

// WrongDays is how far from its own day a BillWrongDay file is run.
const WrongDays = 3

// Step is one step of an interleaving. Steps run round by round: at the start of round R every
// channel event of the round happens (the fake channel's state moves on), then the histories'
// own steps of the round run, then the shared ones.
type Step struct {
	R       int
	Op      Op
	N       int
	Channel string
	Day     int
	Variant Variant
	Seed    uint64 // BillInvented: whose attempt N
	Flush   bool
}

// Shared reports whether the step belongs to every history of a run.
func (s Step) Shared() bool { return s.Op == OpBill || s.Op == OpPurge || s.Op == OpRestart }

func (s Step) String() string {
	switch s.Op {
	case OpDeliver, OpQuery:
		return fmt.Sprintf("r%d %s %d", s.R, s.Op, s.N)
	case OpBill:
		v := ""
		if s.Variant != BillOK {
			v = " " + string(s.Variant)
		}
		return fmt.Sprintf("r%d bill %s/day%d%s", s.R, s.Channel, s.Day, v)
	case OpRestart:
		if s.Flush {
			return fmt.Sprintf("r%d restart+flush", s.R)
		}
	}
	return fmt.Sprintf("r%d %s", s.R, s.Op)
}

// OwnSteps is a random interleaving of h's own deliveries and queries: every message is
// delivered at or after the round its event happens in, most soon, some late, some twice (at
// once or replayed rounds later), some never (dropped: only the settling delivers them); each
// attempt is asked about 0-3 times at random rounds, before or after anything happened.
func OwnSteps(h History, seed uint64) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x73746570)) // "step"
	var steps []Step
	for n, m := range h.Messages() {
		r0 := RoundOf(m.At)
		if rng.IntN(7) == 0 {
			continue // dropped: a lost notification
		}
		r := min(r0+lateness(rng), Rounds-1)
		steps = append(steps, Step{R: r, Op: OpDeliver, N: n})
		switch rng.IntN(6) {
		case 0:
			steps = append(steps, Step{R: r, Op: OpDeliver, N: n}) // a twin
		case 1, 2:
			steps = append(steps, Step{R: min(r+1+rng.IntN(4), Rounds-1), Op: OpDeliver, N: n}) // replayed late
		}
	}
	for i := range h.Attempts {
		for range rng.IntN(4) {
			steps = append(steps, Step{R: rng.IntN(Rounds), Op: OpQuery, N: i})
		}
	}
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	slices.SortStableFunc(steps, func(a, b Step) int { return a.R - b.R })
	return steps
}

// lateness is how many rounds after its event a first delivery comes: mostly none.
func lateness(rng *rand.Rand) int {
	switch x := rng.IntN(10); {
	case x < 6:
		return 0
	case x < 8:
		return 1
	default:
		return 2 + rng.IntN(3)
	}
}

// SharedSteps is a random schedule of the steps a run's histories share: each bill day is run
// once it exists (about half the time in its first round, else later), sometimes re-run,
// sometimes cut short or untrusted (Alipay and WeChat, whose files can be; see Spoilable), or
// run as another day's;
// purges and restarts in between. invent lists, per channel, attempts of the run never paid
// there that an invented line may claim.
func SharedSteps(seed uint64, days []BillDay, invent map[string][]Target) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x736861726564)) // "shared"
	var steps []Step
	ran := map[BillDay]bool{}
	for r := range Rounds {
		for _, bd := range days {
			if BillRound(bd.Channel, bd.Day) > r {
				continue
			}
			if ran[bd] && rng.IntN(7) != 0 || !ran[bd] && rng.IntN(2) != 0 {
				continue
			}
			ran[bd] = true
			s := Step{R: r, Op: OpBill, Channel: bd.Channel, Day: bd.Day}
			if rng.IntN(20) == 0 {
				s.Variant = BillWrongDay
			} else if Spoilable(bd.Channel) {
				switch x := rng.IntN(20); {
				case x < 3:
					s.Variant = BillTruncated
				case x < 5:
					s.Variant = BillUntrusted
				case x < 7 && len(invent[bd.Channel]) > 0:
					t := invent[bd.Channel][rng.IntN(len(invent[bd.Channel]))]
					s.Variant, s.Seed, s.N = BillInvented, t.Seed, t.Attempt
				}
			}
			steps = append(steps, s)
		}
		if rng.IntN(10) == 0 {
			steps = append(steps, Step{R: r, Op: OpPurge})
		}
		if rng.IntN(10) == 0 {
			steps = append(steps, Step{R: r, Op: OpRestart, Flush: rng.IntN(2) == 0})
		}
	}
	return steps
}

// Target is an attempt of one history of a run.
type Target struct {
	Seed    uint64
	Attempt int
}

// Spoilable reports whether a channel's bill can be cut short or contradict itself detectably:
// Alipay's and WeChat's files end with a summary of their lines. Stripe's report and UnionPay's
// ZM file state none, so a cut at a line boundary reads as a shorter bill, and no summary can
// disagree.
func Spoilable(channel string) bool { return channel == Alipay || channel == WeChat }

// Script is a history and the steps of one interleaving, as the driver runs it alone (the
// settling and the final checks follow the steps).
type Script struct {
	Name    string
	History History
	Steps   []Step
}

// GoString renders a script as a Go literal, to paste into the regression table.
func (s Script) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Name: %q, History: %s, Steps: []Step{\n", s.Name, s.History.GoString())
	for _, st := range s.Steps {
		b.WriteString("\t" + st.GoString() + ",\n")
	}
	b.WriteString("}},")
	return b.String()
}

// GoString renders a history as a Go literal.
func (h History) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "History{Seed: %d, AmountFen: %d, Attempts: []Attempt{", h.Seed, h.AmountFen)
	for _, a := range h.Attempts {
		fmt.Fprintf(&b, "{Channel: %s, Outcome: %s, At: %s", channelConst[a.Channel], outcomeConst[a.Outcome], goDuration(a.At))
		for _, f := range []struct {
			name string
			on   bool
		}{{"Absent", a.Absent}, {"Checkout", a.Checkout}, {"RefundList", a.RefundList}, {"GBK", a.GBK}, {"CloseNotify", a.CloseNotify},
			{"Refused", a.Refused}} {
			if f.on {
				fmt.Fprintf(&b, ", %s: true", f.name)
			}
		}
		b.WriteString("}, ")
	}
	b.WriteString("}, Refunds: []Refund{")
	for _, r := range h.Refunds {
		fmt.Fprintf(&b, "{Attempt: %d, Fen: %d, At: %s", r.Attempt, r.Fen, goDuration(r.At))
		if r.NoBillID {
			b.WriteString(", NoBillID: true")
		}
		b.WriteString("}, ")
	}
	b.WriteString("}")
	if h.Currency != "" {
		fmt.Fprintf(&b, ", Currency: %q", h.Currency)
	}
	if h.Origin != OriginInsert {
		fmt.Fprintf(&b, ", Origin: %s", originConst[h.Origin])
	}
	b.WriteString("}")
	return b.String()
}

// GoString renders a step as a Go literal.
func (s Step) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{R: %d, Op: %s", s.R, opConst[s.Op])
	switch s.Op {
	case OpDeliver, OpQuery:
		fmt.Fprintf(&b, ", N: %d", s.N)
	case OpBill:
		fmt.Fprintf(&b, ", Channel: %s, Day: %d", channelConst[s.Channel], s.Day)
		if s.Variant != BillOK {
			fmt.Fprintf(&b, ", Variant: %s", variantConst[s.Variant])
		}
		if s.Variant == BillInvented {
			fmt.Fprintf(&b, ", Seed: %d, N: %d", s.Seed, s.N)
		}
	case OpRestart:
		if s.Flush {
			b.WriteString(", Flush: true")
		}
	}
	b.WriteString("}")
	return b.String()
}

// The names of the constants GoString writes.
var (
	channelConst = map[string]string{Alipay: "Alipay", WeChat: "WeChat", Stripe: "Stripe", UnionPay: "UnionPay"}
	outcomeConst = map[Outcome]string{Paid: "Paid", Closed: "Closed", Open: "Open"}
	originConst  = map[Origin]string{OriginStock: "OriginStock", OriginStockless: "OriginStockless", OriginMerchantID: "OriginMerchantID"}
	opConst      = map[Op]string{OpDeliver: "OpDeliver", OpQuery: "OpQuery", OpBill: "OpBill", OpPurge: "OpPurge", OpRestart: "OpRestart"}
	variantConst = map[Variant]string{BillTruncated: "BillTruncated", BillUntrusted: "BillUntrusted", BillInvented: "BillInvented",
		BillWrongDay: "BillWrongDay"}
)

// goDuration writes an offset as Go: 26*time.Hour + 3*time.Second.
func goDuration(d time.Duration) string {
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	var parts []string
	if h != 0 {
		parts = append(parts, fmt.Sprintf("%d*time.Hour", h))
	}
	if m != 0 {
		parts = append(parts, fmt.Sprintf("%d*time.Minute", m))
	}
	if s != 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%d*time.Second", s))
	}
	return strings.Join(parts, " + ")
}
