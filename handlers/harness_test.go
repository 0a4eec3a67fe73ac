package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

const (
	testAppID  = "2021000000000001"
	testToken  = "test-token-order-service-0001"
	otherToken = "test-token-other-client-00002"
)

// alipayKey is the sandbox "Alipay" key pair of this test binary.
var alipayKey = mustKey()

func mustKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// harness is one gateway on a fresh database, served over loopback.
type harness struct {
	t       *testing.T
	dsn     string
	db      *repository.DB
	guard   *guard.Guard
	applier *apply.Applier
	orders  *orders.Service
	watcher *identity.Watcher // with options.watch
	srv     *Server
	later   atomic.Int64 // how far the server's clock runs ahead of time.Now, in nanoseconds
	url     string
	handler http.Handler // what url serves, for tests that need a server of their own
	// client checks every request and response against api/openapi.yaml; rawClient, for
	// deliberately malformed requests, checks the responses only.
	client, rawClient *http.Client
}

type options struct {
	dsn           string // share another harness's database (a second replica)
	redisDown     bool
	idemDisabled  bool
	noOriginal    bool
	closedDB      bool // MySQL "down": the pool is closed before serving
	twinWait      time.Duration
	guardTTL      time.Duration // idempotency.redis_ttl for the applier (0: 5 s)
	guardOverride *guard.Guard
	bodyLimit     int64
	metrics       *metrics.Metrics
	// watch binds the guard to the database's identity as serve does: checked at start, then
	// every watch (0: no watcher, the guard keeps its plain prefix).
	watch time.Duration
	// tokens are API clients beside the two roles-less (admin) ones every harness has.
	tokens []Token
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	h := &harness{t: t, dsn: o.dsn, client: contractClient(t, true), rawClient: contractClient(t, false)}
	if h.dsn == "" {
		h.dsn = testenv.NewDatabase(t)
	}
	h.db = testenv.Open(t, h.dsn)
	switch {
	case o.guardOverride != nil:
		h.guard = o.guardOverride
	case o.redisDown:
		h.guard = testenv.DeadGuard(t)
	default:
		h.guard = testenv.Guard(t)
	}
	log := testenv.Logger(t)
	guardTTL := o.guardTTL
	if guardTTL == 0 {
		guardTTL = 5 * time.Second
	}
	h.applier = apply.New(h.db, h.guard, guardTTL, log)
	if o.twinWait != 0 {
		h.applier.TwinWait = o.twinWait
	}
	if o.watch > 0 {
		h.guard.Suspend()
		h.watcher = identity.New(h.db, h.guard, log, h.applier.ForgetMarkers)
		if err := h.watcher.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go h.watcher.Run(ctx, o.watch)
	}
	svc := orders.New(h.db, h.guard, orders.Config{
		Enabled: !o.idemDisabled, RedisTTL: 5 * time.Second, ReturnOriginalResult: !o.noOriginal,
	}, RenderCreate, log)
	h.orders = svc
	limit := o.bodyLimit
	if limit == 0 {
		limit = 1 << 20
	}
	srv := New(Config{
		BodyLimitBytes: limit, KeyHeader: "Idempotency-Key",
		Tokens: append([]Token{{Name: "order-service", Secret: testenv.Secret(t, testToken)}, {Name: "other", Secret: testenv.Secret(t, otherToken)}},
			o.tokens...),
		Metrics: o.metrics,
	}, h.db, h.guard, svc, h.applier, sandbox.channels, log)
	srv.now = func() time.Time { return time.Now().Add(time.Duration(h.later.Load())) }
	h.srv = srv
	h.handler = srv.Echo()
	ts := httptest.NewServer(h.handler)
	t.Cleanup(ts.Close)
	h.url = ts.URL
	if o.closedDB {
		h.db.Close()
	}
	return h
}

type response struct {
	code   int
	body   string
	header http.Header
}

func (h *harness) do(method, path, token string, header map[string]string, body string) response {
	h.t.Helper()
	return roundTrip(h.t, h.client, testenv.APIRequest(h.t, method, h.url+path, token, body, header))
}

// roundTrip sends req with client (a harness's client or rawClient) and reads the whole answer.
func roundTrip(t testing.TB, client *http.Client, req *http.Request) response {
	t.Helper()
	r := testenv.Send(t, client, req)
	return response{code: r.Code, body: r.Body, header: r.Header}
}

// putStock sets a SKU's stock through the API.
func (h *harness) putStock(sku string, num int, price int64) {
	h.t.Helper()
	r := h.do("PUT", "/v1/stock/"+sku, testToken, nil, `{"num":`+itoa(int64(num))+`,"price_fen":`+itoa(price)+`}`)
	wantCode(h.t, "put stock", r, 200)
}

// seedOrder inserts a WAIT_PAY order of amount fen directly and returns its trade_no.
func (h *harness) seedOrder(amount int64) string {
	h.t.Helper()
	return h.seedOrderNo(orders.NewTradeNo(time.Now()), amount)
}

// seedOrderNo inserts a WAIT_PAY order with the given trade_no.
func (h *harness) seedOrderNo(tradeNo string, amount int64) string {
	h.t.Helper()
	return testenv.InsertOrder(h.t, h.db, tradeNo, amount)
}

// notifyAlipay signs p with the sandbox key and posts it to /notify/alipay.
func (h *harness) notifyAlipay(p simulate.AlipayPayment) response {
	h.t.Helper()
	return h.post("/notify/alipay", alipayBody(h.t, p))
}

func (h *harness) post(path string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return roundTrip(h.t, h.client, req)
}

func alipayBody(t testing.TB, p simulate.AlipayPayment) []byte {
	t.Helper()
	if p.AppID == "" {
		p.AppID = testAppID
	}
	if p.TradeStatus == "" {
		p.TradeStatus = "TRADE_SUCCESS"
	}
	if p.AlipayTxn == "" {
		p.AlipayTxn = "2026" + p.TradeNo
	}
	if p.NotifyID == "" {
		p.NotifyID = "n-" + p.AlipayTxn + "-" + p.TradeStatus
	}
	b, err := simulate.AlipayBody(p, alipayKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	return testenv.Count(h.t, h.dsn, query, args...)
}

// exec runs a statement on the test database directly, as an operator (or a fault) would.
func (h *harness) exec(query string, args ...any) {
	h.t.Helper()
	testenv.Exec(h.t, h.dsn, query, args...)
}

func (h *harness) order(tradeNo string) payment.Order {
	h.t.Helper()
	return testenv.GetOrder(h.t, h.db, tradeNo)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func alipayPayment(tradeNo string, fen int64) simulate.AlipayPayment {
	return simulate.AlipayPayment{TradeNo: tradeNo, AmountFen: fen}
}

// together runs n calls of fn at once (released at the same instant) and returns their
// responses in order: concurrent duplicates, as channels and retrying clients send them.
func together(n int, fn func() response) []response {
	replies := make([]response, n)
	testenv.AtOnce(n, func(i int) { replies[i] = fn() })
	return replies
}

// wantCode fails t unless r answered with code; what names the request.
func wantCode(t testing.TB, what string, r response, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: %d %s, want %d", what, r.code, r.body, code)
	}
}

// pathCode is a request's path and the status code it must answer with.
type pathCode struct {
	path string
	code int
}

// wantStatuses sends method with token and body to each case's path and wants its code.
func (h *harness) wantStatuses(t *testing.T, method, token, body string, cases map[string]pathCode) {
	t.Helper()
	for name, c := range cases {
		if r := h.do(method, c.path, token, nil, body); r.code != c.code {
			t.Errorf("%s: %s %s: %d %s, want %d", name, method, c.path, r.code, r.body, c.code)
		}
	}
}
