package channels

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
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
		"notify id at the width":        {edit(paid, func(ev *payment.Event) { ev.NotifyID = long(maxNotifyID) }), true},
		"notify id too long":            {edit(paid, func(ev *payment.Event) { ev.NotifyID = long(maxNotifyID + 1) }), false},
		"notify id missing":             {edit(paid, func(ev *payment.Event) { ev.NotifyID = "" }), false},
		"trade_no at the width":         {edit(paid, func(ev *payment.Event) { ev.TradeNo = long(payment.MaxTradeNo) }), true},
		"trade_no too long":             {edit(paid, func(ev *payment.Event) { ev.TradeNo = long(payment.MaxTradeNo + 1) }), false},
		"trade_no of another shape":     {edit(paid, func(ev *payment.Event) { ev.TradeNo = "T 1" }), false},
		"paid without trade_no":         {edit(paid, func(ev *payment.Event) { ev.TradeNo = "" }), false},
		"txn id at the width":           {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = long(maxChannelTxnID) }), true},
		"txn id too long":               {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = long(maxChannelTxnID + 1) }), false},
		"txn id too long on other":      {edit(other, func(ev *payment.Event) { ev.ChannelTxnID = long(maxChannelTxnID + 1) }), false},
		"paid without txn id":           {edit(paid, func(ev *payment.Event) { ev.ChannelTxnID = "" }), false},
		"refund of no payment":          {edit(refund, func(ev *payment.Event) { ev.ChannelTxnID = "" }), false},
		"refund id at the width":        {edit(refund, func(ev *payment.Event) { ev.RefundID = long(maxRefundID) }), true},
		"refund id too long":            {edit(refund, func(ev *payment.Event) { ev.RefundID = long(maxRefundID + 1) }), false},
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
			got, err := checkEvent(tt.ev)
			if tt.ok {
				if err != nil || got.NotifyID != tt.ev.NotifyID || got.Status != tt.ev.Status {
					t.Fatalf("checkEvent = %+v, %v; want the event back", got, err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || got.NotifyID != "" {
				t.Fatalf("checkEvent = %+v, %v; want ErrMalformed and no event", got, err)
			}
			if strings.Contains(err.Error(), long(40)) {
				t.Errorf("error %q quotes the long value", err)
			}
		})
	}
}

// TestApplyTimeout: every channel's deadline sits inside the time it waits for our reply.
func TestApplyTimeout(t *testing.T) {
	tests := map[string]struct {
		ch      Channel
		want    time.Duration
		replyIn time.Duration // the channel's own wait for our answer
	}{
		"alipay":    {NewAlipay(testAppID, "", testAlipayPublicKey(t)), 8 * time.Second, 10 * time.Second},
		"wechatpay": {testWeChatPay(t, wechatPubKeyMode), 4 * time.Second, 5 * time.Second},
		"stripe":    {newTestStripe(t), 8 * time.Second, 10 * time.Second},
		"unionpay":  {testUnionPay(t, testUnionPayPKI(t).config()), 8 * time.Second, 10 * time.Second},
	}
	for name, tt := range tests {
		if got := tt.ch.ApplyTimeout(); got != tt.want || got >= tt.replyIn {
			t.Errorf("%s: ApplyTimeout = %s, want %s (inside %s)", name, got, tt.want, tt.replyIn)
		}
	}
}

// TestFromConfig: the keys this package reads from config reach the verifiers.
func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	man, err := simulate.WriteKeys(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := simulate.LoadSigners(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := func(t *testing.T, environ ...string) map[string]Channel {
		t.Helper()
		cfg, err := config.Load(man.ConfigPath, environ)
		if err != nil {
			t.Fatal(err)
		}
		chs, err := FromConfig(cfg.Channels)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]Channel{}
		for _, ch := range chs {
			byName[ch.Name()] = ch
		}
		return byName
	}
	verify := func(t *testing.T, ch Channel, s simulate.Signer) error {
		t.Helper()
		m, err := s.Sign(simulate.Payment{TradeNo: "T20260501-0001", AmountFen: 100, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.Verify(m.Body, m.Header, now)
		return err
	}
	second := signers["wechatpay"].(simulate.WeChatPaySigner)
	second.AppID = "wx1111111111111111"

	t.Run("app_ids", func(t *testing.T) {
		chs := load(t, "PAYGW_CHANNELS__WECHATPAY__APP_IDS="+second.AppID)
		if err := verify(t, chs["wechatpay"], signers["wechatpay"]); err != nil {
			t.Errorf("app_id: %v", err)
		}
		if err := verify(t, chs["wechatpay"], second); err != nil {
			t.Errorf("app_ids: %v", err)
		}
	})
	t.Run("app_id alone", func(t *testing.T) {
		if err := verify(t, load(t)["wechatpay"], second); !errors.Is(err, ErrNotOurs) {
			t.Errorf("an unlisted appid: %v, want ErrNotOurs", err)
		}
	})
	t.Run("signer_name", func(t *testing.T) {
		if err := verify(t, load(t)["unionpay"], signers["unionpay"]); err != nil {
			t.Errorf("default signer_name: %v", err)
		}
		// Trusting the test environment's name distrusts the production-named sandbox certificate.
		err := verify(t, load(t, "PAYGW_CHANNELS__UNIONPAY__SIGNER_NAME=00040000:SIGN")["unionpay"], signers["unionpay"])
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "signer name") {
			t.Errorf("signer_name 00040000:SIGN: %v, want the signer name refused", err)
		}
	})
}
