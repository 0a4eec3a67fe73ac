package handlers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/orders"
)

const orderBody = `{"user_id":123,"sku":"A-100","num":1}`

func (h *harness) create(token, key, body string) response {
	h.t.Helper()
	hdr := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	return h.do("POST", "/v1/orders", token, hdr, body)
}

func (h *harness) stockNum(sku string) int {
	h.t.Helper()
	return h.count(`SELECT num FROM stock WHERE sku = ?`, sku)
}

func TestCreateOrderIsIdempotent(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 10, 1999)

	first := h.create(testToken, "key-1", orderBody)
	wantCode(t, "create", first, 201)
	var o struct {
		TradeNo   string `json:"trade_no"`
		AmountFen int64  `json:"amount_fen"`
		Currency  string `json:"currency"`
		Status    string `json:"status"`
		CreatedAt string `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(first.body), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.TradeNo) == 0 || len(o.TradeNo) > 32 || o.AmountFen != 1999 || o.Currency != "CNY" || o.Status != "WAIT_PAY" || o.CreatedAt == "" {
		t.Fatalf("created order = %s", first.body)
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a first answer must not say it is replayed")
	}

	// The same request again, with the JSON keys in another order and other spacing: the same
	// canonical body, so the original answer comes back.
	again := h.create(testToken, "key-1", `{ "num":1, "sku":"A-100", "user_id":123 }`)
	if again.code != 201 || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %s (replayed=%q)", again.code, again.body, again.header.Get("Idempotent-Replayed"))
	}
	// The same key with another body is refused; the same key from another client is its own.
	if r := h.create(testToken, "key-1", `{"user_id":123,"sku":"A-100","num":2}`); r.code != 422 {
		t.Fatalf("key reused with another body: %d %s", r.code, r.body)
	}
	if r := h.create(otherToken, "key-1", orderBody); r.code != 201 || r.body == first.body {
		t.Fatalf("other client, same key: %d %s", r.code, r.body)
	}
	if n := h.stockNum("A-100"); n != 8 {
		t.Fatalf("stock = %d, want 8 (two orders)", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'order_create'`); n != 2 {
		t.Fatalf("records = %d, want 2", n)
	}

	// The order and its payment view.
	if r := h.do("GET", "/v1/orders/"+o.TradeNo, testToken, nil, ""); r.code != 200 || !strings.Contains(r.body, o.TradeNo) {
		t.Fatalf("get order: %d %s", r.code, r.body)
	}
	if r := h.do("GET", "/v1/orders/NOPE", testToken, nil, ""); r.code != 404 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unknown order: %d %s %s", r.code, r.header.Get("Content-Type"), r.body)
	}
}

func TestCreateOrderRefusals(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 1, 1999)
	cases := []struct {
		name, token, key, body string
		code                   int
	}{
		{"no token", "", "k", orderBody, 401},
		{"wrong token", "test-token-order-service-0009", "k", orderBody, 401},
		{"missing key", testToken, "", orderBody, 400},
		{"key over 128 bytes", testToken, strings.Repeat("k", 129), orderBody, 400},
		{"key with a tab", testToken, "a\tb", orderBody, 400},
		{"key with non-ASCII bytes", testToken, "ключ", orderBody, 400},
		{"malformed JSON", testToken, "k1", `{"user_id":`, 400},
		{"duplicate JSON key", testToken, "k2", `{"user_id":1,"user_id":2,"sku":"A-100","num":1}`, 400},
		{"unknown field", testToken, "k3", `{"user_id":1,"sku":"A-100","num":1,"price":0}`, 400},
		{"negative num", testToken, "k4", `{"user_id":1,"sku":"A-100","num":-1}`, 400},
		{"huge num", testToken, "k5", `{"user_id":1,"sku":"A-100","num":1e40}`, 400},
		{"sku with SQL", testToken, "k6", `{"user_id":1,"sku":"A' OR '1'='1","num":1}`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.create(tc.token, tc.key, tc.body)
			if r.code != tc.code || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %s, want %d problem", r.code, r.header.Get("Content-Type"), r.body, tc.code)
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record`) + h.count(`SELECT COUNT(*) FROM orders`); n != 0 {
		t.Fatalf("refused requests left %d rows", n)
	}
	if n := h.stockNum("A-100"); n != 1 {
		t.Fatalf("stock = %d, want 1", n)
	}
}

func TestCreateOrderBusinessRefusalsAreFinal(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 1, 1999)
	if r := h.create(testToken, "buy-1", orderBody); r.code != 201 {
		t.Fatalf("first: %d %s", r.code, r.body)
	}
	out := h.create(testToken, "buy-2", orderBody)
	if out.code != 409 || !strings.Contains(out.body, "out of stock") {
		t.Fatalf("out of stock: %d %s", out.code, out.body)
	}
	// Restocking does not change a stored final answer: the key's result is replayed.
	h.putStock("A-100", 5, 1999)
	if r := h.create(testToken, "buy-2", orderBody); r.code != 409 || r.body != out.body || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed out of stock: %d %s", r.code, r.body)
	}
	if r := h.create(testToken, "buy-3", `{"user_id":1,"sku":"NOPE","num":1}`); r.code != 404 {
		t.Fatalf("unknown sku: %d %s", r.code, r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM orders`); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
}

func TestCreateOrderConcurrentSameKey(t *testing.T) {
	for _, redisDown := range []bool{false, true} {
		name := map[bool]string{false: "redis up", true: "redis down"}[redisDown]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, options{redisDown: redisDown})
			h.putStock("A-100", 100, 1999)
			replies := together(50, func() response { return h.create(testToken, "storm", orderBody) })
			var created string
			for i, r := range replies {
				switch r.code {
				case 201:
					if created != "" && r.body != created {
						t.Fatalf("reply %d is another order: %s vs %s", i, r.body, created)
					}
					created = r.body
				case 409:
					if r.header.Get("Retry-After") == "" {
						t.Fatalf("reply %d: 409 without Retry-After", i)
					}
				default:
					t.Fatalf("reply %d = %d %s", i, r.code, r.body)
				}
			}
			if created == "" {
				t.Fatal("no request created the order")
			}
			if o, rec, s := h.count(`SELECT COUNT(*) FROM orders`), h.count(`SELECT COUNT(*) FROM idempotent_record`), h.stockNum("A-100"); o != 1 || rec != 1 || s != 99 {
				t.Fatalf("orders, records, stock = %d, %d, %d; want 1, 1, 99", o, rec, s)
			}
			// Once the winner is done, every later repeat gets the original answer.
			if r := h.create(testToken, "storm", orderBody); r.code != 201 || r.body != created {
				t.Fatalf("after the storm: %d %s", r.code, r.body)
			}
		})
	}
}

func TestCreateOrderInFlightAndOptions(t *testing.T) {
	t.Run("in flight: 409 with Retry-After", func(t *testing.T) {
		h := newHarness(t, options{})
		h.putStock("A-100", 10, 1999)
		canonical, err := orders.Canonical([]byte(orderBody))
		if err != nil {
			t.Fatal(err)
		}
		hash := orders.RequestHash("POST", "/v1/orders", canonical)
		// A processing claim another replica holds (crashed, or still working).
		if _, err := h.db.Claim(t.Context(), "order_create", "order-service", "busy", hash, "someone-else"); err != nil {
			t.Fatal(err)
		}
		r := h.create(testToken, "busy", orderBody)
		if r.code != 409 || r.header.Get("Retry-After") == "" {
			t.Fatalf("processing record: %d %s (Retry-After %q)", r.code, r.body, r.header.Get("Retry-After"))
		}
		// The same claim with another request's hash is a key reuse.
		if r := h.create(testToken, "busy", `{"user_id":9,"sku":"A-100","num":1}`); r.code != 422 {
			t.Fatalf("claim with other hash: %d %s", r.code, r.body)
		}
		// A twin holding the Redis guard.
		lock, err := h.guard.Acquire(t.Context(), "idem:order-service:held", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release(t.Context())
		if r := h.create(testToken, "held", orderBody); r.code != 409 || r.header.Get("Retry-After") == "" {
			t.Fatalf("guard held: %d %s", r.code, r.body)
		}
		if n := h.count(`SELECT COUNT(*) FROM orders`); n != 0 {
			t.Fatalf("orders = %d, want 0", n)
		}
	})
	t.Run("return_original_result false: 409 naming the order", func(t *testing.T) {
		h := newHarness(t, options{noOriginal: true})
		h.putStock("A-100", 10, 1999)
		first := h.create(testToken, "k", orderBody)
		var o struct {
			TradeNo string `json:"trade_no"`
		}
		_ = json.Unmarshal([]byte(first.body), &o)
		r := h.create(testToken, "k", orderBody)
		if r.code != 409 || o.TradeNo == "" || !strings.Contains(r.body, o.TradeNo) {
			t.Fatalf("repeat: %d %s (original %s)", r.code, r.body, first.body)
		}
	})
	t.Run("idempotency disabled: no key needed, no records", func(t *testing.T) {
		h := newHarness(t, options{idemDisabled: true})
		h.putStock("A-100", 10, 1999)
		for range 2 {
			if r := h.create(testToken, "", orderBody); r.code != 201 {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
		}
		if o, rec := h.count(`SELECT COUNT(*) FROM orders`), h.count(`SELECT COUNT(*) FROM idempotent_record`); o != 2 || rec != 0 {
			t.Fatalf("orders, records = %d, %d; want 2, 0", o, rec)
		}
	})
}

func TestQueryPaymentStatus(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 10, 1999)
	var o struct {
		TradeNo string `json:"trade_no"`
	}
	_ = json.Unmarshal([]byte(h.create(testToken, "q-1", orderBody).body), &o)
	for range 3 {
		wantReply(t, h.notifyAlipay(alipayPayment(o.TradeNo, 1999)), 200, alipaySuccess)
	}
	r := h.do("GET", "/v1/payments/"+o.TradeNo, testToken, nil, "")
	wantCode(t, "query", r, 200)
	var got struct {
		Order struct {
			Status string `json:"status"`
		} `json:"order"`
		Notifications []struct {
			Channel, NotifyID, ChannelTxnID, Event, Outcome string
			AmountFen                                       int64  `json:"amount_fen"`
			ReceivedAt                                      string `json:"received_at"`
		} `json:"notifications"`
		Anomalies []json.RawMessage `json:"anomalies"`
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Order.Status != "PAID" || len(got.Notifications) != 1 || got.Anomalies == nil || len(got.Anomalies) != 0 {
		t.Fatalf("payment view = %s", r.body)
	}
	n := got.Notifications[0]
	if n.Channel != "alipay" || n.Outcome != "APPLIED" || n.AmountFen != 1999 || n.Event != "PAID" || n.ReceivedAt == "" {
		t.Fatalf("notification = %+v", n)
	}
	if r := h.do("GET", "/v1/payments/"+o.TradeNo, "", nil, ""); r.code != 401 || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("query without token: %d %v", r.code, r.header)
	}
	// The scheme is case-insensitive (RFC 7235).
	if r := h.do("GET", "/v1/payments/"+o.TradeNo, "", map[string]string{"Authorization": "bearer " + testToken}, ""); r.code != 200 {
		t.Fatalf("lower-case scheme: %d %s", r.code, r.body)
	}
}

func TestCreateOrderAfterRecordPurge(t *testing.T) {
	// A retention job deleted the key's idempotent_record; the order's own unique key still
	// knows the key. The retry must get the existing order, not a second one and not 409 forever.
	h := newHarness(t, options{})
	h.putStock("A-100", 10, 1999)
	first := h.create(testToken, "purged", orderBody)
	wantCode(t, "create", first, 201)
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record`); n != 1 {
		t.Fatalf("records = %d", n)
	}
	h.exec(`DELETE FROM idempotent_record`)
	again := h.create(testToken, "purged", orderBody)
	if again.code != 201 || again.body != first.body {
		t.Fatalf("after the purge: %d %s, want the first order %s", again.code, again.body, first.body)
	}
	if o, s := h.count(`SELECT COUNT(*) FROM orders`), h.stockNum("A-100"); o != 1 || s != 9 {
		t.Fatalf("orders, stock = %d, %d; want 1, 9", o, s)
	}
	if r := h.create(testToken, "purged", orderBody); r.code != 201 || r.body != first.body || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", r.code, r.body)
	}
}

// problemType reads the RFC 9457 type of a problem answer.
func problemType(t *testing.T, r response) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("content type %q of %d %s, want application/problem+json", ct, r.code, r.body)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Status != r.code {
		t.Fatalf("problem %s: %v (status field %d, HTTP %d)", r.body, err, p.Status, r.code)
	}
	return p.Type
}

// Every situation a client acts on differently has its own problem type, so a client can branch
// on type alone; the two 409s that mean "ask again" and "never again" are told apart.
func TestProblemTypesTellSituationsApart(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("A-100", 10, 1999)
	h.putStock("ONE", 1, 100)
	canonical, _ := orders.Canonical([]byte(orderBody))
	if _, err := h.db.Claim(t.Context(), "order_create", "order-service", "busy", orders.RequestHash("POST", "/v1/orders", canonical), "someone-else"); err != nil {
		t.Fatal(err)
	}
	_ = h.create(testToken, "take-one", `{"user_id":1,"sku":"ONE","num":1}`)
	_ = h.create(testToken, "used", orderBody)

	cases := []struct {
		name     string
		r        response
		code     int
		typ      string
		replayed bool
	}{
		{"in flight", h.create(testToken, "busy", orderBody), 409, "urn:paygw:problem:in-flight", false},
		{"key reused", h.create(testToken, "used", `{"user_id":7,"sku":"A-100","num":1}`), 422, "urn:paygw:problem:idempotency-key-reused", false},
		{"out of stock", h.create(testToken, "none-left", `{"user_id":1,"sku":"ONE","num":1}`), 409, "urn:paygw:problem:out-of-stock", false},
		{"out of stock, replayed", h.create(testToken, "none-left", `{"user_id":1,"sku":"ONE","num":1}`), 409, "urn:paygw:problem:out-of-stock", true},
		{"unknown sku", h.create(testToken, "nosku", `{"user_id":1,"sku":"NOPE","num":1}`), 404, "urn:paygw:problem:unknown-sku", false},
		{"invalid", h.create(testToken, "bad", `{"user_id":0,"sku":"A-100","num":1}`), 400, "urn:paygw:problem:invalid-request", false},
		{"no key", h.create(testToken, "", orderBody), 400, "urn:paygw:problem:invalid-request", false},
		{"unauthorized", h.create("", "k", orderBody), 401, "urn:paygw:problem:unauthorized", false},
		{"not found", h.do("GET", "/v1/orders/PNOSUCH", testToken, nil, ""), 404, "urn:paygw:problem:not-found", false},
	}
	for _, c := range cases {
		if c.r.code != c.code || problemType(t, c.r) != c.typ {
			t.Errorf("%s: %d %s, want %d with type %s", c.name, c.r.code, c.r.body, c.code, c.typ)
		}
		if got := c.r.header.Get("Idempotent-Replayed") == "true"; got != c.replayed {
			t.Errorf("%s: replayed = %v, want %v", c.name, got, c.replayed)
		}
	}
	if r := cases[0].r; r.header.Get("Retry-After") == "" {
		t.Errorf("in flight without Retry-After")
	}

	t.Run("key used while return_original_result is false", func(t *testing.T) {
		h := newHarness(t, options{noOriginal: true})
		h.putStock("A-100", 10, 1999)
		_ = h.create(testToken, "k", orderBody)
		r := h.create(testToken, "k", orderBody)
		if r.code != 409 || problemType(t, r) != "urn:paygw:problem:idempotency-key-used" || r.header.Get("Retry-After") != "" {
			t.Fatalf("repeat: %d %s (Retry-After %q)", r.code, r.body, r.header.Get("Retry-After"))
		}
	})
}

// A record lost to retention is adopted from the order's own unique key; the adoption obeys the
// same rules as a replay: return_original_result, and the request hash.
func TestAdoptedOrderObeysReplayRules(t *testing.T) {
	purge := func(h *harness) string {
		h.putStock("A-100", 10, 1999)
		first := h.create(testToken, "purged", orderBody)
		wantCode(t, "create", first, 201)
		h.exec(`DELETE FROM idempotent_record`)
		return first.body
	}
	t.Run("another body gets 422, never the old order; the original body still gets it", func(t *testing.T) {
		h := newHarness(t, options{})
		original := purge(h)
		r := h.create(testToken, "purged", `{"user_id":5,"sku":"A-100","num":3}`)
		if r.code != 422 || problemType(t, r) != "urn:paygw:problem:idempotency-key-reused" || strings.Contains(r.body, "trade_no") {
			t.Fatalf("other body after the purge: %d %s", r.code, r.body)
		}
		if r := h.create(testToken, "purged", orderBody); r.code != 201 || r.body != original {
			t.Fatalf("original body after the adoption: %d %s, want %s", r.code, r.body, original)
		}
		if o, s := h.count(`SELECT COUNT(*) FROM orders`), h.stockNum("A-100"); o != 1 || s != 9 {
			t.Fatalf("orders, stock = %d, %d; want 1, 9", o, s)
		}
	})
	t.Run("return_original_result false: 409 naming the order", func(t *testing.T) {
		h := newHarness(t, options{noOriginal: true})
		original := purge(h)
		var o struct {
			TradeNo string `json:"trade_no"`
		}
		_ = json.Unmarshal([]byte(original), &o)
		r := h.create(testToken, "purged", orderBody)
		if r.code != 409 || problemType(t, r) != "urn:paygw:problem:idempotency-key-used" || o.TradeNo == "" || !strings.Contains(r.body, o.TradeNo) {
			t.Fatalf("after the purge: %d %s (original %s)", r.code, r.body, original)
		}
	})
}
