package apply

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Group apply: first-time payments in flight at the same moment share one transaction, the way
// InnoDB groups commits.
//
// At most `lanes` transactions of payments run at once. A payment that finds a lane free takes it
// and is applied at once, alone, exactly as on the single path: a quiet gateway adds no latency
// and no statement. While every lane is in MySQL, arriving payments wait in a queue, and the next
// caller to get a lane takes the whole queue (up to groupMax) into one transaction: natural
// batching, no timer.
//
// A group's transaction locks, in one SELECT ... FOR UPDATE, those of its orders that are
// WAIT_PAY with no refund pending; then one UPDATE moves those whose payment matches to PAID,
// one INSERT writes their idempotent_records, one their journal rows, and COMMIT. Each payment's
// update and record commit together or not at all, as on the single path. A payment that leaves
// the fast path (its order did not match, or a second payment for an order already in the group)
// is applied alone after the group commits. A group that fails (deadlock, a duplicate key, a
// lost connection, an ambiguous COMMIT) has each of its payments applied alone, where InTx
// retries and the unique keys tell what the group did. No caller hears "applied" before the
// COMMIT that holds its payment was acknowledged. Modelled in apply/model/apply.pml.

// groupMax caps a group: about 64 x 13 bound values in its largest statement.
const groupMax = 64

// DefaultGroupLanes is how many payment transactions run at once before payments queue into
// groups.
const DefaultGroupLanes = 2

type grouper struct {
	a     *Applier
	lanes chan struct{}

	mu      sync.Mutex
	pending []*groupItem

	groups, applied atomic.Int64 // groups committed, and the payments they applied
}

type groupItem struct {
	ctx  context.Context
	ev   payment.Event
	done chan groupResult // buffered: whoever runs the item never waits on its caller
}

// groupResult is what became of one payment: applied by its group, applied alone by the caller
// that ran it, or left for its own caller to apply alone (alone).
type groupResult struct {
	outcome  payment.Outcome
	recordID int64
	err      error
	alone    bool
}

func newGrouper(a *Applier, lanes int) *grouper {
	return &grouper{a: a, lanes: make(chan struct{}, lanes)}
}

// groupable: a payment whose order is named for sure. Everything else takes the single path.
func groupable(ev payment.Event) bool {
	return ev.Kind == payment.KindPaid && ev.TradeNo != "" && !ev.TradeNoUnsure
}

// apply queues ev and returns once a transaction decided it, or with alone set when ev must be
// applied on the single path by the caller. Whoever gets a lane while its own payment is still
// queued runs the queue as it stands, its own payment with others'. A caller whose payment
// another lane took only waits for the answer: it never runs others' payments, which would
// delay its own reply.
func (g *grouper) apply(ctx context.Context, ev payment.Event) groupResult {
	it := &groupItem{ctx: ctx, ev: ev, done: make(chan groupResult, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, it)
	g.mu.Unlock()
	for g.isPending(it) {
		select {
		case r := <-it.done: // another lane took it and answered meanwhile
			return r
		case g.lanes <- struct{}{}:
			g.runLane(it)
		case <-ctx.Done():
			if g.withdraw(it) {
				return groupResult{err: ctx.Err()}
			}
		}
	}
	// A transaction has it.
	select {
	case r := <-it.done:
		return r
	case <-ctx.Done():
		select {
		case r := <-it.done: // answered at the same moment: the answer wins
			return r
		default:
			return groupResult{err: ctx.Err()} // "retry"; the redelivery finds what the group did
		}
	}
}

// runLane runs one group from the queue on the lane the caller holds, unless the caller's own
// payment was taken by another lane meanwhile; the lane is freed whatever happens.
func (g *grouper) runLane(it *groupItem) {
	defer func() { <-g.lanes }()
	if g.isPending(it) {
		g.run(g.take())
	}
}

// take empties the queue into one group (groupMax at most; the rest waits for the next lane).
func (g *grouper) take() []*groupItem {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.pending), groupMax)
	batch := slices.Clone(g.pending[:n])
	g.pending = slices.Delete(g.pending, 0, n)
	return batch
}

// Queued is how many payments wait for a lane right now (0 with group apply off).
func (a *Applier) Queued() int {
	if a.group == nil {
		return 0
	}
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	return len(a.group.pending)
}

func (g *grouper) isPending(it *groupItem) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.pending, it)
}

// withdraw takes it out of the queue if no transaction has taken it yet.
func (g *grouper) withdraw(it *groupItem) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.pending, it)
	if i >= 0 {
		g.pending = slices.Delete(g.pending, i, i+1)
	}
	return i >= 0
}

// run applies a batch: one payment alone on the single path, several in one group.
func (g *grouper) run(batch []*groupItem) {
	switch len(batch) {
	case 0:
		return
	case 1:
		it := batch[0]
		outcome, recordID, err := g.a.applyAlone(it.ctx, it.ev)
		it.done <- groupResult{outcome: outcome, recordID: recordID, err: err}
		return
	}
	// One payment per order in a group: a second one for the same order goes alone, after the
	// group (told so once the group is over, like every item that leaves the fast path).
	var in, later []*groupItem
	seen := make(map[string]bool, len(batch))
	for _, it := range batch {
		if seen[it.ev.TradeNo] {
			later = append(later, it)
			continue
		}
		seen[it.ev.TradeNo] = true
		in = append(in, it)
	}
	defer func() {
		for _, it := range later {
			it.done <- groupResult{alone: true}
		}
	}()
	applied, recordID, err := g.commit(in)
	if err == nil && len(applied) > 0 {
		g.groups.Add(1)
		g.applied.Add(int64(len(applied)))
		g.a.db.Metrics.ApplyGroup(len(applied))
	}
	for _, it := range in {
		if err == nil && slices.Contains(applied, it) {
			it.done <- groupResult{outcome: payment.OutcomeApplied, recordID: recordID}
		} else {
			it.done <- groupResult{alone: true}
		}
	}
}

// errGroupRace: an order the group locked did not move to PAID. It cannot happen under the row
// locks; if it does, the group rolls back and its payments go alone.
var errGroupRace = errors.New("a locked order did not move to PAID")

// commit runs the group's transaction once and returns the items it applied and the first of
// their record ids (every record of the group commits with it, so any of them vouches for all).
func (g *grouper) commit(in []*groupItem) (applied []*groupItem, recordID int64, err error) {
	// The group outlives no caller by much: the first item's values, none of its cancellation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(in[0].ctx), ApplyTimeout)
	defer cancel()
	now := g.a.stamp()
	tradeNos := make([]string, len(in))
	for i, it := range in {
		tradeNos[i] = it.ev.TradeNo
	}
	err = g.a.db.TryTx(ctx, func(tx *repository.Tx) error {
		applied = applied[:0]
		payable, err := tx.LockPayable(ctx, tradeNos)
		if err != nil {
			return err
		}
		var items []repository.PaidItem
		var recs []repository.DoneRecord
		var evs []payment.Event
		for _, it := range in {
			ev := it.ev
			if o, ok := payable[ev.TradeNo]; !ok || o.AmountFen != ev.AmountFen || o.Currency != ev.Currency {
				continue // the single path tells why
			}
			paidAt := ev.PaidAt
			if paidAt.IsZero() {
				paidAt = now
			}
			result, _ := json.Marshal(recordResult{Outcome: payment.OutcomeApplied, TradeNo: ev.TradeNo}) // cannot fail
			applied = append(applied, it)
			items = append(items, repository.PaidItem{TradeNo: ev.TradeNo, Channel: ev.Channel, ChannelTxnID: ev.ChannelTxnID,
				AmountFen: ev.AmountFen, Currency: ev.Currency, PaidAt: paidAt.UTC()})
			recs = append(recs, repository.DoneRecord{BizType: repository.BizPayNotify, Scope: ev.Channel, Key: ev.ChannelTxnID,
				Hash: hash(ev.Raw), Result: result})
			evs = append(evs, ev)
		}
		if len(items) == 0 {
			return nil
		}
		if n, err := tx.MarkPaidGroup(ctx, items); err != nil {
			return err
		} else if n != int64(len(items)) {
			return errGroupRace
		}
		if recordID, err = tx.InsertDoneRecords(ctx, recs); err != nil {
			return err
		}
		return tx.JournalGroup(ctx, evs, payment.OutcomeApplied, now)
	})
	if err != nil {
		return nil, 0, err
	}
	return applied, recordID, nil
}
