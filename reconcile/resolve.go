package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// The actions of a person's decision on a discrepancy (POST /v1/discrepancies/{id}/resolve).
const (
	// ActionAcceptChannel: the channel is right. For CHANNEL_ONLY and REFUND_CHANNEL_ONLY only:
	// the bill's line is applied through Apply, as the bill run's repair would have (the same
	// event, so it is applied once whoever applies it first).
	ActionAcceptChannel = "accept_channel"
	// The others fit every class and move no money: paygw records the decision only.
	ActionAcceptLocal     = "accept_local"     // paygw's records are right
	ActionWriteOff        = "write_off"        // the difference is written off
	ActionRefundedOffline = "refunded_offline" // the buyer was refunded outside paygw
)

// maxResolveNote bounds a decision's note (resolve_note is VARCHAR(512)).
const maxResolveNote = 512

// Actions lists the resolve actions.
var Actions = []string{ActionAcceptChannel, ActionAcceptLocal, ActionWriteOff, ActionRefundedOffline}

// AcceptChannelClasses are the classes accept_channel applies.
var AcceptChannelClasses = []string{ClassChannelOnly, ClassRefundChannelOnly}

var (
	// ErrBadResolve: an unknown action, or a note that is empty or too long.
	ErrBadResolve = errors.New("invalid resolve")
	// ErrWrongClass: accept_channel on a class it does not fit.
	ErrWrongClass = errors.New("accept_channel fits CHANNEL_ONLY and REFUND_CHANNEL_ONLY only")
)

// BillLineRef is a bill line as a discrepancy keeps it: the staged line, and for a refund line
// the key its refund is known by in the ledger (BillKey; see refundLines).
type BillLineRef struct {
	repository.BillLine
	BillKey string `json:"bill_key,omitempty"`
}

// BillEvent is the event that applies bill line l of channel: a payment, or a refund. The bill
// run's repairs and accept_channel both apply it, so Apply's idempotency (by the notify id)
// makes it happen once.
func BillEvent(channel string, l BillLineRef) payment.Event {
	raw, _ := json.Marshal(l.BillLine) // plain values: cannot fail
	if l.Kind == "REFUND" {
		return payment.Event{Channel: channel, NotifyID: "bill:refund:" + cmp.Or(l.RefundID, l.BillKey), TradeNo: l.TradeNo,
			ChannelTxnID: l.ChannelTxnID, Kind: payment.KindRefund, Status: "bill", Currency: l.Currency, RefundID: l.RefundID,
			RefundBillKey: l.BillKey, RefundFen: l.AmountFen, Raw: raw, Source: payment.SourceBill}
	}
	return payment.Event{Channel: channel, NotifyID: "bill:" + l.ChannelTxnID, TradeNo: l.TradeNo, ChannelTxnID: l.ChannelTxnID,
		Kind: payment.KindPaid, Status: "bill", AmountFen: l.AmountFen, Currency: l.Currency, PaidAt: l.Time, Raw: raw,
		Source: payment.SourceBill}
}

// EventApplier applies a verified event exactly once (apply.Applier).
type EventApplier interface {
	Apply(ctx context.Context, ev payment.Event) (payment.Outcome, error)
}

// CheckResolve checks a resolve's action and note, as a client sends them.
func CheckResolve(action, note string) error {
	if !slices.Contains(Actions, action) {
		return fmt.Errorf("%w: action must be one of accept_channel, accept_local, write_off, refunded_offline", ErrBadResolve)
	}
	if note == "" || len(note) > maxResolveNote {
		return fmt.Errorf("%w: note must be 1-%d bytes", ErrBadResolve, maxResolveNote)
	}
	return nil
}

// ResolveDiscrepancy records a person's decision on the open discrepancy id, audited as e (its
// actor is who decided). accept_channel first applies the item's bill line through a (its
// outcome is kept with the decision); the other actions move no money. The errors:
// ErrBadResolve, ErrWrongClass, payment.ErrNotFound (no such item), payment.ErrConflict with
// the item as it stands (not open: resolved, repaired or gone), or the apply's or the
// database's. The console and the API both call this.
func ResolveDiscrepancy(ctx context.Context, db *repository.DB, a EventApplier, id int64, action, note string, e access.Entry) (repository.DiscrepancyItem, error) {
	if err := CheckResolve(action, note); err != nil {
		return repository.DiscrepancyItem{}, err
	}
	it, err := db.GetDiscrepancy(ctx, id)
	if err != nil {
		return it, err
	}
	if it.Status != repository.StatusOpen {
		return it, payment.ErrConflict
	}
	res := repository.Resolution{Action: action, Note: note, By: e.Actor, At: cmp.Or(e.At, time.Now()).UTC()}
	if action == ActionAcceptChannel {
		if !slices.Contains(AcceptChannelClasses, it.Class) {
			return it, fmt.Errorf("%w: discrepancy %d is %s", ErrWrongClass, id, it.Class)
		}
		var l BillLineRef
		if it.Line == "" || json.Unmarshal([]byte(it.Line), &l) != nil {
			return it, fmt.Errorf("%w: discrepancy %d keeps no bill line (found before paygw kept them); resolve it with another action",
				ErrBadResolve, id)
		}
		outcome, err := a.Apply(ctx, BillEvent(it.Channel, l))
		if err != nil {
			return it, err
		}
		res.Outcome = string(outcome)
	}
	return db.ResolveDiscrepancy(ctx, id, res, e)
}

// MovesMoney reports whether a resolution changed paygw's money: an accept_channel whose apply
// applied the payment or the refund.
func MovesMoney(r *repository.Resolution) bool {
	return r != nil && r.Action == ActionAcceptChannel &&
		(r.Outcome == string(payment.OutcomeApplied) || r.Outcome == string(payment.OutcomeRefunded))
}
