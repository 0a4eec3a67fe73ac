package wechatpay

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// wechatSeedMessages are valid notifications signed now, one per status WeChat notifies.
func wechatSeedMessages(f *testing.F) []simulate.Message {
	s := wechatSigner(f)
	var msgs []simulate.Message
	for _, st := range []string{simulate.StatusPaid, simulate.StatusRefund} {
		m, err := s.Sign(simulate.Payment{TradeNo: "T20250101000001", AmountFen: 8888, Status: st})
		if err != nil {
			f.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func checkWeChatResult(t *testing.T, ev payment.Event, err error) {
	t.Helper()
	switch {
	case err != nil && !isWeChatSentinel(err):
		t.Fatalf("error %v wraps no sentinel", err)
	case err != nil:
		return
	case ev.TradeNo == "" || !payment.ValidTradeNo(ev.TradeNo) || ev.NotifyID == "" || ev.Channel != "wechatpay":
		t.Fatalf("accepted an incomplete event %+v", ev)
	case ev.AmountFen < 0 || len(ev.Currency) != 3 || ev.Kind == "":
		t.Fatalf("accepted an event with amount %d %q, kind %q", ev.AmountFen, ev.Currency, ev.Kind)
	case ev.Kind == payment.KindRefund && (ev.Status != "REFUND.SUCCESS" && !strings.HasPrefix(ev.Status, "REFUND.SUCCESS:") || ev.RefundIsTotal):
		t.Fatalf("a refund from %q, total=%v", ev.Status, ev.RefundIsTotal)
	}
}

// eventFromBodyChecked is what Verify does after the signature: map, then the width checks.
func eventFromBodyChecked(w *Channel, body []byte) (payment.Event, error) {
	ev, err := w.eventFromBody(body)
	if err != nil {
		return ev, err
	}
	return channels.CheckEvent(ev)
}

// FuzzWeChatPayVerify feeds whole messages: body and the four signed headers. What verifies must
// be a seed's event.
func FuzzWeChatPayVerify(f *testing.F) {
	signed := wechatSeedMessages(f)
	for _, m := range signed {
		h := m.Header
		f.Add(m.Body, h.Get("Wechatpay-Timestamp"), h.Get("Wechatpay-Nonce"), h.Get("Wechatpay-Signature"),
			h.Get("Wechatpay-Serial"), h.Get("Wechatpay-Signature-Type"))
	}
	f.Add([]byte(`{}`), "", "", "", "", "")
	f.Add([]byte(`{"id":"1"}`), "+1", "n", "AAAA", wechatTestPubKeyID, "WECHATPAY2-SHA256-RSA2048")
	f.Add([]byte(`null`), "99999999999999999999", "n", "!!", "x", "x")
	probe := wechatSeedMessages(f)[0] // a real message whose signature is marked as WeChat's probe
	f.Add(probe.Body, probe.Header.Get("Wechatpay-Timestamp"), probe.Header.Get("Wechatpay-Nonce"),
		"WECHATPAY/SIGNTEST/"+probe.Header.Get("Wechatpay-Signature"), probe.Header.Get("Wechatpay-Serial"), simulate.WeChatPaySignatureType)
	w := testWeChatPay(f, wechatCombinedMode)
	seeds := channeltest.VerifiedSeeds(f, func(i int) (payment.Event, error) {
		return w.Verify(signed[i].Body, signed[i].Header, time.Now())
	}, len(signed))

	f.Fuzz(func(t *testing.T, body []byte, ts, nonce, sig, serial, sigType string) {
		h := http.Header{}
		for k, v := range map[string]string{"Wechatpay-Timestamp": ts, "Wechatpay-Nonce": nonce,
			"Wechatpay-Signature": sig, "Wechatpay-Serial": serial, "Wechatpay-Signature-Type": sigType} {
			if v != "" {
				h.Set(k, v)
			}
		}
		ev, err := w.Verify(body, h, time.Now())
		checkWeChatResult(t, ev, err)
		if err == nil {
			channeltest.SameAsASeed(t, ev, seeds)
		}
	})
}

// FuzzWeChatPayEvent fuzzes what follows a valid signature, which FuzzWeChatPayVerify cannot
// reach: the envelope and the decryption, seeded with the simulator's decryptable bodies.
func FuzzWeChatPayEvent(f *testing.F) {
	for _, m := range wechatSeedMessages(f) {
		f.Add(m.Body)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"id":"1","event_type":"X","resource":null}`,
		`{"id":"1","event_type":"X","resource":{"algorithm":"AEAD_AES_256_GCM","nonce":"short","ciphertext":""}}`,
		`{"id":"1","event_type":"X","resource":{"algorithm":"AEAD_AES_256_GCM","nonce":"123456789012","ciphertext":"!!"}}`,
		`{"id":"1","event_type":"X","resource":{"algorithm":"AEAD_AES_256_GCM","nonce":"123456789012","ciphertext":"AAAA"}}`,
	} {
		f.Add([]byte(s))
	}
	w := testWeChatPay(f, wechatPubKeyMode)
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := eventFromBodyChecked(w, body)
		checkWeChatResult(t, ev, err)
	})
}

// FuzzWeChatPayResource fuzzes the decrypted resource and the event type: the fuzzer cannot
// produce a GCM tag, so the test encrypts what it is given.
func FuzzWeChatPayResource(f *testing.F) {
	txn := `{"appid":"` + wechatTestAppID + `","mchid":"` + wechatTestMchID + `","out_trade_no":"T1",` +
		`"transaction_id":"4200","trade_state":"SUCCESS","success_time":"2025-01-01T12:00:05+08:00",` +
		`"amount":{"total":1,"currency":"cny"}}`
	refund := `{"mchid":"` + wechatTestMchID + `","out_trade_no":"T1","transaction_id":"4200","refund_id":"50",` +
		`"refund_status":"SUCCESS","amount":{"total":2,"refund":1}}`
	f.Add("TRANSACTION.SUCCESS", []byte(txn))
	f.Add("REFUND.SUCCESS", []byte(refund))
	f.Add("REFUND.CLOSED", []byte(refund))
	f.Add("REFUND.ABNORMAL", []byte(`{"mchid":"`+wechatTestMchID+`","out_trade_no":"T1","transaction_id":"4200"}`))
	f.Add("TRANSACTION.SUCCESS", []byte(strings.Replace(txn, `"4200"`, `"`+strings.Repeat("4", 129)+`"`, 1)))
	f.Add("OTHER", []byte(`{"out_trade_no":"T1"}`))
	f.Add("TRANSACTION.SUCCESS", []byte(`{"amount":{"total":-1}}`))
	f.Add("TRANSACTION.SUCCESS", []byte(`{"amount":{"total":1e30}}`))
	s := wechatSigner(f)
	w := testWeChatPay(f, wechatPubKeyMode)
	f.Fuzz(func(t *testing.T, eventType string, plain []byte) {
		body := wechatCustomBody(t, s, eventType, plain, nil)
		ev, err := eventFromBodyChecked(w, body)
		checkWeChatResult(t, ev, err)
		if err == nil && ev.Kind == payment.KindPaid && ev.Status != "TRANSACTION.SUCCESS:SUCCESS" {
			t.Fatalf("paid from status %q", ev.Status)
		}
	})
}
