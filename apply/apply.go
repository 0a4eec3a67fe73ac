// Package apply applies verified payment events exactly once. Apply is the one path every caller
// takes (the channels' notify handlers today), and it alone decides outcomes: a Redis fast path
// for repeats, then one MySQL transaction whose idempotent_record insert is the final defence.
package apply

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/batch"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// errTwin: a twin of this event is being applied right now; the channel should retry.
var errTwin = fmt.Errorf("%w: a twin notification is being applied", payment.ErrInFlight)

// doneTTL is how long a done marker lets repeats skip SQL. Channels retry for up to three days.
const doneTTL = 72 * time.Hour

// Applier holds what Apply needs.
type Applier struct {
	db       *repository.DB
	guard    *guard.Guard
	guardTTL time.Duration
	log      zerolog.Logger
	now      func() time.Time

	// TwinWait bounds how long a notification waits for an in-flight twin before it answers
	// "retry" (DefaultTwinWait unless changed before use).
	TwinWait time.Duration

	done  *doneCache // done markers this process has seen
	group *grouper   // nil: every event takes the single path

	afterCommit func() // tests only (export_test.go): runs between the commit and the markers
}

// doneCacheSize bounds the in-process copy of done markers: about 100 bytes an entry.
const doneCacheSize = 200_000

// DefaultTwinWait is short next to every channel's reply timeout (WeChat's 5 s is the least).
const DefaultTwinWait = time.Second

// ApplyTimeout is the longest any caller gives Apply (the handlers give each channel its own
// deadline, WeChat's shorter) and bounds one create: a stuck lock ends in "retry", not silence.
const ApplyTimeout = 8 * time.Second

// maxGuardTTL caps the trade guard's life. No holder works past ApplyTimeout, so a guard older
// than this was left by a process that died holding it; without the cap every delivery of that
// payment would be told "retry" for the whole idempotency.redis_ttl.
const maxGuardTTL = ApplyTimeout + 2*time.Second

// New builds an Applier; guardTTL is idempotency.redis_ttl (capped at maxGuardTTL).
func New(db *repository.DB, g *guard.Guard, guardTTL time.Duration, log zerolog.Logger) *Applier {
	guardTTL = min(guardTTL, maxGuardTTL)
	a := &Applier{db: db, guard: g, guardTTL: guardTTL, log: log, now: time.Now, TwinWait: DefaultTwinWait,
		done: newDoneCache(doneCacheSize, doneCacheAge, time.Now)}
	a.group = newGrouper(a, batch.DefaultLanes)
	return a
}

// SetGroupLanes sets how many payment transactions run at once before payments queue into
// groups; 0 turns group apply off (every event on the single path). Call it before use.
func (a *Applier) SetGroupLanes(n int) {
	a.group = nil
	if n > 0 {
		a.group = newGrouper(a, n)
	}
}

// The protocol below (fast path, transaction, post-commit markers, epochs) is modelled in
// apply/model/apply.pml and checked by spin: make model (see apply/model/README.md).

// Apply applies a verified event and returns what happened. A nil error means the outcome is
// durable (or the event is a repeat of a durable one). Errors mean nothing was changed and the
// channel must deliver again: payment.ErrInFlight, or a storage failure.
func (a *Applier) Apply(ctx context.Context, ev payment.Event) (payment.Outcome, error) {
	ev.Currency = strings.ToUpper(ev.Currency)
	biz, key := recordOf(ev)
	if ev.Kind == payment.KindRefund && key == "" {
		return "", errors.New("a refund event that names no refund, total or bill line") // a channel bug: never drop it
	}
	markers := markerKeys(ev)
	note := markers[len(markers)-1]
	ns := a.guard.Namespace() // the cache, like Redis, answers only for the database it saw
	if a.done.has(ns, markers[0]) && a.done.has(ns, note) {
		return payment.OutcomeRepeat, nil // seen by this process: no round trip at all
	}

	lock, repeat, err := a.checkAndLock(ctx, ev, ns, markers)
	if err != nil {
		return "", err
	}
	if repeat {
		return payment.OutcomeRepeat, nil
	}
	// On success the lock goes back with the done markers, in one round trip; on any other
	// return it is released alone. nil (Redis down, or an event type that takes none) releases
	// nothing.
	defer func() {
		if lock != nil {
			lock.Release(context.WithoutCancel(ctx))
		}
	}()

	outcome, recordID, err := a.transact(ctx, ev) // recordID: the record the done markers stand for
	switch {
	case errors.Is(err, payment.ErrConflict) && biz != "":
		// The record's unique key says a twin committed first. Our transaction is rolled back;
		// read the record afresh (not through the old transaction) to be sure it is there, and
		// journal this notification if its notify id is new.
		if _, err := a.db.GetRecord(ctx, biz, ev.Channel, key); err != nil {
			return "", fmt.Errorf("record vanished after duplicate key: %w", err)
		}
		if err := a.db.Journal(ctx, ev, payment.OutcomeRepeat, a.stamp()); err != nil {
			return "", err
		}
		outcome = payment.OutcomeRepeat
	case errors.Is(err, errUnknownOrder):
		return payment.OutcomeUnknownOrder, nil
	case err != nil:
		return "", err
	}
	if a.afterCommit != nil {
		a.afterCommit()
	}
	// The markers go under ns, read before the transaction, never under the namespace bound now:
	// an epoch that moved on since may belong to a database that lost this commit (spin's
	// MARK_NS_AT_WRITE, TestMarkersGoUnderTheNamespaceReadBeforeCommit).
	a.guard.MarkDoneAndRelease(context.WithoutCancel(ctx), ns, guardName(ev), lock, string(outcome), doneTTL, recordID, markers...)
	lock = nil
	a.done.add(ns, markers...)
	return outcome, nil
}

// transact applies ev in MySQL: a first-time payment in a group when others are in flight
// (group.go), anything else, and whatever a group leaves, in a transaction of its own.
func (a *Applier) transact(ctx context.Context, ev payment.Event) (payment.Outcome, int64, error) {
	// A refund must find a payment another Galera node committed before it came, and a payment
	// a refund another node kept pending for it: each would miss the other's write set not yet
	// applied here, and the refund would stay pending for good (make chaos-cluster found it).
	if ev.Kind == payment.KindPaid || ev.Kind == payment.KindRefund {
		if err := a.db.SyncWait(ctx); err != nil {
			return "", 0, err
		}
	}
	if a.group != nil && groupable(ev) {
		if r := a.group.apply(ctx, ev); !r.alone {
			return r.outcome, r.recordID, r.err
		}
	}
	return a.applyAlone(ctx, ev)
}

// applyAlone is the single path: one transaction for one event, retried on deadlocks.
func (a *Applier) applyAlone(ctx context.Context, ev payment.Event) (outcome payment.Outcome, recordID int64, err error) {
	err = a.db.InTx(ctx, func(tx *repository.Tx) error {
		var err error
		outcome, recordID, err = a.decide(ctx, tx, ev)
		return err
	})
	return outcome, recordID, err
}

// checkAndLock is the Redis fast path, one round trip in the common case: a done marker answers
// a repeat; otherwise the trade's guard is taken (other event types change no order and take
// none). When a twin holds the guard it waits up to TwinWait for the twin's done marker (a
// repeat) or for the guard to come free, then gives up with ErrInFlight: channels often send
// the same notification twice at once, and answering the second with success a few
// milliseconds later spares a retry. With Redis down a payment's repeat is told by one SELECT,
// and anything else carries on with no lock. A refund's repeat is told the same way.
func (a *Applier) checkAndLock(ctx context.Context, ev payment.Event, ns string, markers []string) (lock *guard.Lock, repeat bool, err error) {
	deadline := a.now().Add(a.TwinWait)
	for pause := 2 * time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var found []bool
		if ev.Kind == payment.KindOther {
			found, err = a.guard.DoneAll(ctx, guardName(ev), markers...)
		} else {
			found, lock, err = a.guard.CheckAndAcquire(ctx, guardName(ev), a.guardTTL, markers...)
		}
		switch {
		case errors.Is(err, guard.ErrUnavailable):
			biz, key := recordOf(ev)
			if biz == "" {
				return nil, false, nil // only payments and refunds have records to look up
			}
			recorded, journalled, err := a.db.Seen(ctx, biz, ev.Channel, key, ev.NotifyID)
			if err != nil || !recorded {
				return nil, false, err
			}
			return nil, true, a.repeated(ctx, ev, ns, markers, journalled)
		case found != nil && found[0]:
			return nil, true, a.repeated(ctx, ev, ns, markers, found[len(found)-1])
		case !errors.Is(err, guard.ErrHeld):
			return lock, false, err // taken (or, for other event types, none needed)
		}
		if a.now().Add(pause).After(deadline) {
			return nil, false, errTwin
		}
		select {
		case <-ctx.Done():
			return nil, false, errTwin
		case <-time.After(pause):
		}
	}
}

// repeated finishes a repeat: a payment already recorded but reaching us under a new notify id
// (TRADE_FINISHED after TRADE_SUCCESS) is journalled as a REPEAT on the way.
func (a *Applier) repeated(ctx context.Context, ev payment.Event, ns string, markers []string, journalled bool) error {
	if !journalled {
		if err := a.db.Journal(ctx, ev, payment.OutcomeRepeat, a.stamp()); err != nil {
			return err
		}
		a.guard.MarkDoneAndRelease(context.WithoutCancel(ctx), ns, guardName(ev), nil, string(payment.OutcomeRepeat), doneTTL, 0, markers[len(markers)-1])
	}
	a.done.add(ns, markers...)
	return nil
}

// ForgetMarkers drops this process's copy of the done markers: the database they described is
// not the one behind us any more (identity.Watcher calls it on a new epoch).
func (a *Applier) ForgetMarkers() { a.done.reset() }

// guardName is the trade's guard; a refund that names only the payment it undoes is guarded by
// that payment. It is also the hash tag of the event's done markers, so the guard and the markers
// share one Redis Cluster hash slot.
func guardName(ev payment.Event) string {
	if ev.TradeNo == "" {
		return "txn:" + ev.Channel + ":" + ev.ChannelTxnID
	}
	return "trade:" + ev.TradeNo
}

func (a *Applier) stamp() time.Time { return a.now().UTC().Truncate(time.Millisecond) }

// errUnknownOrder rolls the transaction back: nothing is written for an unknown trade_no, so the
// channel's retry finds a clean slate once the order exists.
var errUnknownOrder = errors.New("unknown trade_no")

// decide runs inside the one transaction and is the only place that picks an outcome.
func (a *Applier) decide(ctx context.Context, tx *repository.Tx, ev payment.Event) (payment.Outcome, int64, error) {
	now := a.stamp()
	if ev.TradeNoUnsure {
		// A trade_no taken from a field other integrations fill counts only if it names an order.
		if _, err := tx.LockOrder(ctx, ev.TradeNo); errors.Is(err, payment.ErrNotFound) {
			ev.Kind, ev.TradeNo = payment.KindOther, ""
		} else if err != nil {
			return "", 0, err
		}
	}
	var outcome payment.Outcome
	var recordID int64
	var err error
	switch ev.Kind {
	case payment.KindPaid:
		outcome, recordID, err = a.pay(ctx, tx, ev, now)
	case payment.KindRefund:
		outcome, recordID, err = a.refund(ctx, tx, &ev, now)
	case payment.KindClosed:
		outcome, err = closeTrade(ctx, tx, ev, now) // close.go
	case payment.KindPending:
		outcome, err = journalOnly(ctx, tx, &ev)
	default: // other event types are acknowledged and journalled, whatever they name
		outcome = payment.OutcomeJournalled
	}
	if err != nil {
		return outcome, 0, err
	}
	return outcome, recordID, tx.Journal(ctx, ev, outcome, now)
}

// pay applies a payment: the conditional WAIT_PAY -> PAID, else the order is read under its lock
// to tell why not. Refunds that arrived before this payment are counted in once it is recorded.
func (a *Applier) pay(ctx context.Context, tx *repository.Tx, ev payment.Event, now time.Time) (payment.Outcome, int64, error) {
	paidAt := ev.PaidAt
	if paidAt.IsZero() {
		paidAt = now
	}
	ok, err := tx.MarkPaid(ctx, ev.TradeNo, ev.Channel, ev.ChannelTxnID, ev.AmountFen, ev.Currency, paidAt.UTC(), now)
	if err != nil {
		return "", 0, err
	}
	outcome := payment.OutcomeApplied
	var order payment.Order
	if !ok {
		if order, err = tx.LockOrder(ctx, ev.TradeNo); errors.Is(err, payment.ErrNotFound) {
			return payment.OutcomeUnknownOrder, 0, errUnknownOrder
		} else if err != nil {
			return "", 0, err
		}
		if outcome = classify(order, ev); outcome == payment.OutcomeApplied {
			// A WAIT_PAY order that asks for this payment: only its pending refunds kept
			// MarkPaid from matching, and they are counted in below.
			if ok, err := tx.MarkPaidWithPending(ctx, ev.TradeNo, ev.Channel, ev.ChannelTxnID, ev.AmountFen, ev.Currency, paidAt.UTC(), now); err != nil {
				return "", 0, err
			} else if !ok {
				return "", 0, errors.New("order changed under its row lock")
			}
		}
	}
	recordID, err := a.insertRecord(ctx, tx, ev, repository.BizPayNotify, ev.ChannelTxnID, outcome)
	if err != nil {
		return "", 0, err // payment.ErrConflict: a repeat; the caller answers it after rollback
	}
	if outcome.IsAnomaly() {
		if err := tx.FlagAnomaly(ctx, paymentAnomaly(outcome, order, ev, now)); err != nil {
			return "", 0, err
		}
	}
	if !ok { // the fast update leaves out payments with refunds waiting for them
		if err := a.settlePending(ctx, tx, ev, outcome, order, now); err != nil {
			return "", 0, err
		}
	}
	return outcome, recordID, nil
}

// refund puts what a refund event states into the refund ledger (repository/refunds.go), once
// per statement (its record), and derives the order's refunded_fen from the ledger. Where the
// payment it undoes stands decides the statement's status:
//   - applied to an order: APPLIED, and refunded_fen becomes what the ledger says (REFUNDED),
//     unless that would pass what was paid (REFUND_EXCEEDS_PAYMENT: the statement is kept
//     REFUSED, the order untouched);
//   - recorded but not applied (an anomaly): ANOMALY, and the anomaly is marked refunded
//     (ANOMALY_REFUNDED);
//   - not seen yet: PENDING (REFUND_PENDING), counted once the payment applies, whether the
//     refund names an order of ours or none at all (Stripe Checkout's charge.refunded);
//   - naming an order that does not exist: nothing is written and the channel retries.
func (a *Applier) refund(ctx context.Context, tx *repository.Tx, ev *payment.Event, now time.Time) (payment.Outcome, int64, error) {
	var outcome payment.Outcome
	o, err := tx.LockOrderByChannelTxn(ctx, ev.Channel, ev.ChannelTxnID)
	switch {
	case err == nil:
		ev.TradeNo = o.TradeNo
		write := func(status string) error {
			_, err := putRefund(ctx, tx, *ev, status, now)
			return err
		}
		c := counted{key: refundKey(*ev), refundID: cmp.Or(ev.RefundID, ev.RefundBillKey)}
		if ev.RefundIsTotal {
			outcome, err = a.countTotal(ctx, tx, o, now, c, ev.RefundFen, write)
		} else {
			outcome, err = a.countRefund(ctx, tx, o, now, c, write)
		}
	case errors.Is(err, payment.ErrNotFound):
		outcome, err = a.refundUnapplied(ctx, tx, ev, now)
	}
	if err != nil {
		return "", 0, err
	}
	recordID, err := a.insertRecord(ctx, tx, *ev, repository.BizRefundNotify, refundKey(*ev), outcome)
	return outcome, recordID, err
}

// refundUnapplied records a refund whose payment is applied to no order: an anomaly's, or
// waiting for its payment.
func (a *Applier) refundUnapplied(ctx context.Context, tx *repository.Tx, ev *payment.Event, now time.Time) (payment.Outcome, error) {
	an, err := tx.LockPaymentAnomaly(ctx, ev.Channel, ev.ChannelTxnID)
	switch {
	case err == nil:
		ev.TradeNo = an.TradeNo
		if _, err := putRefund(ctx, tx, *ev, payment.RefundAnomaly, now); err != nil {
			return "", err
		}
		return payment.OutcomeAnomalyRefunded, tx.MarkAnomalyRefunded(ctx, an.Kind, ev.Channel, ev.ChannelTxnID)
	case !errors.Is(err, payment.ErrNotFound):
		return "", err
	}
	if ev.TradeNo != "" {
		if _, err := tx.LockOrder(ctx, ev.TradeNo); errors.Is(err, payment.ErrNotFound) {
			return payment.OutcomeUnknownOrder, errUnknownOrder
		} else if err != nil {
			return "", err
		}
	}
	_, err = putRefund(ctx, tx, *ev, payment.RefundPending, now)
	return payment.OutcomeRefundPending, err
}

// counted names the refund statement being counted: key, its anomaly's key should it exceed the
// payment; refundID, the refund its order.refunded event names ("" for a total naming none).
type counted struct {
	key, refundID string
}

// countRefund writes a statement about the payment order o holds (write, given the status to
// write it with) and sets refunded_fen to what the ledger then says: the larger of the sum of the
// payment's refunds and the largest running total stated for it. When that would pass what was
// paid, the statement is undone and written again REFUSED, and a REFUND_EXCEEDS_PAYMENT anomaly
// keyed by the statement (c.key) is flagged.
func (a *Applier) countRefund(ctx context.Context, tx *repository.Tx, o payment.Order, now time.Time, c counted, write func(status string) error) (payment.Outcome, error) {
	if err := tx.Savepoint(ctx); err != nil {
		return "", err
	}
	if err := write(payment.RefundApplied); err != nil {
		return "", err
	}
	items, total, err := tx.RefundSums(ctx, o.Channel, o.ChannelTxnID, payment.RefundApplied)
	if err != nil {
		return "", err
	}
	refunded := max(items, total, o.RefundedFen)
	if refunded > o.AmountFen {
		if err := tx.RollbackToSavepoint(ctx); err != nil {
			return "", err
		}
		if err := write(payment.RefundRefused); err != nil {
			return "", err
		}
		return payment.OutcomeRefundExceedsPayment, tx.FlagAnomaly(ctx, refundAnomaly(o, c.key, refunded, now))
	}
	return payment.OutcomeRefunded, setRefunded(ctx, tx, o, refunded, c.refundID, now)
}

// countTotal is countRefund for a running total (naming at most a refund without its amount): it
// adds no item's amount, so what refunded_fen becomes is known before the write. The locked
// order's refunded_fen is what the ledger says of its APPLIED rows (only this lock's holders
// change them), so the total makes it the larger of the two; only a total that would pass the
// payment takes countRefund's undo-and-refuse path.
func (a *Applier) countTotal(ctx context.Context, tx *repository.Tx, o payment.Order, now time.Time, c counted, stated int64, write func(status string) error) (payment.Outcome, error) {
	refunded := max(stated, o.RefundedFen)
	if refunded > o.AmountFen {
		return a.countRefund(ctx, tx, o, now, c, write)
	}
	if err := write(payment.RefundApplied); err != nil {
		return "", err
	}
	return payment.OutcomeRefunded, setRefunded(ctx, tx, o, refunded, c.refundID, now)
}

// setRefunded writes a locked order's refunded_fen when it changes, and with it the change's
// order.refunded event: refundID, and what it added to refunded_fen.
func setRefunded(ctx context.Context, tx *repository.Tx, o payment.Order, refunded int64, refundID string, now time.Time) error {
	if refunded == o.RefundedFen {
		return nil
	}
	if ok, err := tx.SetRefunded(ctx, o.TradeNo, refunded, refundID, refunded-o.RefundedFen, now); err != nil {
		return err
	} else if !ok {
		return errors.New("order changed under its row lock")
	}
	return nil
}

// putRefund writes what ev states into the ledger with the given status, and returns the item it
// wrote (zero for a running total):
//   - a running total raises the payment's TOTAL row, with the item of the refund it names (a
//     refused one keeps only that item, REFUSED);
//   - a refund named by its id (or by its bill line) is an item; one the ledger has already
//     learns its amount if it had none; a new one with an amount, stated by a notification or a
//     query, is the refund an id-less bill line recorded with that amount when there is one (the
//     bill could not say which it was). A bill's own lines are distinct refunds, never merged.
func putRefund(ctx context.Context, tx *repository.Tx, ev payment.Event, status string, now time.Time) (payment.Refund, error) {
	row := payment.Refund{Channel: ev.Channel, RefundID: cmp.Or(ev.RefundID, ev.RefundBillKey), Kind: payment.RefundItem,
		IDKnown: ev.RefundID != "", BillKey: ev.RefundBillKey, TradeNo: ev.TradeNo, ChannelTxnID: ev.ChannelTxnID,
		Currency: ev.Currency, Status: status, CreatedTime: now}
	if ev.RefundIsTotal && status != payment.RefundRefused {
		return payment.Refund{}, tx.RaiseRefundTotal(ctx, row, ev.RefundFen) // and its item, in one statement
	}
	if row.RefundID == "" {
		return payment.Refund{}, nil
	}
	if ev.RefundIsTotal { // an item without its amount: nothing to learn or adopt if it is there
		id, err := tx.InsertRefund(ctx, row)
		if errors.Is(err, payment.ErrConflict) {
			return tx.LockRefund(ctx, row.Channel, row.RefundID)
		}
		row.ID = id
		return row, err
	}
	row.AmountFen = &ev.RefundFen
	billed := ev.Source == payment.SourceBill
	cur, err := tx.LockRefund(ctx, row.Channel, row.RefundID)
	switch {
	case err == nil:
		if cur.AmountFen != nil || row.AmountFen == nil {
			return cur, nil // nothing it did not know
		}
		cur.AmountFen, cur.Status, cur.BillKey = row.AmountFen, status, cmp.Or(cur.BillKey, row.BillKey)
		if err := tx.UpdateRefund(ctx, cur); err != nil {
			return payment.Refund{}, err
		}
		if billed { // a bill's lines are distinct refunds: an id-less one is not this one
			return cur, nil
		}
		return cur, foldAnonymous(ctx, tx, &cur)
	case !errors.Is(err, payment.ErrNotFound):
		return payment.Refund{}, err
	}
	if row.IDKnown && row.AmountFen != nil && !billed {
		anon, err := tx.LockAnonymousItem(ctx, row.Channel, row.ChannelTxnID, *row.AmountFen)
		if err == nil {
			anon.RefundID, anon.IDKnown, anon.Status, anon.TradeNo = row.RefundID, true, status, cmp.Or(anon.TradeNo, row.TradeNo)
			return anon, tx.UpdateRefund(ctx, anon)
		} else if !errors.Is(err, payment.ErrNotFound) {
			return payment.Refund{}, err
		}
	}
	row.ID, err = tx.InsertRefund(ctx, row)
	return row, err
}

// foldAnonymous folds into r, a refund known by its id that has just learnt its amount, the item
// an id-less bill line recorded with that amount for the same payment: it was this refund.
func foldAnonymous(ctx context.Context, tx *repository.Tx, r *payment.Refund) error {
	if !r.IDKnown || r.BillKey != "" {
		return nil
	}
	anon, err := tx.LockAnonymousItem(ctx, r.Channel, r.ChannelTxnID, *r.AmountFen)
	if errors.Is(err, payment.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := tx.DeleteRefund(ctx, anon.ID); err != nil {
		return err
	}
	r.BillKey = anon.BillKey
	return tx.UpdateRefund(ctx, *r)
}

// settlePending counts in the ledger rows of a payment that waited for it, oldest first: against
// the order when the payment applied, against its anomaly when it did not.
func (a *Applier) settlePending(ctx context.Context, tx *repository.Tx, ev payment.Event, outcome payment.Outcome, o payment.Order, now time.Time) error {
	pending, err := tx.LockPendingRefunds(ctx, ev.Channel, ev.ChannelTxnID)
	if err != nil || len(pending) == 0 {
		return err
	}
	o.Channel, o.ChannelTxnID, o.TradeNo = ev.Channel, ev.ChannelTxnID, ev.TradeNo
	for _, p := range pending {
		p.TradeNo = ev.TradeNo
		if outcome.IsAnomaly() {
			p.Status = payment.RefundAnomaly
			if err := tx.UpdateRefund(ctx, p); err != nil {
				return err
			}
			if err := tx.MarkAnomalyRefunded(ctx, outcome, ev.Channel, ev.ChannelTxnID); err != nil {
				return err
			}
			continue
		}
		c := counted{key: p.RefundID, refundID: p.RefundID}
		if p.Kind == payment.RefundTotal {
			c.refundID = ""
		}
		res, err := a.countRefund(ctx, tx, o, now, c, func(status string) error {
			p.Status = status
			return tx.UpdateRefund(ctx, p)
		})
		if err != nil {
			return err
		}
		if res == payment.OutcomeRefunded {
			if o, err = tx.LockOrder(ctx, ev.TradeNo); err != nil {
				return err
			}
		}
	}
	return nil
}

// strandedBatch bounds one SettleStranded call; the rest wait for the next.
const strandedBatch = 100

// SettleStranded counts in refunds left PENDING although their payment is recorded: a refund
// that committed while its payment was being applied, where neither transaction could see the
// other's row. It returns how many payments it settled. The reconciliation job calls it on every
// run, as the sweeper of these.
func (a *Applier) SettleStranded(ctx context.Context) (int, error) {
	list, err := a.db.StrandedRefunds(ctx, strandedBatch)
	if err != nil {
		return 0, err
	}
	for i, p := range list {
		err := a.db.InTx(ctx, func(tx *repository.Tx) error {
			ev := payment.Event{Channel: p.Channel, ChannelTxnID: p.ChannelTxnID}
			o, err := tx.LockOrderByChannelTxn(ctx, p.Channel, p.ChannelTxnID)
			if err == nil {
				ev.TradeNo = o.TradeNo
				return a.settlePending(ctx, tx, ev, payment.OutcomeRepeat, o, a.stamp())
			} else if !errors.Is(err, payment.ErrNotFound) {
				return err
			}
			an, err := tx.LockPaymentAnomaly(ctx, p.Channel, p.ChannelTxnID)
			if err != nil {
				return err
			}
			ev.TradeNo = an.TradeNo
			return a.settlePending(ctx, tx, ev, an.Kind, payment.Order{}, a.stamp())
		})
		if err != nil {
			return i, err
		}
	}
	return len(list), nil
}

// refundKey names a refund statement once: the refund's id (or its bill line's key) for a refund
// stated with its own amount; for a running total, the total it states, under the refund that
// caused it when the source names one, else under the payment.
func refundKey(ev payment.Event) string {
	switch {
	case ev.RefundIsTotal:
		return cmp.Or(ev.RefundID, repository.TotalRefundID(ev.ChannelTxnID)) + "@" + strconv.FormatInt(ev.RefundFen, 10)
	case ev.RefundID != "":
		return ev.RefundID
	}
	return ev.RefundBillKey
}

// insertRecord writes the event's idempotent_record, final from birth. Returns
// payment.ErrConflict when a twin's is there already.
func (a *Applier) insertRecord(ctx context.Context, tx *repository.Tx, ev payment.Event, biz, key string, outcome payment.Outcome) (int64, error) {
	result, _ := json.Marshal(recordResult{Outcome: outcome, TradeNo: ev.TradeNo}) // cannot fail
	return tx.InsertDoneRecord(ctx, biz, ev.Channel, key, hash(ev.Raw), result)
}

// journalOnly is the outcome of an event that changes no payment state: journalled, provided
// its order exists here. For an unknown order nothing is written and the channel retries, as for
// a payment: the notification may have outrun the order, or reached the wrong deployment.
func journalOnly(ctx context.Context, tx *repository.Tx, ev *payment.Event) (payment.Outcome, error) {
	if _, err := tx.LockOrder(ctx, ev.TradeNo); errors.Is(err, payment.ErrNotFound) {
		return payment.OutcomeUnknownOrder, errUnknownOrder
	} else if err != nil {
		return "", err
	}
	return payment.OutcomeJournalled, nil
}

// classify explains why a payment did not match a WAIT_PAY order with its amount and currency,
// or says it does match (an order whose pending refunds kept the fast update from matching).
func classify(o payment.Order, ev payment.Event) payment.Outcome {
	switch o.Status {
	case payment.OrderClosed:
		return payment.OutcomePaidAfterClose
	case payment.OrderPaid:
		if o.Channel == ev.Channel && o.ChannelTxnID == ev.ChannelTxnID {
			return payment.OutcomeRepeat // applied before its record existed (repaired data)
		}
		return payment.OutcomeDuplicatePayment
	}
	if o.AmountFen == ev.AmountFen && o.Currency == ev.Currency {
		return payment.OutcomeApplied
	}
	return payment.OutcomeAmountMismatch
}

func paymentAnomaly(outcome payment.Outcome, o payment.Order, ev payment.Event, now time.Time) payment.Anomaly {
	expected := o.AmountFen
	var detail string
	switch outcome {
	case payment.OutcomeAmountMismatch:
		detail = fmt.Sprintf("order asks %d %s, channel paid %d %s", o.AmountFen, o.Currency, ev.AmountFen, ev.Currency)
	case payment.OutcomePaidAfterClose:
		detail = "payment arrived for a CLOSED order: refund or reopen by hand"
	case payment.OutcomeDuplicatePayment:
		detail = fmt.Sprintf("order already PAID by %s %s: refund this payment", o.Channel, o.ChannelTxnID)
	}
	return payment.Anomaly{
		Kind: outcome, TradeNo: ev.TradeNo, Channel: ev.Channel, ChannelTxnID: ev.ChannelTxnID,
		AmountFen: ev.AmountFen, Currency: ev.Currency, ExpectedAmountFen: &expected, Detail: detail, CreatedTime: now,
	}
}

// refundAnomaly is a refund statement that would take refunded_fen to refunded, past what was
// paid. It is keyed by the statement, so every such statement is flagged once.
func refundAnomaly(o payment.Order, key string, refunded int64, now time.Time) payment.Anomaly {
	return payment.Anomaly{
		Kind: payment.OutcomeRefundExceedsPayment, TradeNo: o.TradeNo, Channel: o.Channel, ChannelTxnID: key,
		AmountFen: refunded, Currency: o.Currency, ExpectedAmountFen: &o.AmountFen, CreatedTime: now,
		Detail: fmt.Sprintf("refund %s of payment %s would make %d refunded of %d paid: order untouched",
			key, o.ChannelTxnID, refunded, o.AmountFen),
	}
}

// recordResult is the result_json of a payment's or a refund's idempotent_record.
type recordResult struct {
	Outcome payment.Outcome `json:"outcome"`
	TradeNo string          `json:"trade_no"`
}

// recordOf names the idempotent_record that makes an event apply once: a payment's is keyed by
// its channel transaction id, a refund's by the channel's refund id. Other events have none.
func recordOf(ev payment.Event) (biz, key string) {
	switch ev.Kind {
	case payment.KindPaid:
		return repository.BizPayNotify, ev.ChannelTxnID
	case payment.KindRefund:
		return repository.BizRefundNotify, refundKey(ev)
	}
	return "", ""
}

// markerKeys names an event's done markers, the most telling first: a payment or refund by its
// record key, then every event by its notification id (its journal key).
func markerKeys(ev payment.Event) []string {
	note := "note:" + ev.Channel + ":" + ev.NotifyID
	switch ev.Kind {
	case payment.KindPaid:
		return []string{"pay:" + ev.Channel + ":" + ev.ChannelTxnID, note}
	case payment.KindRefund:
		return []string{"refund:" + ev.Channel + ":" + refundKey(ev), note}
	}
	return []string{note}
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
