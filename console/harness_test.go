package console_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// gateway is one paygw on a fresh database, with the console, served over loopback; Alipay's
// side is a fake channel (simulate.Fake) that signs notifications and answers trade queries
// with the sandbox keys.
type gateway struct {
	t       *testing.T
	url     string
	dsn     string
	db      *repository.DB
	console *console.Console
	fake    *simulate.Fake
	alipay  *rsa.PrivateKey // the sandbox "Alipay" key the gateway trusts
	tokens  map[access.Role]string
	logs    *testenv.LogBuffer
}

// roleToken is the name of the token of role r: the role's own name.
func roleName(r access.Role) string { return string(r) }

func newGateway(t *testing.T) *gateway {
	t.Helper()
	dir, man := sandbox.Keys(t)
	g := &gateway{t: t, tokens: map[access.Role]string{}, logs: &testenv.LogBuffer{}}

	// The gateway's handler is set once it is built: the fake channel needs its URL first.
	var handler http.Handler
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(gw.Close)
	g.url = gw.URL
	var err error
	if g.fake, err = simulate.NewFake(dir, gw.URL); err != nil {
		t.Fatal(err)
	}
	fake := httptest.NewServer(g.fake.Handler())
	t.Cleanup(fake.Close)

	cfg, err := config.Load(man.ConfigPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Channels.Alipay.GatewayURL = fake.URL + "/gateway.do"
	cfg.Channels.WeChatPay.Enabled, cfg.Channels.Stripe.Enabled, cfg.Channels.UnionPay.Enabled = false, false, false
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		t.Fatal(err)
	}
	qs, skipped, err := all.QueriersFromConfig(cfg.Channels, chs, &http.Client{Timeout: 10 * time.Second})
	if err != nil || len(skipped) > 0 || len(qs) != 1 {
		t.Fatalf("alipay's querier: %v %v", err, skipped)
	}
	g.alipay = readKey(t, filepath.Join(dir, man.Alipay.PrivateKeyFile))

	g.dsn = testenv.NewDatabase(t)
	g.db = testenv.Open(t, g.dsn)
	guard := testenv.Guard(t)
	log := zerolog.New(io.MultiWriter(g.logs, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	applier := apply.New(g.db, guard, 5*time.Second, log)
	svc := orders.New(g.db, guard, orders.Config{Enabled: true, RedisTTL: 5 * time.Second, ReturnOriginalResult: true}, handlers.RenderCreate, log)
	job := reconcile.New(g.db, applier, qs, reconcile.Config{QueryAfter: time.Minute, QueryMaxAge: 72 * time.Hour, QPS: 50}, log)
	resolve := func(ctx context.Context, id int64, action, note string, e access.Entry) (repository.DiscrepancyItem, error) {
		return reconcile.ResolveDiscrepancy(ctx, g.db, applier, id, action, note, e)
	}
	if g.console, err = console.New(console.Config{}, g.db, guard, job, resolve, log); err != nil {
		t.Fatal(err)
	}
	var tokens []handlers.Token
	for _, r := range access.Roles {
		g.tokens[r] = testenv.Secret(t, "console-test-"+string(r)+"-"+testenv.Random(12))
		tokens = append(tokens, handlers.Token{Name: roleName(r), Secret: g.tokens[r], Roles: []access.Role{r}})
	}
	srv := handlers.New(handlers.Config{BodyLimitBytes: 1 << 20, KeyHeader: "Idempotency-Key", Tokens: tokens, Console: g.console},
		g.db, guard, svc, applier, chs, log)
	handler = srv.Echo()
	return g
}

func readKey(t *testing.T, path string) *rsa.PrivateKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k1, err1 := x509.ParsePKCS1PrivateKey(block.Bytes); err1 == nil {
			return k1
		}
		t.Fatal(err)
	}
	return k.(*rsa.PrivateKey)
}

// api calls /v1 with role r's token.
func (g *gateway) api(r access.Role, method, path, body string, header map[string]string) (int, string) {
	g.t.Helper()
	reply := testenv.Send(g.t, http.DefaultClient, testenv.APIRequest(g.t, method, g.url+path, g.tokens[r], body, header))
	return reply.Code, reply.Body
}

var tradeNoRE = regexp.MustCompile(`"trade_no":"([A-Za-z0-9_-]+)"`)

// createOrder creates an order of amount fen for user through POST /v1/orders, sent to Alipay
// (an attempt the trade query can ask about), and returns its trade_no.
func (g *gateway) createOrder(user, amount int64, merchantID string) string {
	g.t.Helper()
	body := `{"user_id":` + itoa(user) + `,"amount_fen":` + itoa(amount) + `,"currency":"CNY","channel":"alipay"`
	if merchantID != "" {
		body += `,"merchant_order_id":"` + merchantID + `"`
	}
	code, out := g.api(access.OrderService, "POST", "/v1/orders", body+"}", map[string]string{"Idempotency-Key": "k-" + testenv.Random(8)})
	m := tradeNoRE.FindStringSubmatch(out)
	if code != http.StatusCreated || m == nil {
		g.t.Fatalf("create order: %d %s", code, out)
	}
	return m[1]
}

// notifyAlipay sends a signed Alipay notification to /notify/alipay and wants "success".
func (g *gateway) notifyAlipay(p simulate.AlipayPayment) {
	g.t.Helper()
	p.AppID = simulate.SandboxAlipayAppID
	if p.TradeStatus == "" {
		p.TradeStatus = "TRADE_SUCCESS"
	}
	if p.NotifyID == "" {
		p.NotifyID = "n-" + p.AlipayTxn + "-" + testenv.Random(4)
	}
	body, err := simulate.AlipayBody(p, g.alipay)
	if err != nil {
		g.t.Fatal(err)
	}
	res, err := http.Post(g.url+"/notify/alipay", "application/x-www-form-urlencoded", strings.NewReader(string(body)))
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(b) != "success" {
		g.t.Fatalf("notify: %d %s", res.StatusCode, b)
	}
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t      *testing.T
	g      *gateway
	client *http.Client
}

func (g *gateway) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: g.t, g: g, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	code   int
	body   string
	header http.Header
}

func (b *browser) get(path string) page {
	b.t.Helper()
	res, err := b.client.Get(b.g.url + path)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, res)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	res, err := b.client.PostForm(b.g.url+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, res)
}

func read(t *testing.T, res *http.Response) page {
	t.Helper()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{code: res.StatusCode, body: string(body), header: res.Header}
}

var csrfRE = regexp.MustCompile(`name="` + console.CSRFField + `" value="([^"]+)"`)

// csrf is the first CSRF token of a page's forms.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", p.body)
	}
	return m[1]
}

// loggedIn is a new browser logged in with role r's token.
func (g *gateway) loggedIn(r access.Role) *browser {
	g.t.Helper()
	b := g.browser()
	b.login(r)
	return b
}

// wantGet wants GET path to answer code; what names the case.
func (b *browser) wantGet(t *testing.T, what, path string, code int) {
	t.Helper()
	if p := b.get(path); p.code != code {
		t.Errorf("%s: GET %s: %d, want %d", what, path, p.code, code)
	}
}

// login logs in with role r's token and wants the search page.
func (b *browser) login(r access.Role) {
	b.t.Helper()
	form := b.get(console.Prefix + "/login")
	p := b.post(console.Prefix+"/login", url.Values{console.TokenField: {b.g.tokens[r]}, console.CSRFField: {form.csrf(b.t)}})
	if p.code != http.StatusSeeOther || p.header.Get("Location") != console.Prefix+"/search" {
		b.t.Fatalf("login as %s: %d %s %s", r, p.code, p.header.Get("Location"), p.body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func ctx() context.Context { return context.Background() }
