package simulate

import (
	"sort"
	"strconv"
	"time"
)

// What the four fake bills share: the trades of a day, and the ids the notifications of them
// carry, so that a bill line and the notification of the same payment or refund name it alike.

// fakeBillTrade is a trade of the store as a bill shows it: the payment, and the refund when
// the trade is refunded (RefundFen of it; the whole amount when that is 0).
type fakeBillTrade struct {
	FakeTrade
	RefundID  string // as the channel's refund notification of it carries it ("" when not refunded)
	RefundAmt int64
}

// dayTrades are the channel's paid and refunded trades whose PaidAt is in [from, from+1 day),
// in time order (then trade_no). The fake keeps no separate refund time: a refund is on the
// payment's day, at the payment's time, as the fake's refund notification states it.
func (f *Fake) dayTrades(channel string, from time.Time) []fakeBillTrade {
	to := from.AddDate(0, 0, 1)
	f.mu.Lock()
	var out []fakeBillTrade
	for _, t := range f.trades {
		if t.Channel != channel || (t.Status != FakePaid && t.Status != FakeRefunded) || t.PaidAt.Before(from) || !t.PaidAt.Before(to) {
			continue
		}
		bt := fakeBillTrade{FakeTrade: t}
		if t.Status == FakeRefunded {
			p := Payment{TradeNo: t.TradeNo, AmountFen: t.AmountFen, Currency: t.Currency, TxnID: t.TxnID, Time: t.PaidAt,
				Status: StatusRefund, RefundFen: t.RefundFen}.normalized(channel)
			bt.RefundID, bt.RefundAmt = p.RefundID, p.RefundFen
		}
		out = append(out, bt)
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].PaidAt.Equal(out[j].PaidAt) {
			return out[i].PaidAt.Before(out[j].PaidAt)
		}
		return out[i].TradeNo < out[j].TradeNo
	})
	return out
}

// parseBillDay reads a yyyy-MM-dd bill date as the start of that day in loc.
func parseBillDay(s string, loc *time.Location) (time.Time, bool) {
	d, err := time.ParseInLocation(time.DateOnly, s, loc)
	return d, err == nil
}

// signedYuan renders fen as signed yuan ("-1.50").
func signedYuan(fen int64) string {
	if fen < 0 {
		return "-" + Yuan(-fen)
	}
	return Yuan(fen)
}

func itoa(n int) string { return strconv.Itoa(n) }
