package simulate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
	"github.com/paygw/paygw/webhook"
)

// delivery is one signed POST to the sink.
type delivery struct {
	id, typ, tradeNo string
	at               time.Time // the event's timestamp
}

func (d delivery) body() []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":%q,"timestamp":%q,"data":{"trade_no":%q}}`, d.id, d.typ, d.at.Format(time.RFC3339Nano), d.tradeNo)
}

func post(t *testing.T, client *http.Client, url string, body []byte, h http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	res, err := client.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func TestSinkCounts(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	key := webhook.MustParseSecret(secret)
	sink, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sink.Handler())
	defer srv.Close()
	t0 := time.Now().Add(-time.Hour)
	send := func(d delivery, keys ...webhook.Secret) int {
		b := d.body()
		return post(t, srv.Client(), srv.URL+"/hooks", b, webhook.Headers(d.id, time.Now(), b, keys...))
	}
	paid := delivery{"evt_1", "order.paid", "T1", t0}
	refund := delivery{"evt_2", "order.refunded", "T1", t0.Add(time.Minute)}
	for _, c := range []struct {
		d    delivery
		keys []webhook.Secret
		want int
	}{
		{paid, []webhook.Secret{key}, 204},
		{paid, []webhook.Secret{key}, 204}, // a duplicate
		{delivery{"evt_3", "order.paid", "T2", t0.Add(time.Minute)}, []webhook.Secret{key}, 204},
		{delivery{"evt_4", "order.refunded", "T2", t0}, []webhook.Secret{key}, 204}, // before T2's paid
		{refund, []webhook.Secret{webhook.MustParseSecret(testenv.WebhookSecret(t))}, 401},
		{refund, []webhook.Secret{webhook.MustParseSecret(testenv.WebhookSecret(t)), key}, 204},      // a rotation
		{delivery{"evt_5", "order.paid", "T1", t0.Add(2 * time.Minute)}, []webhook.Secret{key}, 204}, // T1 paid twice
	} {
		if got := send(c.d, c.keys...); got != c.want {
			t.Fatalf("%s: %d, want %d", c.d.id, got, c.want)
		}
	}
	// A body whose id is not the header's is malformed, although signed.
	b := paid.body()
	if got := post(t, srv.Client(), srv.URL, b, webhook.Headers("evt_other", time.Now(), b, key)); got != 400 {
		t.Fatalf("id mismatch: %d, want 400", got)
	}

	st, err := simulate.FetchSinkStats(context.Background(), srv.Client(), srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	want := simulate.SinkStats{Requests: 8, Refused: 1, Malformed: 1, Accepted: 6, Distinct: 5, Duplicates: 1,
		ByType: map[string]int{"order.paid": 3, "order.refunded": 2}, Orders: 2, OrdersPaidTwice: 1, OutOfOrder: 1}
	got := st
	got.PerOrder = nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
	if ids := fmt.Sprint(st.PerOrder["T1"]); len(st.PerOrder["T1"]) != 3 || st.PerOrder["T1"][0].ID != "evt_1" || st.PerOrder["T1"][2].ID != "evt_5" {
		t.Fatalf("T1's events: %s", ids)
	}
}

func TestSinkMisbehaves(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	key := webhook.MustParseSecret(secret)
	draws := []float64{0.1, 0.5, 0.29, 0.31}
	n := 0
	sink, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{secret}, FailRate: 0.3,
		Rand: func() float64 { n++; return draws[(n-1)%len(draws)] }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sink.Handler())
	defer srv.Close()
	var got []int
	for i := range draws {
		d := delivery{fmt.Sprintf("evt_%d", i), "order.closed", "T9", time.Now()}
		got = append(got, post(t, srv.Client(), srv.URL, d.body(), webhook.Headers(d.id, time.Now(), d.body(), key)))
	}
	if fmt.Sprint(got) != "[500 204 500 204]" {
		t.Fatalf("answers %v, want [500 204 500 204] for draws %v under 0.3", got, draws)
	}
	if st := sink.Stats(false); st.Failed != 2 || st.Accepted != 2 || st.Distinct != 2 {
		t.Fatalf("stats %+v", st)
	}

	// --slow: a sender that gives up first is not counted as delivered.
	slow, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{secret}, Slow: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ssrv := httptest.NewServer(slow.Handler())
	defer ssrv.Close()
	d := delivery{"evt_s", "order.paid", "T8", time.Now()}
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if code := post(t, client, ssrv.URL, d.body(), webhook.Headers(d.id, time.Now(), d.body(), key)); code != 0 {
		t.Fatalf("a 2 s sink answered a 200 ms client: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for slow.Stats(false).Abandoned != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want one abandoned", slow.Stats(false))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := slow.Stats(false); st.Accepted != 0 || st.Distinct != 0 {
		t.Fatalf("an abandoned delivery counted as seen: %+v", st)
	}
}

func TestNewSinkRefuses(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	for name, opt := range map[string]simulate.SinkOptions{
		"no secret":        {},
		"bad secret":       {Secrets: []string{"whsec_abc"}},
		"fail rate over 1": {Secrets: []string{secret}, FailRate: 1.5},
		"negative slow":    {Secrets: []string{secret}, Slow: -time.Second},
	} {
		if _, err := simulate.NewSink(opt); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "bad secret" && !errors.Is(err, webhook.ErrBadSecret) {
			t.Errorf("bad secret: %v", err)
		}
	}
}
