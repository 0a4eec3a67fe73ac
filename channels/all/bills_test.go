package all

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/channels/stripe"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// billSandbox is a fake channel of its own (the bills hold every trade of a day, so no other
// test's trades may land in them), the downloaders a gateway configured with the generated
// channels.yaml builds, and one WeChat downloader behind a middleman that alters the bill.
type billSandbox struct {
	man       simulate.Manifest
	signers   map[string]simulate.Signer // and channels: for the notifications a bill line must agree with
	channels  map[string]channels.Channel
	fake      *simulate.Fake
	dl        map[string]channels.BillDownloader
	tampered  channels.BillDownloader
	tamperOn  *bool
	tamperMu  *sync.Mutex
	stripeDay *time.Location
}

var (
	billOnce sync.Once
	billSB   *billSandbox
	billErr  error
)

func testBillSandbox(tb testing.TB) *billSandbox {
	tb.Helper()
	billOnce.Do(func() { billSB, billErr = newBillSandbox() })
	if billErr != nil {
		tb.Fatal(billErr)
	}
	return billSB
}

func newBillSandbox() (*billSandbox, error) {
	dir, err := os.MkdirTemp("", "paygw-bill-")
	if err != nil {
		return nil, err
	}
	// dir stays for the test binary's life: the fake reads the UnionPay merchant certificate
	// from it at each request. It holds test keys only.
	s := &billSandbox{channels: map[string]channels.Channel{}, dl: map[string]channels.BillDownloader{},
		tamperOn: new(bool), tamperMu: &sync.Mutex{}, stripeDay: time.UTC}
	if s.man, s.signers, s.fake, err = channeltest.NewKeys(dir, time.Now()); err != nil {
		return nil, err
	}
	srv := httptest.NewServer(s.fake.Handler()) // lives as long as the test binary
	tamper := httptest.NewServer(s.middleman(s.fake.Handler()))
	env := func(base string) []string {
		return []string{
			"PAYGW_CHANNELS__ALIPAY__GATEWAY_URL=" + base + "/gateway.do",
			"PAYGW_CHANNELS__WECHATPAY__API_BASE_URL=" + base,
			"PAYGW_CHANNELS__STRIPE__API_BASE_URL=" + base,
			"PAYGW_CHANNELS__UNIONPAY__QUERY_URL=" + base + "/gateway/api/queryTrans.do",
		}
	}
	cfg, err := config.Load(s.man.ConfigPath, env(srv.URL))
	if err != nil {
		return nil, err
	}
	chs, err := FromConfig(cfg.Channels)
	if err != nil {
		return nil, err
	}
	for _, ch := range chs {
		s.channels[ch.Name()] = ch
	}
	ds, skipped, err := BillDownloadersFromConfig(cfg.Channels, chs, s.stripeDay, nil)
	if err != nil || len(skipped) > 0 || len(ds) != 4 {
		return nil, errors.Join(err, errors.Join(skipped...), errors.New("want four downloaders"))
	}
	for _, d := range ds {
		s.dl[d.Name()] = d
	}
	tcfg, err := config.Load(s.man.ConfigPath, env(tamper.URL))
	if err != nil {
		return nil, err
	}
	if s.tampered, err = wechatpay.NewBillDownloader(tcfg.Channels.WeChatPay, s.channels["wechatpay"].(*wechatpay.Channel), nil); err != nil {
		return nil, err
	}
	return s, nil
}

// middleman passes everything through, but adds a line to WeChat bill downloads while tamperOn:
// still valid gzip, no longer the bill the signed hash_value names.
func (s *billSandbox) middleman(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v3/billdownload/file" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil && rec.Code == http.StatusOK {
			text, _ := io.ReadAll(zr)
			text = append(text, []byte("`extra\r\n")...)
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write(text)
			_ = zw.Close()
			body = z.Bytes()
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// notified is the event the notification of tr carries, verified at the time it was sent.
func (s *billSandbox) notified(tb testing.TB, tr simulate.FakeTrade, status string) payment.Event {
	tb.Helper()
	m, err := s.signers[tr.Channel].Sign(simulate.Payment{TradeNo: tr.TradeNo, AmountFen: tr.AmountFen, Currency: tr.Currency,
		TxnID: tr.TxnID, Time: tr.PaidAt, Status: status, RefundFen: tr.RefundFen})
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := s.channels[tr.Channel].Verify(m.Body, m.Header, tr.PaidAt)
	if err != nil {
		if ev, err = s.channels[tr.Channel].Verify(m.Body, m.Header, time.Now()); err != nil {
			tb.Fatal(err)
		}
	}
	return ev
}

// billKey is what a bill line and a notification must agree on.
type billKey struct {
	Kind                          bills.Kind
	TradeNo, ChannelTxnID, Refund string
	AmountFen                     int64
	Currency                      string
}

func readBill(t *testing.T, b *channels.BillFile) ([]billKey, bills.Summary) {
	t.Helper()
	r, err := b.Open()
	if err != nil {
		t.Fatal(err)
	}
	var got []billKey
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s bill: %v", b.Channel, err)
		}
		got = append(got, billKey{l.Kind, l.TradeNo, l.ChannelTxnID, l.RefundID, l.AmountFen, l.Currency})
	}
	sortKeys(got)
	return got, r.Summary()
}

func sortKeys(ks []billKey) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].TradeNo != ks[j].TradeNo {
			return ks[i].TradeNo < ks[j].TradeNo
		}
		return ks[i].Kind < ks[j].Kind
	})
}

// billDay is a past day of the channel's zone, n days ago.
func billDayAgo(channel string, n int, stripe *time.Location) time.Time {
	loc := bills.DayZone(channel, stripe)
	y, m, d := time.Now().In(loc).AddDate(0, 0, -n).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// Each channel's download path against the fake: the bill read by the channel's reader holds
// exactly the day's payments and refunds, each as its notification names it (trade, transaction
// id, refund id, amount in minor units, currency); the other days' and the unpaid trades are not
// in it.
func TestBillDownloadRoundTrip(t *testing.T) {
	s := testBillSandbox(t)
	for i, channel := range []string{"alipay", "wechatpay", "unionpay", "stripe"} {
		t.Run(channel, func(t *testing.T) {
			day := billDayAgo(channel, 3+i, s.stripeDay)
			add := func(tr simulate.FakeTrade) simulate.FakeTrade {
				tr.Channel, tr.DropNotify = channel, true
				tr, err := s.fake.Add(context.Background(), tr)
				if err != nil {
					t.Fatal(err)
				}
				return tr
			}
			paid := add(simulate.FakeTrade{TradeNo: channeltest.NewTradeNo("BP"), AmountFen: 1999, Status: simulate.FakePaid, PaidAt: day.Add(10 * time.Hour)})
			refunded := add(simulate.FakeTrade{TradeNo: channeltest.NewTradeNo("BR"), AmountFen: 5001, RefundFen: 1250, Status: simulate.FakeRefunded, PaidAt: day.Add(23*time.Hour + 59*time.Minute + 59*time.Second)})
			add(simulate.FakeTrade{TradeNo: channeltest.NewTradeNo("BW"), AmountFen: 300, Status: simulate.FakePending, PaidAt: day.Add(11 * time.Hour)})
			add(simulate.FakeTrade{TradeNo: channeltest.NewTradeNo("BY"), AmountFen: 400, Status: simulate.FakePaid, PaidAt: day.Add(-time.Second)})
			add(simulate.FakeTrade{TradeNo: channeltest.NewTradeNo("BT"), AmountFen: 500, Status: simulate.FakePaid, PaidAt: day.AddDate(0, 0, 1)})

			var want []billKey
			for _, tr := range []simulate.FakeTrade{paid, refunded} {
				ev := s.notified(t, tr, simulate.StatusPaid)
				want = append(want, billKey{bills.KindPay, ev.TradeNo, ev.ChannelTxnID, "", ev.AmountFen, ev.Currency})
			}
			rf := s.notified(t, refunded, simulate.StatusRefund)
			want = append(want, billKey{bills.KindRefund, rf.TradeNo, rf.ChannelTxnID, rf.RefundID, refunded.RefundFen, rf.Currency})
			sortKeys(want)

			b, err := s.dl[channel].DownloadBill(context.Background(), day)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, sum := readBill(t, b)
			if len(got) != len(want) {
				t.Fatalf("bill lines:\n got  %+v\n want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("line %d:\n got  %+v\n want %+v", i, got[i], want[i])
				}
			}
			if sum.Mismatch != "" {
				t.Errorf("the bill disagrees with its own summary: %s", sum.Mismatch)
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := b.Close(); err != nil { // closing twice is harmless
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// A WeChat day without trades is NO_STATEMENT_EXIST: an empty bill, not an error. Today's bill
// is not made yet: channels.ErrQueryFailed, ask later.
func TestWeChatBillEmptyAndNotYet(t *testing.T) {
	s := testBillSandbox(t)
	day := billDayAgo("wechatpay", 20, s.stripeDay)
	b, err := s.dl["wechatpay"].DownloadBill(context.Background(), day)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Empty() {
		t.Fatal("a day without trades is not an empty bill")
	}
	if got, _ := readBill(t, b); len(got) != 0 {
		t.Fatalf("empty bill has lines %v", got)
	}
	_, err = s.dl["wechatpay"].DownloadBill(context.Background(), billDayAgo("wechatpay", 0, s.stripeDay))
	channeltest.WantErr(t, err, channels.ErrQueryFailed, "today's bill")
	if !strings.Contains(err.Error(), "STATEMENT_CREATING") || !strings.Contains(err.Error(), "the next day") {
		t.Fatalf("today's bill: %v, want the channel's code and when the bill is made", err)
	}
}

// Alipay has no bill for a day not over: the error says so, and when the bill is made.
func TestAlipayBillNotYet(t *testing.T) {
	s := testBillSandbox(t)
	_, err := s.dl["alipay"].DownloadBill(context.Background(), billDayAgo("alipay", 0, s.stripeDay))
	channeltest.WantErr(t, err, channels.ErrQueryFailed, "today's bill")
	if !strings.Contains(err.Error(), "isp.bill_not_exist") || !strings.Contains(err.Error(), "the next day") {
		t.Fatalf("today's bill: %v, want the channel's code and when the bill is made", err)
	}
}

// The middleman changes the bill after the signed answer named its SHA1: refused.
func TestWeChatBillHashMismatch(t *testing.T) {
	s := testBillSandbox(t)
	day := billDayAgo("wechatpay", 21, s.stripeDay)
	if _, err := s.fake.Add(context.Background(), simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("BH"), AmountFen: 100,
		Status: simulate.FakePaid, PaidAt: day.Add(time.Hour), DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	b, err := s.tampered.DownloadBill(context.Background(), day)
	channeltest.WantErr(t, err, channels.ErrBadSignature, "altered bill")
	if b != nil {
		t.Fatal("a bill came back with the error")
	}
	// The same path, unaltered, passes: the middleman alone made the difference.
	b, err = s.dl["wechatpay"].DownloadBill(context.Background(), day)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
}

// Answers that do not verify are refused, for the three channels that sign.
func TestBillBadSignature(t *testing.T) {
	s := testBillSandbox(t)
	for i, channel := range []string{"alipay", "wechatpay", "unionpay"} {
		t.Run(channel, func(t *testing.T) {
			day := billDayAgo(channel, 10+i, s.stripeDay)
			if _, err := s.fake.Add(context.Background(), simulate.FakeTrade{Channel: channel, TradeNo: channeltest.NewTradeNo("BS"), AmountFen: 100,
				Status: simulate.FakePaid, PaidAt: day.Add(time.Hour), DropNotify: true}); err != nil {
				t.Fatal(err)
			}
			s.fake.Break(channel, true)
			defer s.fake.Break(channel, false)
			_, err := s.dl[channel].DownloadBill(context.Background(), day)
			channeltest.WantErr(t, err, channels.ErrBadSignature, "broken signature")
		})
	}
	s.fake.Break("stripe", true)
	defer s.fake.Break("stripe", false)
	_, err := s.dl["stripe"].DownloadBill(context.Background(), billDayAgo("stripe", 10, s.stripeDay))
	channeltest.WantErr(t, err, channels.ErrQueryFailed, "stripe 500")
}

// A channel without its merchant keys has no downloader, as it has no querier.
func TestBillDownloadersNoCredentials(t *testing.T) {
	s := testBillSandbox(t)
	var c config.Channels
	_, err := alipay.NewBillDownloader(c.Alipay, s.channels["alipay"].(*alipay.Channel), nil)
	channeltest.WantErr(t, err, channels.ErrNoCredentials, "alipay")
	_, err = wechatpay.NewBillDownloader(c.WeChatPay, s.channels["wechatpay"].(*wechatpay.Channel), nil)
	channeltest.WantErr(t, err, channels.ErrNoCredentials, "wechatpay")
	_, err = unionpay.NewBillDownloader(c.UnionPay, s.channels["unionpay"].(*unionpay.Channel), nil)
	channeltest.WantErr(t, err, channels.ErrNoCredentials, "unionpay")
	_, err = stripe.NewBillDownloader(c.Stripe, nil, nil)
	channeltest.WantErr(t, err, channels.ErrNoCredentials, "stripe")
}
