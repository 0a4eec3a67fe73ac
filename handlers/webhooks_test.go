package handlers

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
)

// The webhook routes: a redelivery queues the event (to one endpoint or to all that take its
// type) and the list shows it pending; a client's mistakes are 400, an unknown event 404.
// Nothing is POSTed here: no dispatcher serves (delivery's own tests send).
func TestWebhookRoutes(t *testing.T) {
	h := newHarness(t, options{})
	sign := func(string, time.Time, []byte) string { return "v1,x" }
	d, err := delivery.New(h.db, delivery.Options{Endpoints: []delivery.Endpoint{
		{Name: "erp", URL: "http://127.0.0.1:1/hook", Sign: sign},
		{Name: "crm", URL: "http://127.0.0.1:1/crm", Events: []string{"order.refunded"}, Sign: sign},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, h.dsn, `INSERT INTO event (event_id, seq, type, trade_no, body, created_time)
		VALUES ('evt_1', 1, 'order.paid', 'T1', '{}', NOW(3)), ('evt_2', NULL, 'order.paid', 'T2', '{}', NOW(3))`)
	h.srv.cfg.Webhooks = d
	ts := httptest.NewServer(h.srv.Echo())
	t.Cleanup(ts.Close)
	h.url = ts.URL

	for _, c := range []struct {
		name, method, path, token, body string
		code                            int
	}{
		{"to one", "POST", "/v1/events/evt_1/redeliver", testToken, `{"endpoint":"erp"}`, 202},
		{"to all that take it", "POST", "/v1/events/evt_1/redeliver", testToken, "", 202},
		{"unknown endpoint", "POST", "/v1/events/evt_1/redeliver", testToken, `{"endpoint":"nope"}`, 400},
		{"unknown field", "POST", "/v1/events/evt_1/redeliver", testToken, `{"url":"x"}`, 400},
		{"unknown event", "POST", "/v1/events/evt_9/redeliver", testToken, "", 404},
		{"not sequenced yet", "POST", "/v1/events/evt_2/redeliver", testToken, "", 404},
		{"no token", "POST", "/v1/events/evt_1/redeliver", "", "", 401},
		{"bad status", "GET", "/v1/webhooks/deliveries?status=lost", testToken, "", 400},
		{"bad cursor", "GET", "/v1/webhooks/deliveries?cursor=-1", testToken, "", 400},
		{"list", "GET", "/v1/webhooks/deliveries?endpoint=erp&status=pending", testToken, "", 200},
	} {
		r := h.do(c.method, c.path, c.token, nil, c.body)
		if r.code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, r.code, r.body, c.code)
		}
	}
	r := h.do("POST", "/v1/events/evt_1/redeliver", testToken, nil, "")
	var queued struct {
		EventID   string   `json:"event_id"`
		Endpoints []string `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(r.body), &queued); err != nil || queued.EventID != "evt_1" || len(queued.Endpoints) != 1 || queued.Endpoints[0] != "erp" {
		t.Errorf("redeliver to all: %s (crm does not take order.paid)", r.body)
	}
	r = h.do("GET", "/v1/webhooks/deliveries?endpoint=erp", testToken, nil, "")
	var page delivery.Page
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("list: %s", r.body)
	}
	if got := page.Deliveries[0]; got.EventID != "evt_1" || got.Status != "pending" || got.NextAttemptAt == nil || len(got.Attempts) != 0 {
		t.Errorf("listed %+v", got)
	}
}
