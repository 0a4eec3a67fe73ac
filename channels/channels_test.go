package channels

import (
	"errors"
	"strings"
	"testing"

	"github.com/paygw/paygw/payment"
)

// TestCheckEvent: the one place an event's identifiers are held against their columns.
func TestCheckEvent(t *testing.T) {
	paid := payment.Event{Channel: "x", NotifyID: "n1", TradeNo: "T1", ChannelTxnID: "txn1", Kind: payment.KindPaid,
		AmountFen: 100, Currency: "CNY"}
	refund := paid
	refund.Kind, refund.RefundID, refund.RefundFen = payment.KindRefund, "r1", 100
	other := payment.Event{Channel: "x", NotifyID: "n1", Kind: payment.KindOther}
	edit := func(ev payment.Event, f func(ev *payment.Event)) payment.Event { f(&ev); return ev }
	long := func(n int) string { return strings.Repeat("a", n) }

	tests := map[string]struct {
		ev payment.Event
		ok bool
	}{
		"paid":                          {paid, true},
		"refund":                        {refund, true},
		"refund without trade_no":       {edit(refund, func(ev *payment.Event) { ev.TradeNo = "" }), true},
		"other without anything":        {other, true},
		"notify id at the width":        {edit(paid, func(ev *payment.Event) { ev.NotifyID = long(MaxNotifyID) }), true},
		"notify id too long":            {edit(paid, func(ev *payment.Event) { ev.NotifyID = long(MaxNotifyID + 1) }), false},
		"notify id missing":             {edit(paid, func(ev *payment.Event) { ev.NotifyID = "" }), false},
		"trade_no at the width":         {edit(paid, func(ev *payment.Event) { ev.TradeNo = long(payment.MaxTradeNo) }), true},
		"trade_no too long":             {edit(paid, func(ev *payment.Event) { ev.TradeNo = long(payment.MaxTradeNo + 1) }), false},
		"trade_no of another shape":     {edit(paid, func(ev *payment.Event) { ev.TradeNo = "T 1" }), false},
		"paid without trade_no":         {edit(paid, func(ev *payment.Event) { ev.TradeNo = "" }), false},
		"txn id at the width":           {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = long(MaxChannelTxnID) }), true},
		"txn id too long":               {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = long(MaxChannelTxnID + 1) }), false},
		"txn id too long on other":      {edit(other, func(ev *payment.Event) { ev.ChannelTxnID = long(MaxChannelTxnID + 1) }), false},
		"paid without txn id":           {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = "" }), false},
		"refund of no payment":          {edit(refund, func(ev *payment.Event) { ev.ChannelTxnID = "" }), false},
		"refund id at the width":        {edit(refund, func(ev *payment.Event) { ev.RefundID = long(MaxRefundID) }), true},
		"refund id too long":            {edit(refund, func(ev *payment.Event) { ev.RefundID = long(MaxRefundID + 1) }), false},
		"refund without id":             {edit(refund, func(ev *payment.Event) { ev.RefundID = "" }), false},
		"refund id on a payment":        {edit(paid, func(ev *payment.Event) { ev.RefundID = "r1" }), false},
		"refund total on a payment":     {edit(paid, func(ev *payment.Event) { ev.RefundIsTotal = true }), false},
		"negative amount":               {edit(paid, func(ev *payment.Event) { ev.AmountFen = -1 }), false},
		"negative refund":               {edit(refund, func(ev *payment.Event) { ev.RefundFen = -1 }), false},
		"currency of 4 letters":         {edit(paid, func(ev *payment.Event) { ev.Currency = "CNYX" }), false},
		"currency lower case":           {edit(paid, func(ev *payment.Event) { ev.Currency = "cny" }), false},
		"currency missing on a payment": {edit(paid, func(ev *payment.Event) { ev.Currency = "" }), false},
		// Informational: the repository clips them.
		"long status":  {edit(paid, func(ev *payment.Event) { ev.Status = long(500) }), true},
		"long subject": {edit(paid, func(ev *payment.Event) { ev.Subject = strings.Repeat("茶", 500) }), true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CheckEvent(tt.ev)
			if tt.ok {
				if err != nil || got.NotifyID != tt.ev.NotifyID || got.Status != tt.ev.Status {
					t.Fatalf("CheckEvent = %+v, %v; want the event back", got, err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || got.NotifyID != "" {
				t.Fatalf("CheckEvent = %+v, %v; want ErrMalformed and no event", got, err)
			}
			if strings.Contains(err.Error(), long(40)) {
				t.Errorf("error %q quotes the long value", err)
			}
		})
	}
}
