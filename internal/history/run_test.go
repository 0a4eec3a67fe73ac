package history

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/simulate"
)

// member is one history in an execution.
type member struct {
	h     History
	ids   IDs
	steps []Step // its own steps
	acked []bool // per message: answered with the channel's success at least once
	// billed: the refunds (by index) and payments (by attempt) a good bill run has shown.
	billedRefund, billedPay map[int]bool
	signed                  map[int]simulate.Message // per message, as first signed: a retry repeats it

	mu       sync.Mutex
	failures []failure
}

// failure is one way a history's books differ from the oracle's: category groups failures of
// one kind across seeds, detail says what was found.
type failure struct {
	category, detail string
}

func (m *member) fail(category, format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.failures {
		if f.category == category {
			return // the first of a kind tells
		}
	}
	m.failures = append(m.failures, failure{category, fmt.Sprintf(format, args...)})
}

func (m *member) failed() []failure {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.failures)
}

// execution is one run of histories on one world: they share its base (their days), its bills,
// purges and restarts.
type execution struct {
	w       *world
	base    time.Time
	members []*member
	shared  []Step
	workers int
	trace   func(string) // each step, when replaying one history verbosely
	fatal   []string     // failures of the execution itself (no history to blame)
	timing  map[string]time.Duration
	// accepted counts the discrepancies finance accepted the channel's side of (acceptChannel).
	accepted int
}

// timed adds the time fn takes to the phase's total.
func (e *execution) timed(phase string, fn func()) {
	t := time.Now()
	fn()
	if e.timing == nil {
		e.timing = map[string]time.Duration{}
	}
	e.timing[phase] += time.Since(t)
}

// newExecution gives the histories their ids and days in the world; shared is the schedule of
// shared steps.
func (w *world) newExecution(hs []History, own [][]Step, shared []Step) *execution {
	k := w.execs.Add(1) - 1
	e := &execution{w: w, base: w.anchor.AddDate(0, 0, -7*int(k)), shared: shared, workers: 32}
	for i, h := range hs {
		m := &member{h: h, ids: NewIDs(h, k), steps: own[i], acked: make([]bool, len(h.Messages())),
			billedRefund: map[int]bool{}, billedPay: map[int]bool{}, signed: map[int]simulate.Message{}}
		e.members = append(e.members, m)
	}
	return e
}

// parallel runs fn for every member, workers at a time.
func (e *execution) parallel(fn func(m *member)) {
	ch := make(chan *member)
	var wg sync.WaitGroup
	for range min(e.workers, len(e.members)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range ch {
				fn(m)
			}
		}()
	}
	for _, m := range e.members {
		ch <- m
	}
	close(ch)
	wg.Wait()
}

// run executes the rounds, the settling and the final checks.
func (e *execution) run() {
	e.timed("orders", func() {
		e.parallel(func(m *member) {
			taken, err := e.w.newOrder(m.h, &m.ids, e.base)
			if err != nil {
				m.fail("setup", "creating the order: %v", err)
			}
			if len(taken) > 0 {
				m.fail("attempt: a channel took a currency it refuses", "%s attempts recorded for an order in %s", taken, m.h.Code())
			}
		})
	})
	for r := range Rounds {
		e.happen(r)
		e.timed("own steps", func() {
			e.parallel(func(m *member) {
				for _, s := range m.steps {
					if s.R == r {
						e.own(m, s)
						e.invariant(m, r, s)
					}
				}
			})
		})
		e.timed("shared steps", func() {
			for _, s := range e.shared {
				if s.R == r {
					e.sharedStep(s, r)
				}
			}
		})
	}
	e.timed("settle", e.settle)
	e.timed("final", e.final)
}

// happen moves the fake channel to the end of round r: every event before it has happened.
func (e *execution) happen(r int) {
	ctx := context.Background()
	for _, m := range e.members {
		for i := range m.h.Attempts {
			if t, ok := FakeTrade(m.h, m.ids, e.base, i, roundEnd(r), e.w.signers.StripeUnits); ok {
				if _, err := e.w.fake.Add(ctx, t); err != nil {
					m.fail("setup", "fake channel: %v", err)
				}
			}
		}
	}
}

func (e *execution) say(format string, args ...any) {
	if e.trace != nil {
		e.trace(fmt.Sprintf(format, args...))
	}
}

// own runs one of a history's own steps.
func (e *execution) own(m *member, s Step) {
	switch s.Op {
	case OpDeliver:
		t0 := time.Now()
		defer func() { e.w.opTime("deliver", time.Since(t0)) }()
		acked, err := e.w.deliver(m, e.base, s.N)
		if err != nil {
			m.fail("delivery refused", "message %d (%s): %v", s.N, m.h.Messages()[s.N].Kind, err)
		}
		m.acked[s.N] = m.acked[s.N] || acked
		e.say("%s: acked %v", s, acked)
	case OpQuery:
		t0 := time.Now()
		defer func() { e.w.opTime("query", time.Since(t0)) }()
		if err := e.w.query(m.h.Attempts[s.N].Channel, m.ids.TradeNo); err != nil {
			m.fail("query failed", "attempt %d: %v", s.N, err)
		}
		e.say("%s", s)
	}
}

// invariant is the check after every step: refunded_fen never exceeds the channel's true
// refunded total so far of the payment the order holds, nor that payment; and the order holds
// only a payment the buyer made.
func (e *execution) invariant(m *member, r int, s Step) {
	t0 := time.Now()
	defer func() { e.w.opTime("invariant", time.Since(t0)) }()
	b, err := e.w.order(m.ids.TradeNo)
	if err != nil {
		m.fail("setup", "reading the books: %v", err)
		return
	}
	e.check(m, b, r, s)
}

func (e *execution) check(m *member, b *books, r int, s Step) {
	e.say("  books: %s", b)
	if b.RefundedFen > m.h.AmountFen {
		m.fail("step: refunded_fen above the payment", "after %s: refunded_fen %d > amount %d", s, b.RefundedFen, m.h.AmountFen)
	}
	if b.Txn == "" {
		if b.RefundedFen > 0 {
			m.fail("step: refunded_fen on an unpaid order", "after %s: refunded_fen %d, status %s", s, b.RefundedFen, b.Status)
		}
		return
	}
	i := slices.Index(m.ids.Txn, b.Txn)
	switch {
	case i < 0 || m.h.Attempts[i].Channel != b.Channel || m.h.Attempts[i].Outcome != Paid:
		m.fail("step: order holds a payment the buyer never made", "after %s: %s %s", s, b.Channel, b.Txn)
	case b.RefundedFen > m.h.RefundedBefore(i, roundEnd(r)):
		m.fail("step: refunded_fen above the channel's total so far", "after %s: refunded_fen %d, the channel has refunded %d of attempt %d",
			s, b.RefundedFen, m.h.RefundedBefore(i, roundEnd(r)), i)
	}
}

// sharedStep runs a bill, a purge or a restart, checking what it must not change.
func (e *execution) sharedStep(s Step, r int) {
	e.say("%s", s)
	switch s.Op {
	case OpPurge:
		if err := e.w.purge(); err != nil {
			e.fatal = append(e.fatal, fmt.Sprintf("%s: %v", s, err))
		}
	case OpRestart:
		before := e.w.errLogs.Load()
		e.w.restart(s.Flush)
		if e.w.errLogs.Load() != before {
			e.blame(nil, "restart: error logged at start", "after %s the new process logged an error (the identity check: a purge taken for a restore?)", s)
		}
	case OpBill:
		e.bill(s, r)
	}
	bs, err := e.w.read(e.members)
	if err != nil {
		e.fatal = append(e.fatal, fmt.Sprintf("reading the books: %v", err))
		return
	}
	for _, m := range e.members {
		e.check(m, bs[m.ids.TradeNo], r, s)
	}
}

// blame records a failure against every history of the execution, or, when on is not nil,
// against those for which on is true.
func (e *execution) blame(on func(*member) bool, category, format string, args ...any) {
	for _, m := range e.members {
		if on == nil || on(m) {
			m.fail(category, format, args...)
		}
	}
}

// onDay reports whether a history has lines on bd's bill, or is the one an invented line claims.
func onDay(bd BillDay, s Step) func(*member) bool {
	return func(m *member) bool {
		return slices.Contains(m.h.BillDays(), bd) || s.Variant == BillInvented && s.Seed == m.h.Seed
	}
}

// bill renders and runs one bill day. A cut-short file must fail the run and change nothing: no
// order, refund or anomaly, and the day's previous run as it was. A file whose summary
// disagrees with its lines must repair nothing.
func (e *execution) bill(s Step, r int) {
	bd := BillDay{s.Channel, s.Day}
	var ms []Member
	for _, m := range e.members {
		ms = append(ms, Member{m.h, m.ids})
	}
	file, ok := BillFile(e.base, bd, ms, s.Variant, Target{s.Seed, s.N})
	if !ok {
		return
	}
	date := Date(e.base, bd)
	runAs := bd // the day the run is of
	if s.Variant == BillWrongDay {
		runAs.Day += WrongDays
		date = Date(e.base, runAs)
	}
	before, err := e.w.read(e.members)
	if err != nil {
		e.fatal = append(e.fatal, err.Error())
		return
	}
	runBefore, err := e.w.dayRun(runAs, date)
	if err != nil {
		e.fatal = append(e.fatal, err.Error())
		return
	}
	zipped := bd.Channel == UnionPay || bd.Channel == Alipay && s.Variant == BillOK && (s.R+s.Day)%2 == 0
	if zipped && bd.Channel == Alipay {
		file = AlipayZip(date, file)
	}
	rep, runErr := e.w.runBill(bd, date, file, zipped)
	e.say("  bill %s: %v, %v", bd, rep.Counts, runErr)
	after, err := e.w.read(e.members)
	if err != nil {
		e.fatal = append(e.fatal, err.Error())
		return
	}
	changed := func(what string) {
		for _, m := range e.members {
			if b, a := before[m.ids.TradeNo], after[m.ids.TradeNo]; b.String() != a.String() {
				m.fail("bill: "+what, "%s changed the books: %s -> %s", s, b, a)
			}
		}
	}
	switch s.Variant {
	case BillOK:
		if runErr != nil {
			e.blame(onDay(bd, s), "bill: a good bill failed", "%s: %v", s, runErr)
			return
		}
		for _, m := range e.members {
			e.billed(m, bd, after[m.ids.TradeNo], s)
		}
	case BillTruncated, BillWrongDay:
		if runErr == nil {
			what := map[Variant]string{BillTruncated: "bill: a cut-short bill ran", BillWrongDay: "bill: another day's bill ran"}[s.Variant]
			e.blame(onDay(bd, s), what, "%s ran as the bill of %s: %v", s, date.Format(time.DateOnly), rep.Counts)
		}
		if s.Variant == BillWrongDay {
			changed("another day's bill changed the books")
		} else {
			changed("a failed run changed the books")
		}
		// The day's complete run stays its result: a failed run may leave a run row of its own,
		// never finished, but nothing of the previous run changes.
		if runAfter, err := e.w.dayRun(runAs, date); err != nil {
			e.fatal = append(e.fatal, err.Error())
		} else if runAfter != runBefore {
			e.blame(onDay(bd, s), "bill: a failed run changed its day's run", "%s: before %s; after %s", s, runBefore, runAfter)
		}
	case BillUntrusted, BillInvented:
		if runErr == nil && rep.Trusted {
			e.blame(onDay(bd, s), "bill: a contradictory bill was trusted", "%s: %v", s, rep.Counts)
		}
		changed("an untrusted bill repaired")
		if s.Variant == BillUntrusted && runErr == nil {
			e.acceptChannel(bd, rep.RunID, s)
		}
	}
}

// acceptChannel: finance, having checked the untrusted bill's lines with the channel (they are
// true: only its summary is off), accepts the channel's side of each CHANNEL_ONLY and
// REFUND_CHANNEL_ONLY it found, through the apply path. The step's checks after every shared
// step, the later good bills' checks and the oracle's end state then hold it to what the
// channel did: each line applied once, whichever of the person and the bills came first.
func (e *execution) acceptChannel(bd BillDay, runID int64, s Step) {
	n, err := e.w.acceptChannel(runID)
	e.say("  accept_channel %s run %d: %d accepted, %v", bd, runID, n, err)
	e.accepted += n
	if err != nil {
		e.blame(onDay(bd, s), "accept_channel: failed", "%s: %v", s, err)
	}
}

// billed is the check after a good bill: every line of it is counted. A payment it shows makes
// the order PAID; a refund it shows of the payment the order holds is in refunded_fen (with
// every refund shown by earlier good bills: each counts once, so their sum is a floor).
func (e *execution) billed(m *member, bd BillDay, b *books, s Step) {
	for _, l := range m.h.Lines() {
		if l.Channel != bd.Channel || l.Day != bd.Day {
			continue
		}
		if l.Refund {
			m.billedRefund[l.RefundK] = true
		} else {
			m.billedPay[l.Attempt] = true
		}
	}
	if len(m.billedPay) > 0 && b.Status != StatusPaid {
		m.fail("step: a payment on a good bill is not applied", "after %s: books %s", s, b)
	}
	holder := slices.Index(m.ids.Txn, b.Txn)
	if holder < 0 {
		return
	}
	var floor int64
	for k := range m.billedRefund {
		if r := m.h.Refunds[k]; r.Attempt == holder {
			floor += r.Fen
		}
	}
	if b.RefundedFen < floor {
		m.fail("step: a refund on a good bill is not counted", "after %s: refunded_fen %d, the good bills so far show %d of refunds (books: %s)",
			s, b.RefundedFen, floor, b)
	}
}

// settle makes sure every source has been seen: every message delivered until acknowledged
// (three tries), every attempt asked about, every bill day run as the channel made it.
func (e *execution) settle() {
	e.parallel(func(m *member) {
		rng := rand.New(rand.NewPCG(m.h.Seed, 0x736574746c65)) // "settle"
		order := rng.Perm(len(m.acked))
		for _, n := range order {
			for try := 0; try < 3 && !m.acked[n]; try++ {
				acked, err := e.w.deliver(m, e.base, n)
				if err != nil {
					m.fail("delivery refused", "message %d (%s): %v", n, m.h.Messages()[n].Kind, err)
				}
				m.acked[n] = acked
			}
			if !m.acked[n] {
				m.fail("settle: a notification is never acknowledged", "message %d (%s) answered retry three times", n, m.h.Messages()[n].Kind)
			}
		}
		e.notified(m)
		for i, a := range m.h.Attempts {
			if err := e.w.query(a.Channel, m.ids.TradeNo); err != nil {
				m.fail("query failed", "attempt %d: %v", i, err)
			}
		}
	})
	for _, bd := range e.billDays() {
		e.sharedStep(Step{R: Rounds - 1, Op: OpBill, Channel: bd.Channel, Day: bd.Day}, Rounds-1)
	}
}

// notified is the check once every notification has been acknowledged, before any other
// source is asked again: the notifications alone state every payment and every refund (Alipay's
// last refund_fee states them all), so an order paid by any of them holds one, and its
// refunded_fen is already the channel's total. A refund that arrived before its payment and was
// acknowledged without a record fails here, even when a later bill repairs it.
func (e *execution) notified(m *member) {
	b, err := e.w.order(m.ids.TradeNo)
	if err != nil {
		m.fail("setup", "reading the books: %v", err)
		return
	}
	if len(m.h.Payers()) == 0 || slices.Contains(m.acked, false) {
		return
	}
	holder := slices.Index(m.ids.Txn, b.Txn)
	if holder < 0 {
		return // the final check tells what is wrong
	}
	if want := m.h.RefundedBefore(holder, Window+time.Hour); b.RefundedFen < want {
		m.fail("settle: a refund notified and acknowledged is not counted", "every notification acknowledged: refunded_fen %d, the channel refunded %d (books: %s)",
			b.RefundedFen, want, b)
	}
}

// billDays lists the bill days of every member, in day order.
func (e *execution) billDays() []BillDay {
	var out []BillDay
	for _, m := range e.members {
		for _, bd := range m.h.BillDays() {
			if !slices.Contains(out, bd) {
				out = append(out, bd)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return slices.Index(Channels, out[i].Channel) < slices.Index(Channels, out[j].Channel)
	})
	return out
}

// money is the final check of the order's money: its amount and currency are the history's,
// and the attempts recorded are the ones whose channel takes the currency, every one of them.
func (e *execution) money(m *member, b *books) {
	if b.AmountFen != m.h.AmountFen || b.Currency != m.h.Code() {
		m.fail("final: the order's amount or currency", "the order asks %s, the history %s (books: %s)", money.Format(b.AmountFen, b.Currency),
			money.Format(m.h.AmountFen, m.h.Code()), b)
	}
	var want []string
	for _, a := range m.h.Attempts {
		if !a.Refused {
			want = append(want, a.Channel)
		}
	}
	slices.Sort(want)
	if !slices.Equal(b.Attempts, want) {
		m.fail("final: the attempts recorded", "attempts on %v, want %v (refused in %s: the others) (books: %s)", b.Attempts, want, m.h.Code(), b)
	}
}

// final compares the books with the oracle, then re-runs every bill day and compares its
// classes, and the books again (a re-run changes nothing).
func (e *execution) final() {
	bs, err := e.w.read(e.members)
	if err != nil {
		e.fatal = append(e.fatal, err.Error())
		return
	}
	expected := map[*member]Expected{}
	for _, m := range e.members {
		b := bs[m.ids.TradeNo]
		e.say("final books: %s", b)
		e.money(m, b)
		holder := slices.Index(m.ids.Txn, b.Txn)
		if b.Txn == "" {
			holder = -1
		}
		if holder < 0 && len(m.h.Payers()) > 0 {
			m.fail("final: status "+b.Status+", want PAID", "books: %s", b)
			continue
		}
		exp, err := m.h.Expect(holder)
		if err != nil {
			m.fail("final: the order holds the wrong payment", "%v (books: %s)", err, b)
			continue
		}
		expected[m] = exp
		if b.Status != exp.Status {
			m.fail("final: status "+b.Status+", want "+exp.Status, "books: %s", b)
		}
		switch {
		case b.RefundedFen > exp.RefundedFen:
			m.fail("final: refunded_fen more than the channel refunded", "refunded_fen %d, the channel refunded %d (books: %s)", b.RefundedFen, exp.RefundedFen, b)
		case b.RefundedFen < exp.RefundedFen:
			m.fail("final: refunded_fen less than the channel refunded", "refunded_fen %d, the channel refunded %d (books: %s)", b.RefundedFen, exp.RefundedFen, b)
		}
		var want []string
		for _, a := range exp.Anomalies {
			want = append(want, a.Kind+" "+m.h.Attempts[a.Attempt].Channel+" "+m.ids.Txn[a.Attempt])
		}
		slices.Sort(want)
		for _, got := range b.Anomalies {
			if !slices.Contains(want, got) {
				m.fail("final: unexpected anomaly "+strings.Fields(got)[0], "anomalies %v, want %v (books: %s)", b.Anomalies, want, b)
			}
		}
		for _, w := range want {
			if !slices.Contains(b.Anomalies, w) {
				m.fail("final: missing anomaly "+strings.Fields(w)[0], "anomalies %v, want %v (books: %s)", b.Anomalies, want, b)
			}
		}
	}
	// The re-run of every day: each history's lines classed as the oracle says.
	for _, bd := range e.billDays() {
		var ms []Member
		want := map[string]int{}
		judged := true
		for _, m := range e.members {
			ms = append(ms, Member{m.h, m.ids})
			if _, ok := expected[m]; !ok && slices.Contains(m.h.BillDays(), bd) {
				judged = false
			}
			for class, n := range expected[m].Classes[bd] {
				want[class] += n
			}
		}
		file, ok := BillFile(e.base, bd, ms, BillOK, Target{})
		if !ok {
			continue
		}
		rep, err := e.w.runBill(bd, Date(e.base, bd), file, false)
		if err != nil {
			e.blame(onDay(bd, Step{}), "final: a good bill failed", "re-run of %s: %v", bd, err)
			continue
		}
		rows, err := e.w.classes(rep.RunID)
		if err != nil {
			e.fatal = append(e.fatal, err.Error())
			continue
		}
		for _, m := range e.members {
			if _, ok := expected[m]; !ok {
				continue // its books are wrong already: its lines cannot be judged
			}
			exp := expected[m].Classes[bd]
			got := rows[m.ids.TradeNo]
			for class, n := range got {
				if n != exp[class] {
					judged = false
					m.fail("final bill: "+class+" lines", "re-run of %s: %s rows %v, want %v (of the history's lines)", bd, m.ids.TradeNo, got, exp)
				}
			}
			for class, n := range exp {
				if class != ClassMatched && class != ClassRefundMatched && got[class] != n {
					judged = false
					m.fail("final bill: missing "+class, "re-run of %s: %s rows %v, want %v", bd, m.ids.TradeNo, got, exp)
				}
			}
		}
		if judged && !maps.Equal(rep.Counts, want) {
			// Every history's own rows are right, yet the counts differ (a line lost, or counted
			// under the wrong class of the two that keep no row): blame every history of the day.
			e.blame(onDay(bd, Step{}), "final bill: counts", "re-run of %s: counts %v, want %v (all histories of the day)", bd, rep.Counts, want)
		}
	}
	after, err := e.w.read(e.members)
	if err != nil {
		e.fatal = append(e.fatal, err.Error())
		return
	}
	for _, m := range e.members {
		if b, a := bs[m.ids.TradeNo], after[m.ids.TradeNo]; b.String() != a.String() {
			m.fail("final: a bill re-run changed the books", "%s -> %s", b, a)
		}
	}
}
