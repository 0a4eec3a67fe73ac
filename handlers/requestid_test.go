package handlers

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
)

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestID: a well-formed X-Request-Id is kept, a missing one generated, a hostile one
// replaced; every reply carries it (errors, unknown routes and the channels' replies too), and
// the handlers' log lines for the request carry it as request_id.
func TestRequestID(t *testing.T) {
	h := newHarness(t, options{})
	logs := &testenv.LogBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	svc := orders.New(h.db, h.guard, orders.Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, RenderCreate, log)
	srv := New(Config{BodyLimitBytes: 1 << 20, KeyHeader: "Idempotency-Key",
		Tokens: []Token{{Name: "order-service", Secret: testenv.Secret(t, testToken)}}}, h.db, h.guard, svc, h.applier, sandbox.channels, log)
	handler := srv.Echo()

	// serve calls the handler directly: the header values are exactly as given, control
	// characters included, which an http.Client would refuse to send.
	serve := func(method, path string, ids []string, header http.Header) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader("a=b"))
		for k, v := range header {
			req.Header[k] = v
		}
		if ids != nil {
			req.Header[RequestIDHeader] = ids
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if got := rec.Header().Values(RequestIDHeader); len(got) != 1 {
			t.Fatalf("%s %s: X-Request-Id = %q, want exactly one", method, path, got)
		}
		return rec
	}
	bearer := http.Header{"Authorization": {"Bearer " + testToken}}

	t.Run("kept", func(t *testing.T) {
		for _, id := range []string{"abc-123", "0af7651916cd43dd8448eb211c80319c", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"req:2026/01/02+x=y_z.1", strings.Repeat("r", maxRequestID)} {
			if got := serve("GET", "/healthz", []string{id}, nil).Header().Get(RequestIDHeader); got != id {
				t.Errorf("sent %q, got back %q", id, got)
			}
		}
	})
	t.Run("generated", func(t *testing.T) {
		a := serve("GET", "/healthz", nil, nil).Header().Get(RequestIDHeader)
		b := serve("GET", "/healthz", nil, nil).Header().Get(RequestIDHeader)
		if !generatedID.MatchString(a) || !generatedID.MatchString(b) || a == b {
			t.Fatalf("generated %q and %q, want two different 32-hex ids", a, b)
		}
	})
	t.Run("hostile replaced", func(t *testing.T) {
		for name, ids := range map[string][]string{
			"too long":       {strings.Repeat("r", maxRequestID+1)},
			"control":        {"abc\x01def"},
			"newline":        {"abc\r\nX-Evil: 1"},
			"NUL":            {"abc\x00"},
			"space":          {"abc def"},
			"quote":          {`abc"}`},
			"non-ASCII":      {"abc\xff"},
			"empty":          {""},
			"sent twice":     {"abc", "def"},
			"JSON injection": {`","level":"fatal`},
		} {
			got := serve("GET", "/healthz", ids, nil).Header().Get(RequestIDHeader)
			if !generatedID.MatchString(got) {
				t.Errorf("%s: sent %q, got back %q, want a generated id", name, ids, got)
			}
		}
	})

	t.Run("every reply and its log line", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path string
			header             http.Header
			status             int
			msg                string // the log line the request writes ("" none)
		}{
			{"health", "GET", "/readyz", nil, 200, ""},
			{"contract", "GET", "/v1/openapi.yaml", bearer, 200, ""},
			{"unauthorized", "GET", "/v1/orders/T1", nil, 401, "request refused"},
			{"not found", "GET", "/v1/orders/T1", bearer, 404, "request refused"},
			{"invalid", "PUT", "/v1/stock/A-1", bearer, 400, "request refused"},
			{"no such route", "GET", "/nope", nil, 404, "request refused"},
			{"wrong method", "POST", "/healthz", nil, 405, "request refused"},
		} {
			id := "rid-" + strings.ReplaceAll(tc.name, " ", "-")
			before := len(logs.Lines(t))
			rec := serve(tc.method, tc.path, []string{id}, tc.header)
			if rec.Code != tc.status || rec.Header().Get(RequestIDHeader) != id {
				t.Errorf("%s: %d with id %q, want %d with %q", tc.name, rec.Code, rec.Header().Get(RequestIDHeader), tc.status, id)
			}
			wantLogged(t, logs.Lines(t)[before:], tc.msg, id)
		}
		for _, ch := range channelNames {
			id := "rid-notify-" + ch
			before := len(logs.Lines(t))
			rec := serve("POST", "/notify/"+ch, []string{id}, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
			if want := sandbox.replies[ch][payment.ReplyRefuse]; rec.Code != want.Status || rec.Body.String() != string(want.Body) {
				t.Errorf("%s: %d %q, want the refusal %d %q", ch, rec.Code, rec.Body, want.Status, want.Body)
			}
			if got := rec.Header().Get(RequestIDHeader); got != id {
				t.Errorf("%s: id %q, want %q", ch, got, id)
			}
			wantLogged(t, logs.Lines(t)[before:], "notification", id)
		}
	})
}

// wantLogged checks the lines a request wrote: each carries its id, and one is msg (none when
// msg is "").
func wantLogged(t *testing.T, lines []map[string]any, msg, id string) {
	t.Helper()
	found := false
	for _, l := range lines {
		if l["request_id"] != id {
			t.Errorf("log line %v, want request_id %q", l, id)
		}
		found = found || l["message"] == msg
	}
	if msg != "" && !found {
		t.Errorf("request %s: lines %v, want a %q line", id, lines, msg)
	}
}
