package apply_test

import (
	"context"
	"testing"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// attempts records that the buyer was sent to each channel (channel, or channel=ref for Stripe's
// PaymentIntent ids) to pay tradeNo.
func (f *fixture) attempts(tradeNo string, channelRefs ...[2]string) {
	f.t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := f.db.InTx(context.Background(), func(tx *repository.Tx) error {
		for _, cr := range channelRefs {
			if err := tx.InsertAttempt(context.Background(), payment.Attempt{TradeNo: tradeNo, Channel: cr[0], ChannelRef: cr[1],
				CreatedTime: now, NextQueryAt: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) openAttempts(tradeNo string) int {
	f.t.Helper()
	return f.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND closed_time IS NULL`, tradeNo)
}

// wantOpen fails the test unless the order has the status and that many attempts still open.
func (f *fixture) wantOpen(tradeNo, status string, open int) {
	f.t.Helper()
	if st, n := f.get(tradeNo).Status, f.openAttempts(tradeNo); st != status || n != open {
		f.t.Fatalf("order %s with %d open attempts, want %s with %d", st, n, status, open)
	}
}

func closeOf(channel, tradeNo, txn, notifyID string) payment.Event {
	return payment.Event{Channel: channel, NotifyID: notifyID, TradeNo: tradeNo, ChannelTxnID: txn, Kind: payment.KindClosed,
		Status: "CLOSED", Raw: []byte("close " + notifyID)}
}

// The close rule (issue 20, case 3): a KindClosed event closes its channel's attempt, and the
// order only when no attempt of it is left open.
func TestCloseClosesTheOrderOnlyWithNoOpenAttempt(t *testing.T) {
	t.Run("no attempt: the order closes, as before attempts were known", func(t *testing.T) {
		f := newFixture(t, true)
		tn := f.order(100)
		f.apply(closeOf("alipay", tn, "A1", "c1"), payment.OutcomeClosed)
		f.wantOpen(tn, payment.OrderClosed, 0)
		f.want("attempts recorded for an order that had none", 0, `SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ?`, tn)
	})
	t.Run("two channels: the first close is journalled, the second closes", func(t *testing.T) {
		f := newFixture(t, true)
		tn := f.order(100)
		f.attempts(tn, [2]string{"alipay", ""}, [2]string{"wechatpay", ""})
		f.apply(closeOf("alipay", tn, "A1", "c1"), payment.OutcomeJournalled)
		f.wantOpen(tn, payment.OrderWaitPay, 1)                           // the WeChat attempt
		f.apply(closeOf("alipay", tn, "A1", "c1"), payment.OutcomeRepeat) // the same notification again
		f.apply(closeOf("wechatpay", tn, "", "c2"), payment.OutcomeClosed)
		f.wantOpen(tn, payment.OrderClosed, 0)
		f.apply(paid(tn, "A9", 100), payment.OutcomePaidAfterClose) // a payment after close, as before
	})
	t.Run("a payment on the open attempt after a close elsewhere applies", func(t *testing.T) {
		f := newFixture(t, true)
		tn := f.order(100)
		f.attempts(tn, [2]string{"wechatpay", ""}, [2]string{"alipay", ""})
		f.apply(closeOf("wechatpay", tn, "", "c1"), payment.OutcomeJournalled)
		f.apply(paid(tn, "A1", 100), payment.OutcomeApplied)
		f.apply(closeOf("alipay", tn, "A1", "c2"), payment.OutcomeJournalled) // of a PAID order: journalled
		if o := f.get(tn); o.Status != payment.OrderPaid || o.ChannelTxnID != "A1" {
			t.Fatalf("order %s by %s, want PAID by A1", o.Status, o.ChannelTxnID)
		}
		f.want("anomalies", 0, `SELECT COUNT(*) FROM anomaly`)
	})
	t.Run("a close from a channel the order has no attempt on", func(t *testing.T) {
		f := newFixture(t, true)
		tn := f.order(100)
		f.attempts(tn, [2]string{"unionpay", "20240501120000"})
		f.apply(closeOf("alipay", tn, "A1", "c1"), payment.OutcomeJournalled)
		f.wantOpen(tn, payment.OrderWaitPay, 1) // the UnionPay attempt
		f.want("the close recorded as a closed Alipay attempt", 1,
			`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND channel = 'alipay' AND implicit = 1 AND closed_time IS NOT NULL`, tn)
	})
	t.Run("Stripe closes the PaymentIntent it names", func(t *testing.T) {
		f := newFixture(t, true)
		tn := f.order(100)
		f.attempts(tn, [2]string{"stripe", "pi_A"}, [2]string{"stripe", "pi_B"})
		f.apply(closeOf("stripe", tn, "pi_A", "query:close:pi_A"), payment.OutcomeJournalled)
		if n := f.count(`SELECT COUNT(*) FROM payment_attempt WHERE trade_no = ? AND channel_ref = 'pi_B' AND closed_time IS NULL`, tn); n != 1 ||
			f.openAttempts(tn) != 1 {
			t.Fatalf("want pi_A's attempt closed and pi_B's open (%d open)", f.openAttempts(tn))
		}
		f.apply(closeOf("stripe", tn, "pi_B", "query:close:pi_B"), payment.OutcomeClosed)
	})
	t.Run("unknown order", func(t *testing.T) {
		f := newFixture(t, true)
		f.apply(closeOf("alipay", "NOSUCH1", "A1", "c1"), payment.OutcomeUnknownOrder)
		if n := f.count(`SELECT COUNT(*) FROM payment_attempt`) + f.count(`SELECT COUNT(*) FROM notify_journal`); n != 0 {
			t.Fatalf("%d rows written for an unknown order", n)
		}
	})
}
