package apply

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/paygw/paygw/internal/batch"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Group apply: first-time payments in flight at the same moment share one transaction, the way
// InnoDB groups commits.
//
// At most `lanes` transactions of payments run at once (internal/batch). A payment that finds a
// lane free takes it and is applied at once, alone, exactly as on the single path: a quiet
// gateway adds no latency and no statement. While every lane is in MySQL, arriving payments wait
// in a queue, and the next caller to get a lane takes the whole queue (up to groupMax) into one
// transaction: natural batching, no timer.
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

type grouper struct {
	a *Applier
	q *batch.Queue[payment.Event, groupResult]

	groups, applied atomic.Int64 // groups committed, and the payments they applied
}

type groupItem = batch.Item[payment.Event, groupResult]

// groupResult is what became of one payment: applied by its group, applied alone by the caller
// that ran it, or left for its own caller to apply alone (alone).
type groupResult struct {
	outcome  payment.Outcome
	recordID int64
	err      error
	alone    bool
}

func newGrouper(a *Applier, lanes int) *grouper {
	g := &grouper{a: a}
	g.q = batch.New(lanes, groupMax, g.runAlone, g.run)
	return g
}

// runAlone applies a lone payment on the single path, at once.
func (g *grouper) runAlone(it *groupItem) {
	outcome, recordID, err := g.a.applyAlone(it.Ctx, it.Value)
	it.Answer(groupResult{outcome: outcome, recordID: recordID, err: err})
}

// groupable: a payment whose order is named for sure. Everything else takes the single path.
func groupable(ev payment.Event) bool {
	return ev.Kind == payment.KindPaid && ev.TradeNo != "" && !ev.TradeNoUnsure
}

// apply queues ev and returns once a transaction decided it, or with alone set when ev must be
// applied on the single path by the caller. A caller whose context ends first gets "retry";
// the redelivery finds what the group did.
func (g *grouper) apply(ctx context.Context, ev payment.Event) groupResult {
	r, err := g.q.Do(ctx, ev)
	if err != nil {
		return groupResult{err: err}
	}
	return r
}

// Queued is how many payments wait for a lane right now (0 with group apply off).
func (a *Applier) Queued() int {
	if a.group == nil {
		return 0
	}
	return a.group.q.Len()
}

// run applies several payments in one group.
func (g *grouper) run(batch []*groupItem) {
	// One payment per order in a group: a second one for the same order goes alone, after the
	// group (told so once the group is over, like every item that leaves the fast path).
	var in, later []*groupItem
	seen := make(map[string]bool, len(batch))
	for _, it := range batch {
		if seen[it.Value.TradeNo] {
			later = append(later, it)
			continue
		}
		seen[it.Value.TradeNo] = true
		in = append(in, it)
	}
	defer func() {
		for _, it := range later {
			it.Answer(groupResult{alone: true})
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
			it.Answer(groupResult{outcome: payment.OutcomeApplied, recordID: recordID})
		} else {
			it.Answer(groupResult{alone: true})
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(in[0].Ctx), ApplyTimeout)
	defer cancel()
	now := g.a.stamp()
	pays := make([]repository.PaidItem, len(in))
	for i, it := range in {
		pays[i] = repository.PaidItem{TradeNo: it.Value.TradeNo, Channel: it.Value.Channel, ChannelTxnID: it.Value.ChannelTxnID}
	}
	err = g.a.db.TryTx(ctx, func(tx *repository.Tx) error {
		applied = applied[:0]
		payable, err := tx.LockPayable(ctx, pays)
		if err != nil {
			return err
		}
		var items []repository.PaidItem
		var recs []repository.DoneRecord
		var evs []payment.Event
		for _, it := range in {
			ev := it.Value
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
		if n, err := tx.MarkPaidGroup(ctx, items, now); err != nil {
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
