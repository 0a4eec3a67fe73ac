package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/internal/testenv"
)

// One token per role; finance's is given by its SHA-256 only, as token_sha256 configures it.
const (
	shopToken     = "test-token-role-order-service"
	viewerToken   = "test-token-role-viewer-000001"
	operatorToken = "test-token-role-operator-0001"
	financeToken  = "test-token-role-finance-00001"
	adminToken    = "test-token-role-admin-0000001"
)

func roleTokens(t *testing.T) []Token {
	return []Token{
		{Name: "shop", Secret: testenv.Secret(t, shopToken), Roles: []access.Role{access.OrderService}},
		{Name: "viewer", Secret: testenv.Secret(t, viewerToken), Roles: []access.Role{access.Viewer}},
		{Name: "oncall", Secret: testenv.Secret(t, operatorToken), Roles: []access.Role{access.Operator}},
		{Name: "finance", Digest: sha256.Sum256([]byte(testenv.Secret(t, financeToken))), Roles: []access.Role{access.Finance}},
		{Name: "root", Secret: testenv.Secret(t, adminToken), Roles: []access.Role{access.Admin}},
	}
}

// withWebhooks serves h again with the webhook routes, over a real dispatcher of one endpoint.
func withWebhooks(t *testing.T, h *harness) {
	t.Helper()
	sign := func(string, time.Time, []byte) string { return "v1,x" }
	d, err := delivery.New(h.db, delivery.Options{Endpoints: []delivery.Endpoint{{Name: "erp", URL: "http://127.0.0.1:1/hook", Sign: sign}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.srv.cfg.Webhooks = d
	h.handler = h.srv.Echo()
	ts := httptest.NewServer(h.handler)
	t.Cleanup(ts.Close)
	h.url = ts.URL
}

// TestEveryRouteHasARole walks the routes echo registered, webhook routes included: each /v1
// route has its line in routeCaps, and each line is a registered route.
func TestEveryRouteHasARole(t *testing.T) {
	h := newHarness(t, options{})
	withWebhooks(t, h)
	registered := map[string]bool{}
	for _, r := range h.handler.(*echo.Echo).Routes() {
		if !strings.HasPrefix(r.Path, "/v1") || strings.HasPrefix(r.Method, "echo_") {
			continue // echo's own not-found routes of the group
		}
		key := r.Method + " " + r.Path
		registered[key] = true
		if _, ok := routeCaps[key]; !ok {
			t.Errorf("%s has no line in routeCaps: give it the capability it needs", key)
		}
	}
	for key := range routeCaps {
		if !registered[key] {
			t.Errorf("routeCaps lists %s, which is not a route", key)
		}
	}
}

// TestRolesAllowAndRefuse: each role on a representative route of each kind; a refusal is a 403
// problem naming the role the call needs. The roles-less harness token is admin.
func TestRolesAllowAndRefuse(t *testing.T) {
	h := newHarness(t, options{tokens: roleTokens(t)})
	withWebhooks(t, h)
	tradeNo := h.seedOrder(100)
	testenv.Exec(t, h.dsn, `INSERT INTO event (event_id, seq, type, trade_no, body, created_time)
		VALUES ('evt_1', 1, 'order.paid', ?, '{}', NOW(3))`, tradeNo)
	routes := []struct {
		kind, method, path, body string
		need                     access.Role // the role the 403 names
		allowed                  []string    // the tokens let through
	}{
		{"stock write", "PUT", "/v1/stock/R-1", `{"num":1,"price_fen":5}`, access.OrderService, []string{shopToken, adminToken, testToken}},
		{"order read", "GET", "/v1/orders/" + tradeNo, "", access.OrderService, []string{shopToken, viewerToken, operatorToken, financeToken, adminToken}},
		{"other read", "GET", "/v1/anomalies", "", access.Viewer, []string{viewerToken, operatorToken, financeToken, adminToken}},
		{"anomaly resolve", "POST", "/v1/anomalies/999999/resolve", `{"note":"x"}`, access.Operator, []string{operatorToken, adminToken}},
		{"redeliver", "POST", "/v1/events/evt_1/redeliver", "", access.Operator, []string{operatorToken, adminToken}},
		{"audit", "GET", "/v1/audit", "", access.Finance, []string{financeToken, adminToken, testToken}},
		{"discrepancy resolve", "POST", "/v1/discrepancies/999999/resolve", `{"action":"write_off","note":"x"}`, access.Finance, []string{financeToken, adminToken}},
		{"sign-off", "POST", "/v1/reconciliations/alipay/2020-01-01/signoff", `{}`, access.Finance, []string{financeToken, adminToken}},
		{"discrepancies export", "GET", "/v1/reconciliations/999999/discrepancies.csv", "", access.Finance, []string{financeToken, adminToken}},
		{"anomalies export", "GET", "/v1/anomalies.csv", "", access.Finance, []string{financeToken, adminToken}},
	}
	all := []string{shopToken, viewerToken, operatorToken, financeToken, adminToken}
	for _, r := range routes {
		for _, tok := range all {
			res := h.do(r.method, r.path, tok, nil, r.body)
			if contains(r.allowed, tok) {
				if res.code == 403 || res.code == 401 || res.code >= 500 {
					t.Errorf("%s as %s: %d %s, want it let through", r.kind, tok, res.code, res.body)
				}
				continue
			}
			var p problem
			if res.code != 403 || json.Unmarshal([]byte(res.body), &p) != nil || p.Type != typeForbidden ||
				p.Role != r.need || !strings.Contains(p.Detail, string(r.need)) {
				t.Errorf("%s as %s: %d %s, want a 403 problem naming %s", r.kind, tok, res.code, res.body, r.need)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// auditPage is GET /v1/audit's answer.
type auditPage struct {
	Entries    []access.Entry `json:"entries"`
	NextCursor string         `json:"next_cursor"`
}

func (h *harness) audit(token, query string) auditPage {
	h.t.Helper()
	r := h.do("GET", "/v1/audit"+query, token, nil, "")
	var p auditPage
	if r.code != 200 || json.Unmarshal([]byte(r.body), &p) != nil {
		h.t.Fatalf("GET /v1/audit%s: %d %s", query, r.code, r.body)
	}
	return p
}

// TestAuditRowsForWrites: each HTTP write leaves one row naming the token, the role that allowed
// it, the action, the target and the request id, with the state before and after where there is
// one; a replayed create leaves none.
func TestAuditRowsForWrites(t *testing.T) {
	h := newHarness(t, options{tokens: roleTokens(t)})
	withWebhooks(t, h)
	rid := func(id string) map[string]string { return map[string]string{RequestIDHeader: id} }
	for i, num := range []string{"3", "4"} {
		if r := h.do("PUT", "/v1/stock/AUD-1", shopToken, rid("rid-stock-"+num), `{"num":`+num+`,"price_fen":250}`); r.code != 200 {
			t.Fatalf("put stock %d: %d %s", i, r.code, r.body)
		}
	}
	create := map[string]string{RequestIDHeader: "rid-create", "Idempotency-Key": "aud-key-1"}
	r := h.do("POST", "/v1/orders", shopToken, create, `{"user_id":7,"sku":"AUD-1","num":1}`)
	var o orderView
	if r.code != 201 || json.Unmarshal([]byte(r.body), &o) != nil {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := h.do("POST", "/v1/orders", shopToken, create, `{"user_id":7,"sku":"AUD-1","num":1}`); r.code != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", r.code, r.body)
	}
	if r := h.do("POST", "/v1/orders/"+o.TradeNo+"/attempts", shopToken, rid("rid-attempt"), `{"channel":"alipay"}`); r.code != 201 {
		t.Fatalf("attempt: %d %s", r.code, r.body)
	}
	h.exec(`INSERT INTO anomaly (id, kind, trade_no, channel, channel_txn_id, amount_fen, currency, detail, created_time)
		VALUES (41, 'AMOUNT_MISMATCH', ?, 'alipay', 'X41', 1, 'CNY', 'seeded', NOW(3))`, o.TradeNo)
	if r := h.do("POST", "/v1/anomalies/41/resolve", operatorToken, rid("rid-resolve"), `{"note":"refunded by hand"}`); r.code != 200 {
		t.Fatalf("resolve: %d %s", r.code, r.body)
	}
	testenv.Exec(t, h.dsn, `INSERT INTO event (event_id, seq, type, trade_no, body, created_time)
		VALUES ('evt_a', 1, 'order.paid', ?, '{}', NOW(3))`, o.TradeNo)
	if r := h.do("POST", "/v1/events/evt_a/redeliver", operatorToken, rid("rid-redeliver"), ""); r.code != 202 {
		t.Fatalf("redeliver: %d %s", r.code, r.body)
	}

	stock := h.audit(financeToken, "?target=stock:AUD-1").Entries
	if len(stock) != 2 {
		t.Fatalf("stock rows: %+v, want 2", stock)
	}
	wantRow(t, stock[0], "shop", access.OrderService, "stock.put", "stock:AUD-1", "rid-stock-3")
	if stock[0].Before != nil || !strings.Contains(string(stock[0].After), `"Num":3`) ||
		!strings.Contains(string(stock[1].Before), `"Num":3`) || !strings.Contains(string(stock[1].After), `"Num":4`) {
		t.Errorf("stock before/after: %s -> %s, %s -> %s", stock[0].Before, stock[0].After, stock[1].Before, stock[1].After)
	}
	order := h.audit(adminToken, "?target=order:"+o.TradeNo).Entries
	if len(order) != 2 {
		t.Fatalf("order rows: %+v, want the create and the attempt (not the replay)", order)
	}
	wantRow(t, order[0], "shop", access.OrderService, "order.create", "order:"+o.TradeNo, "rid-create")
	wantRow(t, order[1], "shop", access.OrderService, "attempt.add", "order:"+o.TradeNo, "rid-attempt")
	if !strings.Contains(string(order[0].After), `"user_id":7`) || !strings.Contains(string(order[1].After), `"channel":"alipay"`) {
		t.Errorf("order afters: %s, %s", order[0].After, order[1].After)
	}
	ops := h.audit(financeToken, "?actor=oncall").Entries
	if len(ops) != 2 {
		t.Fatalf("oncall rows: %+v, want the resolve and the redelivery", ops)
	}
	wantRow(t, ops[0], "oncall", access.Operator, "anomaly.resolve", "anomaly:41", "rid-resolve")
	if !strings.Contains(string(ops[0].Before), `"ResolveNote":""`) || !strings.Contains(string(ops[0].After), `"ResolvedBy":"oncall"`) {
		t.Errorf("resolve before/after: %s -> %s", ops[0].Before, ops[0].After)
	}
	wantRow(t, ops[1], "oncall", access.Operator, "event.redeliver", "event:evt_a", "rid-redeliver")
}

func wantRow(t *testing.T, e access.Entry, actor string, role access.Role, action, target, rid string) {
	t.Helper()
	if e.Actor != actor || e.Role != role || e.Action != action || e.Target != target || e.RequestID != rid || e.At.IsZero() {
		t.Errorf("audit row %+v, want %s %s %s %s %s", e, actor, role, action, target, rid)
	}
}

// TestAuditListPages: 150 rows of two actors, a page of 100 and its cursor, the filters, and
// the parameters refused.
func TestAuditListPages(t *testing.T) {
	h := newHarness(t, options{tokens: roleTokens(t)})
	for i := range 150 {
		actor := []string{"ann", "bob"}[i%2]
		e := access.Entry{At: time.Now(), Actor: actor, Role: access.Admin, Action: "test.seed", Target: "t:" + actor, RequestID: "r"}
		if err := h.db.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	first := h.audit(financeToken, "")
	if len(first.Entries) != 100 || first.NextCursor == "" {
		t.Fatalf("first page: %d rows, cursor %q", len(first.Entries), first.NextCursor)
	}
	second := h.audit(financeToken, "?cursor="+first.NextCursor)
	if len(second.Entries) != 50 || second.NextCursor != "" || second.Entries[0].ID <= first.Entries[99].ID {
		t.Fatalf("second page: %d rows, cursor %q", len(second.Entries), second.NextCursor)
	}
	ann := h.audit(adminToken, "?actor=ann")
	bob := h.audit(adminToken, "?target=t:bob&actor=bob")
	if len(ann.Entries) != 75 || len(bob.Entries) != 75 || ann.Entries[0].Actor != "ann" || bob.Entries[74].Target != "t:bob" {
		t.Fatalf("filters: ann %d, bob %d", len(ann.Entries), len(bob.Entries))
	}
	if n := len(h.audit(adminToken, "?actor=ann&target=t:bob").Entries); n != 0 {
		t.Fatalf("ann on bob's target: %d rows", n)
	}
	for _, q := range []string{"?cursor=abc", "?cursor=0", "?cursor=01", "?user=ann", "?actor=a&actor=b", "?target=" + strings.Repeat("x", 192)} {
		if r := h.do("GET", "/v1/audit"+q, financeToken, nil, ""); r.code != 400 {
			t.Errorf("GET /v1/audit%s: %d %s, want 400", q, r.code, r.body)
		}
	}
}

// TestAccessLog: one line per /v1 request, after the answer, with the route's pattern and the
// token's name, never the token; none for the probes.
func TestAccessLog(t *testing.T) {
	h := newHarness(t, options{tokens: roleTokens(t)})
	var buf testenv.LogBuffer
	h.srv.log = zerolog.New(&buf)
	h.handler = h.srv.Echo()
	ts := httptest.NewServer(h.handler)
	t.Cleanup(ts.Close)
	h.url = ts.URL
	tradeNo := h.seedOrder(100)
	h.do("GET", "/v1/orders/"+tradeNo, viewerToken, map[string]string{RequestIDHeader: "rid-log-1"}, "")
	h.do("PUT", "/v1/stock/LOG-1", viewerToken, map[string]string{RequestIDHeader: "rid-log-2"}, `{"num":1,"price_fen":1}`)
	h.do("GET", "/v1/anomalies", "wrong-token-0000000000000", map[string]string{RequestIDHeader: "rid-log-3"}, "")
	h.do("GET", "/healthz", "", nil, "")
	want := []struct {
		method, route, rid, name string
		status                   float64
	}{
		{"GET", "/v1/orders/:trade_no", "rid-log-1", "viewer", 200},
		{"PUT", "/v1/stock/:sku", "rid-log-2", "viewer", 403},
		{"GET", "/v1/anomalies", "rid-log-3", "", 401},
	}
	var lines []map[string]any
	for _, l := range buf.Lines(t) {
		if l["message"] == "request" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("access lines: %v, want %d", lines, len(want))
	}
	for i, w := range want {
		l := lines[i]
		if l["method"] != w.method || l["route"] != w.route || l["status"] != w.status || l["request_id"] != w.rid ||
			l["token_name"] != w.name {
			t.Errorf("line %d: %v, want %+v", i, l, w)
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("line %d: duration_ms %v", i, l["duration_ms"])
		}
	}
	if s := buf.String(); strings.Contains(s, viewerToken) || strings.Contains(s, "wrong-token-0000000000000") {
		t.Errorf("the log holds a token: %s", s)
	}
}
