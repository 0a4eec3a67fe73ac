package handlers

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// sandbox is every channel with sandbox keys, built once for the test binary the way `paygw
// serve` builds them: from the channels: block `paygw simulate keys` writes.
var sandbox struct {
	channels []channels.Channel
	signers  map[string]simulate.Signer
	replies  map[string]map[payment.Reply]channels.Response
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "paygw-sandbox-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		man, err := simulate.WriteKeys(dir, time.Now())
		if err != nil {
			panic(err)
		}
		for _, secret := range []string{man.WeChatPay.APIv3Key, man.Stripe.WebhookSecret} {
			if err := testenv.RegisterSecret(secret); err != nil {
				panic(err)
			}
		}
		cfg, err := config.Load(man.ConfigPath, nil)
		if err != nil {
			panic(err)
		}
		cfg.Channels.Alipay.AlipayPublicKeyFile = "" // the Alipay tests use this binary's own key
		cfg.Channels.Alipay.AlipayPublicKey = string(simulate.PEMPublicKey(&alipayKey.PublicKey))
		cfg.Channels.Alipay.AppID = testAppID
		cfg.Channels.WeChatPay.AppIDs = []string{secondWeChatAppID} // a second appid of the same mchid
		if sandbox.channels, err = all.FromConfig(cfg.Channels); err != nil {
			panic(err)
		}
		if sandbox.signers, err = simulate.LoadSigners(dir); err != nil {
			panic(err)
		}
		sandbox.signers["alipay"] = simulate.AlipaySigner{AppID: testAppID, Key: alipayKey}
		sandbox.replies = map[string]map[payment.Reply]channels.Response{}
		for _, ch := range sandbox.channels {
			sandbox.replies[ch.Name()] = map[payment.Reply]channels.Response{}
			for _, r := range []payment.Reply{payment.ReplySuccess, payment.ReplyRefuse, payment.ReplyRetry} {
				sandbox.replies[ch.Name()][r] = ch.Reply(r)
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

var channelNames = []string{"alipay", "wechatpay", "stripe", "unionpay"}

// send signs p for channel and delivers it.
func (h *harness) send(channel string, p simulate.Payment) response {
	h.t.Helper()
	m, err := sandbox.signers[channel].Sign(p)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.deliver(channel, m)
}

func (h *harness) deliver(channel string, m simulate.Message) response {
	h.t.Helper()
	r := simulate.Send(h.t.Context(), h.client, simulate.NotifyURL(h.url, channel), m)
	if r.Err != nil {
		h.t.Fatal(r.Err)
	}
	return response{code: r.Status, body: r.Body}
}

// paidOrder seeds an order of amountFen and delivers the channel's notification paying it in
// full, which must be answered success; it returns the order's trade_no.
func (h *harness) paidOrder(t *testing.T, channel string, amountFen int64) string {
	t.Helper()
	tn := h.seedOrder(amountFen)
	wantChannelReply(t, channel, h.send(channel, simulate.Payment{TradeNo: tn, AmountFen: amountFen}), payment.ReplySuccess)
	return tn
}

// wantChannelReply checks r is the channel's own rendering of the reply kind.
func wantChannelReply(t *testing.T, channel string, r response, kind payment.Reply) {
	t.Helper()
	want := sandbox.replies[channel][kind]
	if r.code != want.Status || r.body != string(want.Body) {
		t.Fatalf("%s reply = %d %q, want %d %q", channel, r.code, r.body, want.Status, want.Body)
	}
}

// The outcome table, for every channel through its real wire format.
func TestOutcomeTableEveryChannel(t *testing.T) {
	h := newHarness(t, options{})
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) {
			t.Run("first payment, then repeats", func(t *testing.T) {
				tn := h.seedOrder(1999)
				p := simulate.Payment{TradeNo: tn, AmountFen: 1999}
				m, err := sandbox.signers[ch].Sign(p)
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					wantChannelReply(t, ch, h.deliver(ch, m), payment.ReplySuccess)
				}
				wantChannelReply(t, ch, h.send(ch, p), payment.ReplySuccess) // re-signed later delivery
				o := h.order(tn)
				if o.Status != "PAID" || o.Channel != ch {
					t.Fatalf("order = %+v", o)
				}
				if rec, j, a := h.rows(tn); rec != 1 || j != 1 || a != 0 {
					t.Fatalf("records, journal, anomalies = %d, %d, %d; want 1, 1, 0", rec, j, a)
				}
			})
			t.Run("amount differs: AMOUNT_MISMATCH once", func(t *testing.T) {
				tn := h.seedOrder(1999)
				for range 2 {
					wantChannelReply(t, ch, h.send(ch, simulate.Payment{TradeNo: tn, AmountFen: 1998}), payment.ReplySuccess)
				}
				if h.order(tn).Status != "WAIT_PAY" || h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'AMOUNT_MISMATCH'`, tn) != 1 {
					t.Fatal("want the order untouched and one AMOUNT_MISMATCH")
				}
			})
			if ch != "alipay" { // Alipay notifications carry no currency: always CNY
				t.Run("currency differs: AMOUNT_MISMATCH", func(t *testing.T) {
					tn := h.seedOrder(1999)
					wantChannelReply(t, ch, h.send(ch, simulate.Payment{TradeNo: tn, AmountFen: 1999, Currency: "USD"}), payment.ReplySuccess)
					if h.order(tn).Status != "WAIT_PAY" || h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ?`, tn) != 1 {
						t.Fatal("want the order untouched and one anomaly")
					}
				})
			}
			t.Run("paid after close: PAID_AFTER_CLOSE once", func(t *testing.T) {
				tn := h.seedOrder(1999)
				h.exec(`UPDATE orders SET status = 'CLOSED' WHERE trade_no = ?`, tn)
				for range 2 {
					wantChannelReply(t, ch, h.send(ch, simulate.Payment{TradeNo: tn, AmountFen: 1999}), payment.ReplySuccess)
				}
				if h.order(tn).Status != "CLOSED" || h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'PAID_AFTER_CLOSE'`, tn) != 1 {
					t.Fatal("want the order still CLOSED and one PAID_AFTER_CLOSE")
				}
			})
			t.Run("second transaction: DUPLICATE_PAYMENT once", func(t *testing.T) {
				tn := h.paidOrder(t, ch, 1999)
				other := simulate.Payment{TradeNo: tn, AmountFen: 1999, TxnID: otherTxn(ch, tn)}
				for range 2 {
					wantChannelReply(t, ch, h.send(ch, other), payment.ReplySuccess)
				}
				if h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'DUPLICATE_PAYMENT'`, tn) != 1 {
					t.Fatal("want one DUPLICATE_PAYMENT")
				}
			})
			t.Run("unknown trade_no: retry, nothing written", func(t *testing.T) {
				tn := "UNKNOWN" + ch
				wantChannelReply(t, ch, h.send(ch, simulate.Payment{TradeNo: tn, AmountFen: 1999}), payment.ReplyRetry)
				if rec, j, a := h.rows(tn); rec+j+a != 0 {
					t.Fatal("rows written for an unknown order")
				}
			})
			t.Run("refunds: each REFUNDED once, the order still PAID", func(t *testing.T) {
				tn := h.paidOrder(t, ch, 1999)
				first := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 500}
				m, err := sandbox.signers[ch].Sign(first)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 { // a redelivery of the same notice counts nothing more
					wantChannelReply(t, ch, h.deliver(ch, m), payment.ReplySuccess)
				}
				wantChannelReply(t, ch, h.send(ch, first), payment.ReplySuccess) // re-signed later delivery
				if o := h.order(tn); o.Status != "PAID" || o.RefundedFen != 500 {
					t.Fatalf("after the first refund: %s, refunded %d; want PAID, 500", o.Status, o.RefundedFen)
				}
				// The second refund of 300: channels that state the running total say 800.
				second := simulate.Payment{TradeNo: tn, AmountFen: 1999, Status: simulate.StatusRefund, RefundFen: 300, RefundTotalFen: 800}
				wantChannelReply(t, ch, h.send(ch, second), payment.ReplySuccess)
				if o := h.order(tn); o.Status != "PAID" || o.RefundedFen != 800 {
					t.Fatalf("after the second refund: %s, refunded %d; want PAID, 800", o.Status, o.RefundedFen)
				}
				if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND event = 'REFUND' AND outcome = 'REFUNDED'`, tn); n != 2 {
					t.Fatalf("REFUNDED journal rows = %d, want 2", n)
				}
				if n := h.count(`SELECT COUNT(*) FROM refund WHERE trade_no = ? AND channel = ? AND kind = 'ITEM' AND status = 'APPLIED'`, tn, ch); n != 2 {
					t.Fatalf("refund items = %d, want 2", n)
				}
			})
			t.Run("repeat through a replica with Redis down: success, nothing more", func(t *testing.T) {
				tn := h.seedOrder(1999)
				p := simulate.Payment{TradeNo: tn, AmountFen: 1999}
				wantChannelReply(t, ch, h.send(ch, p), payment.ReplySuccess)
				down := newHarness(t, options{dsn: h.dsn, redisDown: true})
				wantChannelReply(t, ch, down.send(ch, p), payment.ReplySuccess)
				if rec, j, _ := h.rows(tn); rec != 1 || j != 1 {
					t.Fatalf("records, journal = %d, %d; want 1, 1", rec, j)
				}
			})
			t.Run("MySQL down: retry, the next delivery applies", func(t *testing.T) {
				tn := h.seedOrder(1999)
				p := simulate.Payment{TradeNo: tn, AmountFen: 1999}
				dead := newHarness(t, options{dsn: h.dsn, closedDB: true})
				wantChannelReply(t, ch, dead.send(ch, p), payment.ReplyRetry)
				if h.order(tn).Status != "WAIT_PAY" {
					t.Fatal("order changed while MySQL was down")
				}
				wantChannelReply(t, ch, h.send(ch, p), payment.ReplySuccess)
				if h.order(tn).Status != "PAID" {
					t.Fatal("the redelivery did not apply")
				}
			})
			t.Run("tampered body: refused", func(t *testing.T) {
				tn := h.seedOrder(1999)
				m, err := sandbox.signers[ch].Sign(simulate.Payment{TradeNo: tn, AmountFen: 1999})
				if err != nil {
					t.Fatal(err)
				}
				m.Body = append([]byte{}, m.Body...)
				m.Body[len(m.Body)/2] ^= 0x01
				wantChannelReply(t, ch, h.deliver(ch, m), payment.ReplyRefuse)
				if h.order(tn).Status != "WAIT_PAY" {
					t.Fatal("a tampered notification changed the order")
				}
			})
		})
	}
}

// otherTxn is another transaction id in the channel's own format.
func otherTxn(channel, tradeNo string) string {
	switch channel {
	case "stripe":
		return "pi_other" + tradeNo[len(tradeNo)-8:]
	case "unionpay":
		return "999999999999999999999"
	}
	return fmt.Sprintf("2099%s", tradeNo[len(tradeNo)-12:])
}

func TestDuplicateStormEveryChannel(t *testing.T) {
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) {
			h := newHarness(t, options{twinWait: 5 * time.Second})
			tn := h.seedOrder(1999)
			m, err := sandbox.signers[ch].Sign(simulate.Payment{TradeNo: tn, AmountFen: 1999})
			if err != nil {
				t.Fatal(err)
			}
			replies := simulate.Storm(t.Context(), h.client, simulate.NotifyURL(h.url, ch), m, 50, 50, nil)
			want := sandbox.replies[ch][payment.ReplySuccess]
			for i, r := range replies {
				if r.Err != nil || r.Status != want.Status || r.Body != string(want.Body) {
					t.Fatalf("reply %d = %v", i, r)
				}
			}
			if rec, j, a := h.rows(tn); rec != 1 || j != 1 || a != 0 || h.order(tn).Status != "PAID" {
				t.Fatalf("records, journal, anomalies = %d, %d, %d; want one PAID transition", rec, j, a)
			}
		})
	}
}

func TestCrossChannelDuplicatePayment(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.paidOrder(t, "alipay", 1999)
	// WeChat sends twice at once; both are answered success, one anomaly.
	for _, r := range together(2, func() response { return h.send("wechatpay", simulate.Payment{TradeNo: tn, AmountFen: 1999}) }) {
		wantChannelReply(t, "wechatpay", r, payment.ReplySuccess)
	}
	o := h.order(tn)
	if o.Status != "PAID" || o.Channel != "alipay" {
		t.Fatalf("order = %+v, want PAID by alipay", o)
	}
	if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE trade_no = ? AND kind = 'DUPLICATE_PAYMENT' AND channel = 'wechatpay'`, tn); n != 1 {
		t.Fatalf("DUPLICATE_PAYMENT anomalies = %d, want 1", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'pay_notify'`); n != 2 {
		t.Fatalf("payment records = %d, want 2 (one per channel transaction)", n)
	}
}

// A refund that carries an order number of its own (UnionPay's refund orderId, a Checkout
// payment's charge without metadata) is applied to the order its payment paid.
func TestRefundFoundByThePaymentItUndoes(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1999)
	const queryID = "123456789012345678901"
	wantChannelReply(t, "unionpay", h.send("unionpay", simulate.Payment{TradeNo: tn, AmountFen: 1999, TxnID: queryID}), payment.ReplySuccess)
	refund := simulate.Payment{TradeNo: "REFUND" + tn[len(tn)-10:], AmountFen: 1999, TxnID: queryID, Status: simulate.StatusRefund}
	wantChannelReply(t, "unionpay", h.send("unionpay", refund), payment.ReplySuccess)
	if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE trade_no = ? AND event = 'REFUND' AND outcome = 'REFUNDED'`, tn); n != 1 {
		t.Fatalf("refund REFUNDED on the paid order %d times, want 1", n)
	}
	if o := h.order(tn); o.Status != "PAID" || o.RefundedFen != 1999 {
		t.Fatalf("order %s, refunded %d; want PAID, refunded in full", o.Status, o.RefundedFen)
	}
	// A refund naming a payment we never applied is retried, not dropped.
	unknown := simulate.Payment{TradeNo: "REFUNDX" + tn[len(tn)-10:], AmountFen: 1999, TxnID: "999999999999999999998", Status: simulate.StatusRefund}
	wantChannelReply(t, "unionpay", h.send("unionpay", unknown), payment.ReplyRetry)
}
