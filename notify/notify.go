// Package notify applies verified payment events exactly once. Apply is the one path: the HTTP
// notify handlers and the reconciliation job both call it, and it alone decides outcomes.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// ErrInFlight: a twin of this event is being applied right now; the channel should retry.
var ErrInFlight = errors.New("a twin notification is in flight")

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

	done *doneCache // done markers this process has seen
}

// doneCacheSize bounds the in-process copy of done markers: about 100 bytes an entry.
const doneCacheSize = 200_000

// DefaultTwinWait is short next to every channel's reply timeout (UnionPay's 10 s is the least).
const DefaultTwinWait = time.Second

// ApplyTimeout bounds the work on one notification (and one create): well inside every
// channel's reply timeout (UnionPay's 10 s is the shortest), so a stuck lock ends in "retry",
// not in silence.
const ApplyTimeout = 8 * time.Second

// maxGuardTTL caps the trade guard's life. No holder works past ApplyTimeout, so a guard older
// than this was left by a process that died holding it; without the cap every delivery of that
// payment would be told "retry" for the whole idempotency.redis_ttl.
const maxGuardTTL = ApplyTimeout + 2*time.Second

// New builds an Applier; guardTTL is idempotency.redis_ttl (capped at maxGuardTTL).
func New(db *repository.DB, g *guard.Guard, guardTTL time.Duration, log zerolog.Logger) *Applier {
	guardTTL = min(guardTTL, maxGuardTTL)
	return &Applier{db: db, guard: g, guardTTL: guardTTL, log: log, now: time.Now, TwinWait: DefaultTwinWait,
		done: newDoneCache(doneCacheSize)}
}

// Apply applies a verified event and returns what happened. A nil error means the outcome is
// durable (or the event is a repeat of a durable one). Errors mean nothing was changed and the
// channel must deliver again: ErrInFlight, or a storage failure.
func (a *Applier) Apply(ctx context.Context, ev payment.Event) (payment.Outcome, error) {
	ev.Currency = strings.ToUpper(ev.Currency)
	markers := markerKeys(ev)
	note := markers[len(markers)-1]
	if a.done.has(markers[0]) && a.done.has(note) {
		return payment.OutcomeRepeat, nil // seen by this process: no round trip at all
	}

	lock, repeat, err := a.checkAndLock(ctx, ev, markers)
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

	var outcome payment.Outcome
	err = a.db.InTx(ctx, func(tx *repository.Tx) error {
		var err error
		outcome, err = a.decide(ctx, tx, ev)
		return err
	})
	switch {
	case errors.Is(err, repository.ErrDuplicate):
		// The record's unique key says a twin committed first. Our transaction is rolled back;
		// read the record afresh (not through the old transaction) to be sure it is there, and
		// journal this notification if its notify id is new.
		if _, err := a.db.GetRecord(ctx, repository.BizPayNotify, ev.Channel, ev.ChannelTxnID); err != nil {
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
	a.guard.MarkDoneAndRelease(context.WithoutCancel(ctx), lock, string(outcome), doneTTL, markers...)
	lock = nil
	a.done.add(markers...)
	return outcome, nil
}

// checkAndLock is the Redis fast path, one round trip in the common case: a done marker answers
// a repeat; otherwise the trade's guard is taken (other event types change no order and take
// none). When a twin holds the guard it waits up to TwinWait for the twin's done marker (a
// repeat) or for the guard to come free, then gives up with ErrInFlight: channels often send
// the same notification twice at once, and answering the second with success a few
// milliseconds later spares a retry. With Redis down a payment's repeat is told by one SELECT,
// and anything else carries on with no lock.
func (a *Applier) checkAndLock(ctx context.Context, ev payment.Event, markers []string) (lock *guard.Lock, repeat bool, err error) {
	deadline := a.now().Add(a.TwinWait)
	for pause := 2 * time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var found []bool
		if ev.Kind == payment.KindOther {
			found, err = a.guard.DoneAll(ctx, markers...)
		} else {
			found, lock, err = a.guard.CheckAndAcquire(ctx, guardName(ev), a.guardTTL, markers...)
		}
		switch {
		case errors.Is(err, guard.ErrUnavailable):
			if ev.Kind != payment.KindPaid {
				return nil, false, nil // only payments have records to look up
			}
			recorded, journalled, err := a.db.Seen(ctx, ev.Channel, ev.ChannelTxnID, ev.NotifyID)
			if err != nil || !recorded {
				return nil, false, err
			}
			return nil, true, a.repeated(ctx, ev, markers, journalled)
		case found != nil && found[0]:
			return nil, true, a.repeated(ctx, ev, markers, found[len(found)-1])
		case !errors.Is(err, guard.ErrHeld):
			return lock, false, err // taken (or, for other event types, none needed)
		}
		if a.now().Add(pause).After(deadline) {
			return nil, false, ErrInFlight
		}
		select {
		case <-ctx.Done():
			return nil, false, ErrInFlight
		case <-time.After(pause):
		}
	}
}

// repeated finishes a repeat: a payment already recorded but reaching us under a new notify id
// (TRADE_FINISHED after TRADE_SUCCESS) is journalled as a REPEAT on the way.
func (a *Applier) repeated(ctx context.Context, ev payment.Event, markers []string, journalled bool) error {
	if !journalled {
		if err := a.db.Journal(ctx, ev, payment.OutcomeRepeat, a.stamp()); err != nil {
			return err
		}
		a.guard.MarkAllDone(context.WithoutCancel(ctx), string(payment.OutcomeRepeat), doneTTL, markers[len(markers)-1])
	}
	a.done.add(markers...)
	return nil
}

// guardName is the trade's guard; a refund that names only the payment it undoes is guarded by
// that payment.
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
func (a *Applier) decide(ctx context.Context, tx *repository.Tx, ev payment.Event) (payment.Outcome, error) {
	now := a.stamp()
	var outcome payment.Outcome
	switch ev.Kind {
	case payment.KindPaid:
		paidAt := ev.PaidAt
		if paidAt.IsZero() {
			paidAt = now
		}
		ok, err := tx.MarkPaid(ctx, ev.TradeNo, ev.Channel, ev.ChannelTxnID, ev.AmountFen, ev.Currency, paidAt.UTC())
		if err != nil {
			return "", err
		}
		outcome = payment.OutcomeApplied
		var order repository.Order
		if !ok {
			if order, err = tx.LockOrder(ctx, ev.TradeNo); errors.Is(err, repository.ErrNotFound) {
				return payment.OutcomeUnknownOrder, errUnknownOrder
			} else if err != nil {
				return "", err
			}
			outcome = classify(order, ev)
		}
		result, _ := json.Marshal(recordResult{Outcome: outcome, TradeNo: ev.TradeNo}) // cannot fail
		if err := tx.InsertDoneRecord(ctx, repository.BizPayNotify, ev.Channel, ev.ChannelTxnID, hash(ev.Raw), result); err != nil {
			return "", err // ErrDuplicate: a repeat; the caller answers it after rollback
		}
		if outcome.IsAnomaly() {
			if err := tx.FlagAnomaly(ctx, anomaly(outcome, order, ev, now)); err != nil {
				return "", err
			}
		}
	case payment.KindClosed:
		ok, err := tx.MarkClosed(ctx, ev.TradeNo)
		if err != nil {
			return "", err
		}
		outcome = payment.OutcomeClosed
		if !ok {
			if outcome, err = journalOnly(ctx, tx, &ev); err != nil {
				return outcome, err
			}
		}
	case payment.KindPending, payment.KindRefund:
		var err error
		if outcome, err = journalOnly(ctx, tx, &ev); err != nil {
			return outcome, err
		}
	default: // other event types are acknowledged and journalled, whatever they name
		outcome = payment.OutcomeJournalled
	}
	return outcome, tx.Journal(ctx, ev, outcome, now)
}

// journalOnly is the outcome of an event that changes no payment state: journalled, provided
// its order exists here; ev.TradeNo is then that order's. A refund is looked up first by the
// payment it undoes (every channel names it: Alipay's trade_no, WeChat's transaction_id,
// Stripe's PaymentIntent, UnionPay's origQryId), because its own order number may be the
// merchant's refund number; anything else by trade_no. For an unknown order nothing is written
// and the channel retries, as for a payment: the notification may have outrun the order, or
// reached the wrong deployment.
func journalOnly(ctx context.Context, tx *repository.Tx, ev *payment.Event) (payment.Outcome, error) {
	var o repository.Order
	err := repository.ErrNotFound
	if ev.Kind == payment.KindRefund && ev.ChannelTxnID != "" {
		o, err = tx.LockOrderByChannelTxn(ctx, ev.Channel, ev.ChannelTxnID)
	}
	if errors.Is(err, repository.ErrNotFound) && ev.TradeNo != "" {
		o, err = tx.LockOrder(ctx, ev.TradeNo)
	}
	if errors.Is(err, repository.ErrNotFound) {
		return payment.OutcomeUnknownOrder, errUnknownOrder
	} else if err != nil {
		return "", err
	}
	ev.TradeNo = o.TradeNo
	return payment.OutcomeJournalled, nil
}

// classify explains why a payment did not match a WAIT_PAY order with its amount and currency.
func classify(o repository.Order, ev payment.Event) payment.Outcome {
	switch o.Status {
	case repository.OrderClosed:
		return payment.OutcomePaidAfterClose
	case repository.OrderPaid:
		if deref(o.Channel) == ev.Channel && deref(o.ChannelTxnID) == ev.ChannelTxnID {
			return payment.OutcomeRepeat // applied before its record existed (repaired data)
		}
		return payment.OutcomeDuplicatePayment
	default:
		return payment.OutcomeAmountMismatch
	}
}

func anomaly(outcome payment.Outcome, o repository.Order, ev payment.Event, now time.Time) repository.Anomaly {
	expected := o.AmountFen
	var detail string
	switch outcome {
	case payment.OutcomeAmountMismatch:
		detail = fmt.Sprintf("order asks %d %s, channel paid %d %s", o.AmountFen, o.Currency, ev.AmountFen, ev.Currency)
	case payment.OutcomePaidAfterClose:
		detail = "payment arrived for a CLOSED order: refund or reopen by hand"
	case payment.OutcomeDuplicatePayment:
		detail = fmt.Sprintf("order already PAID by %s %s: refund this payment", deref(o.Channel), deref(o.ChannelTxnID))
	}
	return repository.Anomaly{
		Kind: string(outcome), TradeNo: ev.TradeNo, Channel: ev.Channel, ChannelTxnID: ev.ChannelTxnID,
		AmountFen: ev.AmountFen, Currency: ev.Currency, ExpectedAmountFen: &expected, Detail: detail, CreatedTime: now,
	}
}

// recordResult is the result_json of a payment's idempotent_record.
type recordResult struct {
	Outcome payment.Outcome `json:"outcome"`
	TradeNo string          `json:"trade_no"`
}

// markerKeys names an event's done markers, the most telling first: a payment by its channel
// transaction (its record key), then every event by its notification id (its journal key).
func markerKeys(ev payment.Event) []string {
	note := "note:" + ev.Channel + ":" + ev.NotifyID
	if ev.Kind == payment.KindPaid {
		return []string{"pay:" + ev.Channel + ":" + ev.ChannelTxnID, note}
	}
	return []string{note}
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
