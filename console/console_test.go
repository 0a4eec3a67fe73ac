package console_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// hostileSubject is what an attacker may put in a channel's subject: it must be shown as text.
const hostileSubject = `<script>window.pwned=1</script><img src=x onerror="window.pwned=1">`

// seeded is what seed put in the books.
type seeded struct {
	paid, txn, merchant string // an order paid through Alipay, its channel txn id, its merchant id
	user                int64
	anomaly             int64 // an open AMOUNT_MISMATCH anomaly of another order
	anomalyOrder        string
	waiting             string // an order sent to Alipay whose notification never came
	run                 int64  // a complete bill run of alipay's day
	day                 string
}

// seed fills the books the way production does: orders through /v1, signed notifications (one
// with a hostile subject, one with a wrong amount), and a bill run with its discrepancies.
func seed(g *gateway) seeded {
	g.t.Helper()
	s := seeded{user: 4200 + time.Now().UnixNano()%1000, merchant: "shop-" + testenv.Random(4)}
	if err := g.db.EnsureWebhookEndpoint(ctx(), webhookEndpoint, "http://127.0.0.1:9/webhooks", time.Now()); err != nil {
		g.t.Fatal(err)
	}
	s.paid = g.createOrder(s.user, 1999, s.merchant)
	s.txn = "2026" + testenv.Random(8)
	g.notifyAlipay(simulate.AlipayPayment{TradeNo: s.paid, AlipayTxn: s.txn, AmountFen: 1999, Subject: hostileSubject})
	deliver(g, s.paid)

	s.anomalyOrder = g.createOrder(s.user, 500, "")
	g.notifyAlipay(simulate.AlipayPayment{TradeNo: s.anomalyOrder, AlipayTxn: "2026" + testenv.Random(8), AmountFen: 1, Subject: hostileSubject})
	rows, err := g.db.Anomalies(ctx(), s.anomalyOrder)
	if err != nil || len(rows) != 1 || rows[0].Kind != payment.OutcomeAmountMismatch {
		g.t.Fatalf("want one AMOUNT_MISMATCH anomaly, got %+v %v", rows, err)
	}
	s.anomaly = rows[0].ID

	s.waiting = g.createOrder(s.user, 3000, "")

	day := time.Now().UTC().AddDate(0, 0, -1).Truncate(24 * time.Hour)
	s.day = day.Format(time.DateOnly)
	run, err := g.db.StartRun(ctx(), "alipay", repository.SourceChannel, day, time.Now())
	if err != nil {
		g.t.Fatal(err)
	}
	s.run = run
	err = g.db.PutDiscrepancies(ctx(), []repository.Discrepancy{
		{RunID: run, Channel: "alipay", BillDate: day, LineKey: "k1", Class: "CHANNEL_ONLY", TradeNo: s.waiting, ChannelTxnID: "2026bill1",
			BillAmountFen: nullInt(3000), LocalStatus: payment.OrderWaitPay, Repair: "APPLIED", Detail: hostileSubject},
		{RunID: run, Channel: "alipay", BillDate: day, LineKey: "k2", Class: "AMOUNT_MISMATCH", TradeNo: s.anomalyOrder, ChannelTxnID: "2026bill2",
			BillAmountFen: nullInt(1), LocalAmountFen: nullInt(500), LocalStatus: payment.OrderWaitPay, Detail: "the bill says 0.01"},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	err = g.db.CompleteRun(ctx(), run, repository.RunTotals{Lines: 3, Trusted: true,
		Counts: map[string]int{"MATCHED": 1, "CHANNEL_ONLY": 1, "AMOUNT_MISMATCH": 1}}, time.Now())
	if err != nil {
		g.t.Fatal(err)
	}
	return s
}

// webhookEndpoint is the merchant's endpoint seed delivers the paid order's event to.
const webhookEndpoint = "fulfil"

// deliver does what the webhook dispatcher does with an order's events, through the same
// repository calls: number them, fan them out to the endpoint, and record one answered attempt.
func deliver(g *gateway, tradeNo string) {
	g.t.Helper()
	now := time.Now().UTC()
	if _, err := g.db.SequenceEvents(ctx(), 100); err != nil {
		g.t.Fatal(err)
	}
	evs, err := g.db.EventsAfter(ctx(), 0, 100)
	if err != nil {
		g.t.Fatal(err)
	}
	cur, err := g.db.WebhookCursor(ctx(), webhookEndpoint, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	var rows []repository.NewDelivery
	for _, ev := range evs {
		if ev.TradeNo == tradeNo {
			rows = append(rows, repository.NewDelivery{Endpoint: webhookEndpoint, Event: ev, Status: repository.DeliveryPending, Due: now})
		}
	}
	if len(rows) != 1 {
		g.t.Fatalf("%d events of %s, want its order.paid", len(rows), tradeNo)
	}
	if err := g.db.FanOut(ctx(), webhookEndpoint, 0, cur, evs[len(evs)-1].Seq, rows); err != nil {
		g.t.Fatal(err)
	}
	due, err := g.db.DueDeliveries(ctx(), 0, []string{webhookEndpoint}, now.Add(time.Second), 10)
	if err != nil || len(due) != 1 {
		g.t.Fatalf("due deliveries %+v %v", due, err)
	}
	att := repository.WebhookAttempt{DeliveryID: due[0].ID, At: now, StatusCode: 200, LatencyMS: 12}
	if err := g.db.RecordAttempt(ctx(), due[0], att, repository.DeliveryDelivered, nil, now); err != nil {
		g.t.Fatal(err)
	}
}

// pages lists every console page a logged-in user may ask for, for the seeded books.
func (s seeded) pages() []string {
	return []string{
		console.Prefix + "/search",
		console.Prefix + "/search?q=" + url.QueryEscape(s.txn),
		console.Prefix + "/orders/" + s.paid,
		console.Prefix + "/anomalies",
		console.Prefix + "/reconciliations",
		console.Prefix + "/reconciliations/alipay/" + s.day,
		console.Prefix + "/audit",
	}
}

// TestNoPageWithoutLogin: every page sends a browser without a session to the login form, every
// form post is refused, and even then the CSP holds.
func TestNoPageWithoutLogin(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	b := g.browser()
	for _, path := range append(s.pages(), console.Prefix, console.Prefix+"/", console.Prefix+"/nothing-here",
		console.Prefix+"/static/", console.Prefix+"/static/other.css") {
		p := b.get(path)
		if p.code != http.StatusSeeOther || p.header.Get("Location") != console.Prefix+"/login" {
			t.Errorf("GET %s without a login: %d to %q, want 303 to the login page", path, p.code, p.header.Get("Location"))
		}
		if p.header.Get("Content-Security-Policy") != console.CSP {
			t.Errorf("GET %s: CSP %q", path, p.header.Get("Content-Security-Policy"))
		}
	}
	for _, path := range []string{"/orders/" + s.paid + "/ask", "/anomalies/" + itoa(s.anomaly) + "/resolve", "/logout",
		"/discrepancies/1/resolve", "/reconciliations/alipay/" + s.day + "/signoff"} {
		p := b.post(console.Prefix+path, url.Values{console.NoteField: {"x"}, console.CSRFField: {"x"}})
		if p.code != http.StatusUnauthorized {
			t.Errorf("POST %s without a login: %d, want 401", path, p.code)
		}
	}
	if a, _ := g.db.Anomalies(ctx(), s.anomalyOrder); a[0].ResolvedAt != nil {
		t.Fatal("a post without a login resolved the anomaly")
	}
}

// TestLoginRefusesBadTokens: a wrong, empty, over-long or near-miss token gets the form again
// with "invalid token" and nothing else, and no session.
func TestLoginRefusesBadTokens(t *testing.T) {
	g := newGateway(t)
	for name, token := range map[string]string{
		"wrong":      "not-a-token-of-this-gateway",
		"empty":      "",
		"near miss":  g.tokens[access.Admin] + "x",
		"prefix":     g.tokens[access.Admin][:10],
		"too long":   strings.Repeat("a", 4096),
		"bearer":     "Bearer " + g.tokens[access.Admin],
		"control":    g.tokens[access.Admin] + "\x00",
		"other case": strings.ToUpper(g.tokens[access.Admin]),
	} {
		t.Run(name, func(t *testing.T) {
			b := g.browser()
			form := b.get(console.Prefix + "/login")
			p := b.post(console.Prefix+"/login", url.Values{console.TokenField: {token}, console.CSRFField: {form.csrf(t)}})
			if p.code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", p.code)
			}
			if !strings.Contains(p.body, `id="error">invalid token</p>`) {
				t.Fatalf("the refusal does not say exactly \"invalid token\":\n%s", p.body)
			}
			for _, r := range access.Roles {
				if strings.Contains(p.body, ">"+string(r)+"<") || strings.Contains(p.body, "("+string(r)+")") {
					t.Fatalf("the refusal names role %s", r)
				}
			}
			if b.session() != "" {
				t.Fatal("a refused login got a session cookie")
			}
			if b.get(console.Prefix+"/search").code != http.StatusSeeOther {
				t.Fatal("a refused login can see the search page")
			}
		})
	}
	t.Run("no csrf", func(t *testing.T) {
		b := g.browser()
		b.get(console.Prefix + "/login")
		p := b.post(console.Prefix+"/login", url.Values{console.TokenField: {g.tokens[access.Admin]}})
		if p.code != http.StatusForbidden || b.session() != "" {
			t.Fatalf("a login without its CSRF token: %d, session %q", p.code, b.session())
		}
	})
	t.Run("csrf of another form", func(t *testing.T) {
		other := g.browser().get(console.Prefix + "/login").csrf(t)
		b := g.browser()
		b.get(console.Prefix + "/login")
		p := b.post(console.Prefix+"/login", url.Values{console.TokenField: {g.tokens[access.Admin]}, console.CSRFField: {other}})
		if p.code != http.StatusForbidden || b.session() != "" {
			t.Fatalf("a login with another browser's CSRF token: %d, session %q", p.code, b.session())
		}
	})
}

// session is the browser's session cookie for the console, "" for none.
func (b *browser) session() string {
	u, _ := url.Parse(b.g.url + console.Prefix + "/")
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == console.SessionCookie {
			return c.Value
		}
	}
	return ""
}

// TestCookieFlags: the session cookie is HttpOnly, SameSite=Strict, scoped to /console, expires,
// and is Secure when the request came over TLS (as the proxy says).
func TestCookieFlags(t *testing.T) {
	g := newGateway(t)
	for name, proto := range map[string]string{"plain": "", "behind TLS": "https"} {
		t.Run(name, func(t *testing.T) {
			b := g.browser()
			form := b.get(console.Prefix + "/login")
			req, _ := http.NewRequest("POST", g.url+console.Prefix+"/login", strings.NewReader(url.Values{
				console.TokenField: {g.tokens[access.Viewer]}, console.CSRFField: {form.csrf(t)}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if proto != "" {
				req.Header.Set("X-Forwarded-Proto", proto)
			}
			res, err := b.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			c := testenv.Cookie(res.Cookies(), console.SessionCookie)
			if c == nil {
				t.Fatalf("no session cookie: %d", res.StatusCode)
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != console.Prefix || c.Secure != (proto == "https") {
				t.Fatalf("cookie %s: HttpOnly %v, SameSite %v, Path %q, Secure %v", c.Raw, c.HttpOnly, c.SameSite, c.Path, c.Secure)
			}
			if c.MaxAge != int(console.DefaultSessionTTL/time.Second) {
				t.Fatalf("cookie %s: Max-Age %d, want the session's %s", c.Raw, c.MaxAge, console.DefaultSessionTTL)
			}
		})
	}
}

// TestSessionExpiry: a session ends at its expiry, which is inside what is signed; a cookie
// altered to live longer is no session at all.
func TestSessionExpiry(t *testing.T) {
	g := newGateway(t)
	b := g.loggedIn(access.Viewer)
	if p := b.get(console.Prefix + "/search"); p.code != http.StatusOK {
		t.Fatalf("search right after the login: %d", p.code)
	}
	console.SetNow(g.console, func() time.Time { return time.Now().Add(console.DefaultSessionTTL - time.Minute) })
	if p := b.get(console.Prefix + "/search"); p.code != http.StatusOK {
		t.Fatalf("a minute before the expiry: %d", p.code)
	}
	console.SetNow(g.console, func() time.Time { return time.Now().Add(console.DefaultSessionTTL + time.Second) })
	p := b.get(console.Prefix + "/search")
	if p.code != http.StatusSeeOther || p.header.Get("Location") != console.Prefix+"/login" {
		t.Fatalf("after the expiry: %d %q, want the login page", p.code, p.header.Get("Location"))
	}
	if b.session() != "" {
		t.Fatal("the expired session's cookie was not deleted")
	}

	console.SetNow(g.console, time.Now)
	b.login(access.Viewer)
	value := b.session()
	body, sig, _ := strings.Cut(value, ".")
	forged := strings.Replace(body, "e", "f", 1) + "." + sig
	u, _ := url.Parse(g.url + console.Prefix + "/")
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: console.SessionCookie, Value: forged, Path: console.Prefix}})
	if p := b.get(console.Prefix + "/search"); p.code != http.StatusSeeOther {
		t.Fatalf("an altered session: %d, want the login page", p.code)
	}
}

// TestCSRF: every console post without the session's CSRF token, or with a wrong one, is 403
// and changes nothing.
func TestCSRF(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	b := g.loggedIn(access.Operator)
	other := g.loggedIn(access.Operator)
	foreign := other.get(console.Prefix + "/anomalies").csrf(t)
	for name, token := range map[string][]string{"missing": nil, "empty": {""}, "wrong": {"deadbeef"}, "another session's": {foreign}} {
		for _, path := range []string{"/anomalies/" + itoa(s.anomaly) + "/resolve", "/orders/" + s.waiting + "/ask", "/logout"} {
			form := url.Values{console.NoteField: {"refunded by hand"}}
			if token != nil {
				form[console.CSRFField] = token
			}
			if p := b.post(console.Prefix+path, form); p.code != http.StatusForbidden {
				t.Errorf("%s CSRF token on %s: %d, want 403", name, path, p.code)
			}
		}
	}
	if a, _ := g.db.Anomalies(ctx(), s.anomalyOrder); a[0].ResolvedAt != nil {
		t.Fatalf("a post without the CSRF token resolved the anomaly: %+v", a[0])
	}
	if n := testenv.Count(t, g.dsn, `SELECT COUNT(*) FROM audit_log WHERE actor = 'operator'`); n != 0 {
		t.Fatalf("%d audit rows after refused posts", n)
	}
	if b.get(console.Prefix+"/search").code != http.StatusOK {
		t.Fatal("a logout without the CSRF token logged out")
	}
	// With the token: out, and the cookie goes.
	p := b.post(console.Prefix+"/logout", url.Values{console.CSRFField: {b.get(console.Prefix + "/search").csrf(t)}})
	if p.code != http.StatusSeeOther || b.session() != "" || b.get(console.Prefix+"/search").code != http.StatusSeeOther {
		t.Fatalf("logout: %d, session %q", p.code, b.session())
	}
}

// TestCSPOnEveryPage: every page, for every reading role, carries the CSP (script from 'self'
// only, no unsafe-inline or unsafe-eval), and no page holds a script or an inline handler.
func TestCSPOnEveryPage(t *testing.T) {
	if strings.Contains(console.CSP, "unsafe-inline") || strings.Contains(console.CSP, "unsafe-eval") ||
		!strings.Contains(console.CSP, "script-src 'self'") {
		t.Fatalf("CSP %q", console.CSP)
	}
	g := newGateway(t)
	s := seed(g)
	b := g.loggedIn(access.Admin)
	for _, path := range append(s.pages(), console.Prefix+"/login", console.Prefix+"/nothing-here", console.Prefix+"/static/console.css") {
		p := b.get(path)
		if path != console.Prefix+"/nothing-here" && p.code != http.StatusOK {
			t.Errorf("GET %s: %d", path, p.code)
		}
		if got := p.header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("GET %s: CSP %q", path, got)
		}
		if strings.Contains(p.body, "<script") || inlineHandler.MatchString(p.body) {
			t.Errorf("GET %s: the page holds a script:\n%s", path, p.body)
		}
	}
}

// inlineHandler finds an element with an event handler attribute (onerror=, onclick=, ...).
var inlineHandler = regexp.MustCompile(`<[a-zA-Z][^>]*\son[a-z]+\s*=`)

// TestChannelTextEscaped: a hostile subject and bill detail are shown as text.
func TestChannelTextEscaped(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	b := g.loggedIn(access.Viewer)
	escaped := html.EscapeString(hostileSubject)
	for _, path := range []string{console.Prefix + "/orders/" + s.paid, console.Prefix + "/reconciliations/alipay/" + s.day} {
		p := b.get(path)
		if !strings.Contains(p.body, escaped) && !strings.Contains(p.body, strings.ReplaceAll(escaped, "&#34;", "&quot;")) {
			t.Errorf("%s does not show the hostile text escaped:\n%s", path, p.body)
		}
		if strings.Contains(p.body, hostileSubject) {
			t.Errorf("%s holds the hostile text raw", path)
		}
	}
}

// TestOrderPage: an order's page shows why, its facts, its notifications, and its events with
// their deliveries.
func TestOrderPage(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	b := g.loggedIn(access.Viewer)
	p := b.get(console.Prefix + "/orders/" + s.paid)
	for _, want := range []string{`id="why" class="why">Paid through alipay`, "order.paid", webhookEndpoint + ": <b>delivered</b>", "HTTP 200",
		"TRADE_SUCCESS", "19.99 CNY", s.txn, s.merchant} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the order's page lacks %q", want)
		}
	}
	b.wantGet(t, "an unknown order", console.Prefix+"/orders/P0000000000000000000000000000", http.StatusNotFound)
	b.wantGet(t, "a malformed trade_no", console.Prefix+"/orders/"+url.PathEscape("<x>"), http.StatusNotFound)
}

// TestSearch: the one box finds an order by each of its keys.
func TestSearch(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	b := g.loggedIn(access.Viewer)
	for name, q := range map[string]string{"trade_no": s.paid, "channel txn id": s.txn, "merchant order id": s.merchant,
		"user id": strconv.FormatInt(s.user, 10), "padded": "  " + s.txn + " "} {
		p := b.get(console.Prefix + "/search?q=" + url.QueryEscape(q))
		if p.code != http.StatusOK || !strings.Contains(p.body, `href="/console/orders/`+s.paid+`"`) {
			t.Errorf("search by %s: %d, no link to %s:\n%s", name, p.code, s.paid, p.body)
		}
	}
	if p := b.get(console.Prefix + "/search?q=nothing-like-it"); !strings.Contains(p.body, `id="none"`) {
		t.Error("a search that finds nothing does not say so")
	}
	b.wantGet(t, "a search with a control character", console.Prefix+"/search?q="+url.QueryEscape("a\x00b"), http.StatusBadRequest)
}

// TestRoles: buttons show for the roles that may use them, and the posts behind them check the
// role again; a console write is audited like a /v1 write.
func TestRoles(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	viewer := g.loggedIn(access.Viewer)
	for _, path := range []string{console.Prefix + "/anomalies", console.Prefix + "/orders/" + s.anomalyOrder} {
		p := viewer.get(path)
		if p.code != http.StatusOK || strings.Contains(p.body, "resolve-button") || strings.Contains(p.body, `id="ask"`) {
			t.Errorf("viewer on %s: %d, resolve or ask button shown", path, p.code)
		}
	}
	csrf := viewer.get(console.Prefix + "/search").csrf(t)
	if p := viewer.post(console.Prefix+"/anomalies/"+itoa(s.anomaly)+"/resolve", url.Values{console.CSRFField: {csrf}, console.NoteField: {"x"}}); p.code != http.StatusForbidden ||
		!strings.Contains(p.body, access.Names(access.Needed(access.AnomaliesResolve))) {
		t.Errorf("viewer resolving: %d %s", p.code, p.body)
	}
	if p := viewer.post(console.Prefix+"/orders/"+s.waiting+"/ask", url.Values{console.CSRFField: {csrf}}); p.code != http.StatusForbidden {
		t.Errorf("viewer asking: %d", p.code)
	}
	// Discrepancies and the day's sign-off are finance's (and admin's): an operator sees no form
	// and is refused; nothing changes.
	for _, r := range []access.Role{access.Viewer, access.Operator} {
		b := g.loggedIn(r)
		day := b.get(console.Prefix + "/reconciliations/alipay/" + s.day)
		if day.code != http.StatusOK || strings.Contains(day.body, "resolve-discrepancy") || strings.Contains(day.body, "signoff-form") {
			t.Errorf("%s on the day page: %d, a resolve or sign-off form shown", r, day.code)
		}
		form := url.Values{console.CSRFField: {day.csrf(t)}, console.NoteField: {"x"}, console.ActionField: {reconcile.ActionWriteOff}}
		for path, cap := range map[string]access.Capability{"/discrepancies/1/resolve": access.DiscrepanciesResolve,
			"/reconciliations/alipay/" + s.day + "/signoff": access.SignOff} {
			if p := b.post(console.Prefix+path, form); p.code != http.StatusForbidden || !strings.Contains(p.body, access.Names(access.Needed(cap))) {
				t.Errorf("%s posting %s: %d %s", r, path, p.code, p.body)
			}
		}
	}
	day, _ := time.Parse(time.DateOnly, s.day)
	if so, err := g.db.DaySignOff(ctx(), "alipay", day); !errors.Is(err, payment.ErrNotFound) {
		t.Errorf("refused posts left a sign-off: %+v %v", so, err)
	}
	if d, err := g.db.GetDiscrepancy(ctx(), 1); err == nil && d.Resolution != nil {
		t.Errorf("refused posts resolved discrepancy 1: %+v", d)
	}
	viewer.wantGet(t, "viewer on the audit trail", console.Prefix+"/audit", http.StatusForbidden)
	shop := g.loggedIn(access.OrderService)
	shop.wantGet(t, "order_service on the search", console.Prefix+"/search", http.StatusForbidden)

	op := g.loggedIn(access.Operator)
	p := op.get(console.Prefix + "/anomalies")
	if !strings.Contains(p.body, "resolve-button") {
		t.Fatalf("operator: no resolve button:\n%s", p.body)
	}
	p = op.post(console.Prefix+"/anomalies/"+itoa(s.anomaly)+"/resolve", url.Values{console.CSRFField: {p.csrf(t)}, console.NoteField: {"refunded by hand"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("operator resolving: %d %s", p.code, p.body)
	}
	a, _ := g.db.Anomalies(ctx(), s.anomalyOrder)
	if a[0].ResolvedBy != roleName(access.Operator) || a[0].ResolveNote != "refunded by hand" {
		t.Fatalf("anomaly after the resolve: %+v", a[0])
	}
	rows, err := g.db.Audit(ctx(), repository.AuditQuery{Target: "anomaly:" + itoa(s.anomaly), Limit: 10})
	if err != nil || len(rows) != 1 || rows[0].Actor != "operator" || rows[0].Role != access.Operator || rows[0].Action != "anomaly.resolve" || rows[0].RequestID == "" {
		t.Fatalf("audit of the resolve: %+v %v", rows, err)
	}
	again := op.post(console.Prefix+"/anomalies/"+itoa(s.anomaly)+"/resolve", url.Values{console.CSRFField: {p.csrfOr(op)}, console.NoteField: {"again"}})
	if again.code != http.StatusConflict {
		t.Fatalf("resolving twice: %d", again.code)
	}

	fin := g.loggedIn(access.Finance)
	if p := fin.get(console.Prefix + "/audit"); p.code != http.StatusOK || !strings.Contains(p.body, "anomaly:"+itoa(s.anomaly)) {
		t.Fatalf("finance on the audit trail: %d", p.code)
	}
	if p := fin.get(console.Prefix + "/anomalies?all=1"); strings.Contains(p.body, "resolve-button") {
		t.Fatal("finance sees the anomalies' resolve button")
	}
}

// csrfOr is the CSRF token of b's session, read from a page.
func (p page) csrfOr(b *browser) string {
	b.t.Helper()
	return b.get(console.Prefix + "/search").csrf(b.t)
}

// TestAskTheChannelNow: the button runs the trade query now; the fake channel says paid, the
// order is PAID, the answer is shown, and the question is audited.
func TestAskTheChannelNow(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	if _, err := g.fake.Add(ctx(), simulate.FakeTrade{Channel: "alipay", TradeNo: s.waiting, AmountFen: 3000, Status: simulate.FakePaid, DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	op := g.loggedIn(access.Operator)
	p := op.get(console.Prefix + "/orders/" + s.waiting)
	if !strings.Contains(p.body, `id="ask"`) {
		t.Fatalf("operator: no ask button:\n%s", p.body)
	}
	p = op.post(console.Prefix+"/orders/"+s.waiting+"/ask", url.Values{console.CSRFField: {p.csrf(t)}})
	if p.code != http.StatusOK || !strings.Contains(p.body, `id="asked"`) || !strings.Contains(p.body, "TRADE_SUCCESS") {
		t.Fatalf("ask: %d\n%s", p.code, p.body)
	}
	o, err := g.db.GetOrder(ctx(), s.waiting)
	if err != nil || o.Status != payment.OrderPaid {
		t.Fatalf("after asking: %+v %v", o, err)
	}
	rows, err := g.db.Audit(ctx(), repository.AuditQuery{Target: "reconcile:" + s.waiting, Limit: 10})
	if err != nil || len(rows) != 1 || rows[0].Actor != "operator" || rows[0].Action != "reconcile.query" {
		t.Fatalf("audit of the question: %+v %v", rows, err)
	}
	var sum struct{ Asked, Applied int }
	if err := json.Unmarshal(rows[0].After, &sum); err != nil || sum.Asked != 1 || sum.Applied != 1 {
		t.Fatalf("audited summary %s: %v", rows[0].After, err)
	}
}

// TestAccessLog: each console request gets the access log line /v1 requests get, naming the
// token, never the token itself.
func TestAccessLog(t *testing.T) {
	g := newGateway(t)
	b := g.loggedIn(access.Viewer)
	b.get(console.Prefix + "/search?q=x")
	b.get(console.Prefix + "/nothing-here")
	want := map[string]bool{"POST /console/login 303 viewer": false, "GET /console/search 200 viewer": false,
		"GET /console/* 404 viewer": false, "GET /console/login 200 ": false}
	for _, l := range g.logs.Lines(t) {
		if l["message"] != "request" {
			continue
		}
		for _, f := range []string{"method", "route", "status", "duration_ms", "request_id", "token_name"} {
			if _, ok := l[f]; !ok {
				t.Errorf("access log line without %s: %v", f, l)
			}
		}
		key := l["method"].(string) + " " + l["route"].(string) + " " + strconv.Itoa(int(l["status"].(float64))) + " " + l["token_name"].(string)
		if _, ok := want[key]; ok {
			want[key] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no access log line %q", k)
		}
	}
	if strings.Contains(g.logs.String(), g.tokens[access.Viewer]) {
		t.Fatal("the log holds the token")
	}
}

func nullInt(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }

// TestDiscrepancyFormsRefuseBadInput: the resolve and sign-off forms are outside input. A bad
// action, a missing or over-long note, an unknown id or a malformed day is refused with a page
// that says what is wrong, and writes nothing.
func TestDiscrepancyFormsRefuseBadInput(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	fin := g.loggedIn(access.Finance)
	csrf := fin.get(console.Prefix + "/reconciliations/alipay/" + s.day).csrf(t)
	mismatch := discrepancyID(t, g, s.run, "AMOUNT_MISMATCH")
	resolve := console.Prefix + "/discrepancies/" + mismatch + "/resolve"
	for name, c := range map[string]struct {
		path   string
		form   url.Values
		status int
	}{
		"unknown action":   {resolve, url.Values{console.ActionField: {"pay_it"}, console.NoteField: {"x"}}, http.StatusBadRequest},
		"no action":        {resolve, url.Values{console.NoteField: {"x"}}, http.StatusBadRequest},
		"no note":          {resolve, url.Values{console.ActionField: {reconcile.ActionWriteOff}}, http.StatusBadRequest},
		"note too long":    {resolve, url.Values{console.ActionField: {reconcile.ActionWriteOff}, console.NoteField: {strings.Repeat("n", 513)}}, http.StatusBadRequest},
		"wrong class":      {resolve, url.Values{console.ActionField: {reconcile.ActionAcceptChannel}, console.NoteField: {"x"}}, http.StatusBadRequest},
		"unknown id":       {console.Prefix + "/discrepancies/999999/resolve", url.Values{console.ActionField: {reconcile.ActionWriteOff}, console.NoteField: {"x"}}, http.StatusNotFound},
		"id not a number":  {console.Prefix + "/discrepancies/1e3/resolve", url.Values{console.ActionField: {reconcile.ActionWriteOff}, console.NoteField: {"x"}}, http.StatusNotFound},
		"day malformed":    {console.Prefix + "/reconciliations/alipay/2026-13-01/signoff", url.Values{console.NoteField: {"x"}}, http.StatusNotFound},
		"sign-off note":    {console.Prefix + "/reconciliations/alipay/" + s.day + "/signoff", url.Values{console.NoteField: {strings.Repeat("n", 513)}}, http.StatusBadRequest},
		"open discrepancy": {console.Prefix + "/reconciliations/alipay/" + s.day + "/signoff", url.Values{console.NoteField: {"x"}}, http.StatusConflict},
	} {
		c.form.Set(console.CSRFField, csrf)
		if p := fin.post(c.path, c.form); p.code != c.status {
			t.Errorf("%s: %d, want %d: %s", name, p.code, c.status, p.body)
		}
	}
	id, _ := strconv.ParseInt(mismatch, 10, 64)
	if d, err := g.db.GetDiscrepancy(ctx(), id); err != nil || d.Status != repository.StatusOpen || d.Resolution != nil {
		t.Errorf("after the refused posts the discrepancy is %+v %v, want open", d, err)
	}
	day, _ := time.Parse(time.DateOnly, s.day)
	if so, err := g.db.DaySignOff(ctx(), "alipay", day); !errors.Is(err, payment.ErrNotFound) {
		t.Errorf("a refused sign-off was stored: %+v %v", so, err)
	}
}
