package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// secondWeChatAppID is listed in channels.wechatpay.app_ids beside the sandbox's app_id (see
// TestMain): a mini program paying to the same mchid.
const secondWeChatAppID = "wx2222222222222222"

// journalOf reads GET /v1/payments/{trade_no}'s notifications.
func (h *harness) journalOf(tradeNo string) []notificationView {
	h.t.Helper()
	r := h.do("GET", "/v1/payments/"+tradeNo, testToken, nil, "")
	if r.code != http.StatusOK {
		h.t.Fatalf("GET /v1/payments/%s: %d %s", tradeNo, r.code, r.body)
	}
	var v struct {
		Notifications []notificationView `json:"notifications"`
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		h.t.Fatal(err)
	}
	return v.Notifications
}

// notOurs counts the journal rows of a notification acknowledged as about none of our orders.
func (h *harness) notOurs(channel, notifyID string) int {
	h.t.Helper()
	return h.count(`SELECT COUNT(*) FROM notify_journal WHERE channel = ? AND notify_id = ? AND event = 'OTHER'
		AND trade_no = '' AND outcome = 'JOURNALLED'`, channel, notifyID)
}

// Alipay signs the values in the charset it names: a GBK notification verifies over its GBK
// bytes, and its subject reaches the journal as UTF-8.
func TestGapsAlipayGBK(t *testing.T) {
	h := newHarness(t, options{})
	const subject = "测试商品：龙井茶叶 250克（礼盒）"
	for _, charset := range []string{"GBK", "gb2312"} {
		t.Run(charset, func(t *testing.T) {
			tn := h.seedOrder(6660)
			p := alipayPayment(tn, 6660)
			p.Charset, p.Subject = charset, subject
			r := h.notifyAlipay(p)
			wantChannelReply(t, "alipay", r, payment.ReplySuccess)
			if o := h.order(tn); o.Status != payment.OrderPaid {
				t.Fatalf("order %s, want PAID", o.Status)
			}
			ns := h.journalOf(tn)
			if len(ns) != 1 || ns[0].Subject != subject || ns[0].Outcome != string(payment.OutcomeApplied) {
				t.Fatalf("journal %+v, want one APPLIED notification with subject %q", ns, subject)
			}
		})
	}
	t.Run("an unknown charset is refused", func(t *testing.T) {
		tn := h.seedOrder(100)
		p := alipayPayment(tn, 100)
		p.Extra = map[string]string{"charset": "Big5"}
		wantChannelReply(t, "alipay", h.notifyAlipay(p), payment.ReplyRefuse)
		if rec, j, _ := h.rows(tn); rec+j != 0 || h.order(tn).Status != payment.OrderWaitPay {
			t.Fatal("a refused notification left rows behind")
		}
	})
}

// A full refund closes an Alipay trade: TRADE_CLOSED with refund_fee is money back on a paid
// order, not the close of an unpaid one.
func TestGapsAlipayFullRefundIsNotAClose(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(2000)
	wantChannelReply(t, "alipay", h.notifyAlipay(alipayPayment(tn, 2000)), payment.ReplySuccess)
	closed := alipayPayment(tn, 2000)
	closed.TradeStatus, closed.RefundFen, closed.NotifyID = "TRADE_CLOSED", 2000, "n-close-"+tn
	wantChannelReply(t, "alipay", h.notifyAlipay(closed), payment.ReplySuccess)
	if o := h.order(tn); o.Status != payment.OrderPaid || o.RefundedFen != 2000 {
		t.Fatalf("order %s, refunded %d; want PAID, refunded 2000", o.Status, o.RefundedFen)
	}
	ns := h.journalOf(tn)
	if len(ns) != 2 || ns[1].Event != string(payment.KindRefund) || ns[1].Status != "TRADE_CLOSED" || ns[1].Outcome != string(payment.OutcomeRefunded) {
		t.Fatalf("journal %+v, want the close journalled as a REFUND, REFUNDED", ns)
	}
}

// Several appids share one mchid: a listed one is ours, an unlisted one is refused.
func TestGapsWeChatAppIDs(t *testing.T) {
	h := newHarness(t, options{})
	base := sandbox.signers["wechatpay"].(simulate.WeChatPaySigner)
	tests := map[string]struct {
		appID string
		want  payment.Reply
	}{
		"app_id":            {base.AppID, payment.ReplySuccess},
		"listed in app_ids": {secondWeChatAppID, payment.ReplySuccess},
		"not listed":        {"wx3333333333333333", payment.ReplyRefuse},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tn := h.seedOrder(1999)
			s := base
			s.AppID = tt.appID
			m, err := s.Sign(simulate.Payment{TradeNo: tn, AmountFen: 1999})
			if err != nil {
				t.Fatal(err)
			}
			wantChannelReply(t, "wechatpay", h.deliver("wechatpay", m), tt.want)
			wantStatus := payment.OrderPaid
			if tt.want != payment.ReplySuccess {
				wantStatus = payment.OrderWaitPay
			}
			if o := h.order(tn); o.Status != wantStatus {
				t.Fatalf("order %s, want %s", o.Status, wantStatus)
			}
			if rec, j, _ := h.rows(tn); tt.want != payment.ReplySuccess && rec+j != 0 {
				t.Fatal("a refused notification left rows behind")
			}
		})
	}
}

// stripeEvent signs a Stripe event around object the way Stripe sends it.
func stripeEvent(t *testing.T, id, typ, object string) simulate.Message {
	t.Helper()
	body := []byte(`{"id":"` + id + `","object":"event","api_version":"2025-07-30.basil","created":` +
		itoa(time.Now().Unix()) + `,"data":{"object":` + object + `},"livemode":false,"pending_webhooks":1,` +
		`"request":{"id":null,"idempotency_key":null},"type":"` + typ + `"}`)
	secret := sandbox.signers["stripe"].(simulate.StripeSigner).Secret
	return simulate.Message{Body: body, Header: http.Header{
		"Content-Type":     {"application/json; charset=utf-8"},
		"Stripe-Signature": {simulate.SignStripe(body, secret, time.Now())},
	}}
}

// Stripe sends every event of the account: one about none of our orders is acknowledged and
// journalled, never refused (a refusal is retried for three days).
func TestGapsStripeNotOurs(t *testing.T) {
	h := newHarness(t, options{})
	session := func(fields string) string {
		return `{"id":"cs_test_a1` + freshID() + `","object":"checkout.session","livemode":false,"metadata":{},` + fields + `}`
	}
	const sessionDone = "checkout.session.completed"
	tests := map[string]struct{ typ, object string }{
		"setup-mode session, null currency": {sessionDone, session(`"mode":"setup","currency":null,"amount_total":null,` +
			`"payment_intent":null,"payment_status":"no_payment_required","client_reference_id":null,"setup_intent":"seti_1Gaps",` +
			`"status":"complete"`)},
		"client_reference_id an email": {sessionDone, session(`"mode":"payment","currency":"usd","amount_total":1999,` +
			`"payment_intent":"pi_3Gaps` + freshID() + `","payment_status":"paid","client_reference_id":"buyer@example.com","status":"complete"`)},
		"client_reference_id in our shape, no such order": {sessionDone, session(`"mode":"payment","currency":"cny","amount_total":1999,` +
			`"payment_intent":"pi_3Gaps` + freshID() + `","payment_status":"paid","client_reference_id":"P20990101000000abcdefabcdefabcd",` +
			`"status":"complete"`)},
		"payment_intent of another integration": {"payment_intent.succeeded", `{"id":"pi_3Other` + freshID() +
			`","object":"payment_intent","amount_received":500,"currency":"eur","metadata":{"order":"elsewhere-42"},"status":"succeeded"}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			before := h.rowCounts()
			id := "evt_1Gaps" + freshID()
			m := stripeEvent(t, id, tt.typ, tt.object)
			for range 2 { // a redelivery is a repeat, journalled once
				wantChannelReply(t, "stripe", h.deliver("stripe", m), payment.ReplySuccess)
			}
			if n := h.notOurs("stripe", id); n != 1 {
				t.Fatalf("journal rows acknowledging it = %d, want 1", n)
			}
			after := h.rowCounts()
			if after.Paid != before.Paid || after.Records != before.Records || after.Anomalies != before.Anomalies {
				t.Fatalf("rows changed beyond the journal: %+v -> %+v", before, after)
			}
		})
	}

	t.Run("client_reference_id naming our order: paid", func(t *testing.T) {
		tn := h.seedOrder(1999)
		m := stripeEvent(t, "evt_1Gaps"+freshID(), sessionDone, session(`"mode":"payment","currency":"cny","amount_total":1999,`+
			`"payment_intent":"pi_3Gaps`+freshID()+`","payment_status":"paid","client_reference_id":"`+tn+`","status":"complete"`))
		wantChannelReply(t, "stripe", h.deliver("stripe", m), payment.ReplySuccess)
		if o := h.order(tn); o.Status != payment.OrderPaid || o.Channel != "stripe" {
			t.Fatalf("order %s by %q, want PAID by stripe", o.Status, o.Channel)
		}
	})
}

// freshID is a new id fragment, so that the events of one run never meet another's.
func freshID() string { return testenv.Random(12) }

// WeChat probes merchants with wrongly signed notifications: refused as it expects, logged at
// info as a probe, not warned about as a key problem.
func TestGapsWeChatProbe(t *testing.T) {
	h := newHarness(t, options{})
	url, logs := h.loggedServer(t, h.applier)
	tn := h.seedOrder(1999)
	m, err := sandbox.signers["wechatpay"].Sign(simulate.Payment{TradeNo: tn, AmountFen: 1999})
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+m.Header.Get("Wechatpay-Signature"))
	before := h.rowCounts()
	r := simulate.Send(t.Context(), h.client, simulate.NotifyURL(url, "wechatpay"), m)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wantChannelReply(t, "wechatpay", response{code: r.Status, body: r.Body}, payment.ReplyRefuse)
	if after := h.rowCounts(); after != before {
		t.Fatalf("a probe changed rows: %+v -> %+v", before, after)
	}
	lines := logs.Lines(t)
	if len(lines) != 1 || lines[0]["level"] != "info" || lines[0]["outcome"] != "probe" || lines[0]["channel"] != "wechatpay" {
		t.Fatalf("log %v, want one info line with outcome probe", lines)
	}

	// A forged signature without the probe's mark is still a warning.
	m.Header.Set("Wechatpay-Signature", base64.StdEncoding.EncodeToString(make([]byte, 256)))
	if r := simulate.Send(t.Context(), h.client, simulate.NotifyURL(url, "wechatpay"), m); r.Status != http.StatusBadRequest {
		t.Fatalf("forged signature: %v", r)
	}
	if lines := logs.Lines(t); len(lines) != 2 || lines[1]["level"] != "warn" || lines[1]["outcome"] != "REFUSED" {
		t.Fatalf("log %v, want a warn REFUSED line for a forgery", lines)
	}
}

// Each channel's apply gets that channel's deadline: WeChat waits 5 s for the reply, the others
// longer.
func TestGapsApplyDeadlinePerChannel(t *testing.T) {
	h := newHarness(t, options{})
	rec := &deadlineApplier{}
	url, _ := h.loggedServer(t, rec)
	want := map[string]time.Duration{"alipay": 8 * time.Second, "wechatpay": 4 * time.Second, "stripe": 8 * time.Second, "unionpay": 8 * time.Second}
	for _, ch := range channelNames {
		t.Run(ch, func(t *testing.T) {
			m, err := sandbox.signers[ch].Sign(simulate.Payment{TradeNo: h.seedOrder(100), AmountFen: 100})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := simulate.Send(t.Context(), h.client, simulate.NotifyURL(url, ch), m)
			end := time.Now()
			wantChannelReply(t, ch, response{code: r.Status, body: r.Body}, payment.ReplySuccess)
			// The handler starts the clock between our start and end.
			if d := rec.take(); d.Before(start.Add(want[ch])) || d.After(end.Add(want[ch])) {
				t.Fatalf("apply deadline %s after the request was sent, want %s", d.Sub(start), want[ch])
			}
		})
	}
}

// deadlineApplier records the deadline each Apply gets and answers APPLIED.
type deadlineApplier struct {
	mu       sync.Mutex
	deadline time.Time
}

func (d *deadlineApplier) Apply(ctx context.Context, _ payment.Event) (payment.Outcome, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deadline, _ = ctx.Deadline()
	return payment.OutcomeApplied, nil
}

func (d *deadlineApplier) take() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// loggedServer serves h's database and channels with applier a, logging every level into the
// returned buffer: for tests about what the handler logs, or hands the applier.
func (h *harness) loggedServer(t *testing.T, a Applier) (string, *testenv.LogBuffer) {
	t.Helper()
	logs := &testenv.LogBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	svc := orders.New(h.db, h.guard, orders.Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, RenderCreate, log)
	srv := New(Config{BodyLimitBytes: 1 << 20, KeyHeader: "Idempotency-Key"}, h.db, h.guard, svc, a, sandbox.channels, log)
	ts := httptest.NewServer(srv.Echo())
	t.Cleanup(ts.Close)
	return ts.URL, logs
}
