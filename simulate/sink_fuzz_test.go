package simulate_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/simulate"
	"github.com/paygw/paygw/webhook"
)

// fuzzSecret is a fixed whsec_ secret (24 zero bytes) for the fuzz targets.
const fuzzSecret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// FuzzSinkReceive posts arbitrary bodies and headers to the sink, signed or not: it must never
// panic, must answer 204 only to a signed body that is an event carrying the header's id and a
// type, and must record exactly such a delivery, as one line the reader gives back.
func FuzzSinkReceive(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"order.paid","timestamp":"2026-12-05T07:00:00Z","data":{"trade_no":"T1"}}`), "evt_1", true)
	f.Add([]byte(`{"id":"evt_1","type":"order.paid"}`), "evt_2", true)
	f.Add([]byte(`{"id":"evt_1","type":"","data":null}`), "evt_1", true)
	f.Add([]byte(`{"id":"evt_1","type":"x","timestamp":"yesterday"}`), "evt_1", true)
	f.Add([]byte(`[1,2`), "evt_1", false)
	f.Add([]byte(nil), "", true)
	key := webhook.MustParseSecret(fuzzSecret)
	f.Fuzz(func(t *testing.T, body []byte, id string, signed bool) {
		var record bytes.Buffer
		sink, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{fuzzSecret}, Record: &record})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
		if signed {
			req.Header = webhook.Headers(id, time.Now(), body, key)
		} else {
			req.Header.Set(webhook.HeaderID, id)
		}
		rec := httptest.NewRecorder()
		sink.Handler().ServeHTTP(rec, req)
		recs, err := simulate.ReadSinkRecords(&record)
		if err != nil {
			t.Fatalf("the sink wrote a record it cannot read: %v", err)
		}
		switch rec.Code {
		case http.StatusNoContent:
			if !signed || len(recs) != 1 || recs[0].WebhookID != id || recs[0].Type == "" {
				t.Fatalf("204 (signed %v) with records %+v for id %q", signed, recs, id)
			}
		case http.StatusBadRequest, http.StatusUnauthorized:
			if len(recs) != 0 {
				t.Fatalf("%d recorded %+v", rec.Code, recs)
			}
		default:
			t.Fatalf("answered %d", rec.Code)
		}
	})
}

// FuzzReadSinkRecords: a record file, whatever it holds, never panics the reader, and every record
// it returns has an id and a type.
func FuzzReadSinkRecords(f *testing.F) {
	f.Add([]byte(`{"webhook_id":"evt_1","type":"order.paid","trade_no":"T1","timestamp":"2026-12-05T07:00:00Z","at":"2026-12-05T07:00:01Z"}` + "\n"))
	f.Add([]byte("{\"webhook_id\":\"evt_1\",\"type\":\"t\"}\n{\"webhook_id\""))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := simulate.ReadSinkRecords(bytes.NewReader(b))
		if err == nil && len(recs) > strings.Count(string(b), "\n") {
			t.Fatalf("%d records from %d lines", len(recs), strings.Count(string(b), "\n"))
		}
		for _, r := range recs {
			if r.WebhookID == "" || r.Type == "" {
				t.Fatalf("record without an id or a type: %+v", r)
			}
		}
	})
}
