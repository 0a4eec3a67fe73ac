package console_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// screenshots is where the browser test writes a PNG of each page: a git-ignored directory, so
// a test run changes no tracked file. The README's pictures are refreshed with
// `go test ./console -run Browser -screenshots ../docs/console`.
var screenshots = flag.String("screenshots", filepath.Join("..", ".screenshots", "console"), "directory for the browser test's PNGs")

// chrome is one headless Debian chromium tab, driven through the DevTools protocol.
type chrome struct {
	t   *testing.T
	ctx context.Context
	url string
}

// newChrome starts headless chromium, or fails the test saying how to install it.
func newChrome(t *testing.T, base string) *chrome {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is missing: the console's browser test drives Debian's chromium; install it with scripts/chromium.sh " +
			"(apt-get install -y --no-install-recommends chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, // we run as root: no sandbox
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.Flag("hide-scrollbars", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("chromium (%s) did not start: %v", path, err)
	}
	return &chrome{t: t, ctx: ctx, url: base}
}

// do runs steps, failing the test with what was being done.
func (c *chrome) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, steps...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// load runs steps that load a page and returns the page's HTTP response.
func (c *chrome) load(what string, steps ...chromedp.Action[chromedp.Void]) *network.Response {
	c.t.Helper()
	res, err := chromedp.RunResponse(c.ctx, steps...)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	if csp := header(res, "Content-Security-Policy"); csp != console.CSP {
		c.t.Fatalf("%s: %s has Content-Security-Policy %q, want %q", what, res.URL, csp, console.CSP)
	}
	return res
}

func header(res *network.Response, name string) string {
	for k, v := range res.Headers {
		if strings.EqualFold(k, name) {
			return fmt.Sprint(v)
		}
	}
	return ""
}

func (c *chrome) open(path string) *network.Response {
	c.t.Helper()
	return c.load("open "+path, chromedp.Navigate(c.url+path))
}

// eval evaluates a JavaScript expression from DevTools (the page's CSP does not apply to it).
func eval[T any](c *chrome, expr string) T {
	c.t.Helper()
	v, err := chromedp.Run(c.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		c.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (c *chrome) text(sel string) string {
	c.t.Helper()
	s, err := chromedp.Run(c.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		c.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (c *chrome) count(sel string) int {
	c.t.Helper()
	return eval[int](c, `document.querySelectorAll(`+strconv.Quote(sel)+`).length`)
}

// screenshot writes the whole page to NAME.png in -screenshots.
func (c *chrome) screenshot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// login logs in through the form as role r and lands on the search page.
func (c *chrome) login(g *gateway, r access.Role) {
	c.t.Helper()
	c.open(console.Prefix + "/login")
	res := c.load("log in as "+string(r), chromedp.SendKeys(chromedp.CSS("#token"), g.tokens[r]), chromedp.Click(chromedp.CSS("#login")))
	if !strings.HasSuffix(res.URL, console.Prefix+"/search") || res.Status != 200 {
		c.t.Fatalf("login as %s ended on %s (%d)", r, res.URL, res.Status)
	}
	if who := c.text("#who"); who != roleName(r) {
		c.t.Fatalf("logged in as %q, want %s", who, r)
	}
}

func (c *chrome) logout() {
	c.t.Helper()
	res := c.load("log out", chromedp.Click(chromedp.CSS("#logout")))
	if !strings.HasSuffix(res.URL, console.Prefix+"/login") {
		c.t.Fatalf("logout ended on %s", res.URL)
	}
}

// TestBrowser drives the console in Debian's chromium, as the people who use it do: a viewer
// finds an order by the channel's transaction id and sees no resolve button; an operator
// resolves an anomaly and asks the channel about a lost payment; finance reads a reconciliation
// day and the audit trail. A script in a channel's subject does not run: the page shows it as
// text, and the CSP would stop it even if it were not escaped.
func TestBrowser(t *testing.T) {
	g := newGateway(t)
	s := seed(g)
	if _, err := g.fake.Add(ctx(), simulate.FakeTrade{Channel: "alipay", TradeNo: s.waiting, AmountFen: 3000, Status: simulate.FakePaid, DropNotify: true}); err != nil {
		t.Fatal(err)
	}
	c := newChrome(t, g.url)

	// Nothing without a login: the console sends the browser to the form.
	res := c.open(console.Prefix + "/orders/" + s.paid)
	if !strings.HasSuffix(res.URL, console.Prefix+"/login") {
		t.Fatalf("an order's page without a login ended on %s", res.URL)
	}
	c.screenshot("login")

	// A viewer: search by the channel's transaction id, open the order.
	c.login(g, access.Viewer)
	c.do("type the search", chromedp.SendKeys(chromedp.CSS("#q"), s.txn))
	c.load("search", chromedp.Click(chromedp.CSS("#search")))
	if n := c.count("#results a.order"); n != 1 {
		t.Fatalf("search by %s listed %d orders, want 1", s.txn, n)
	}
	c.screenshot("search")
	res = c.load("open the order", chromedp.Click(chromedp.CSS("#results a.order")))
	if !strings.HasSuffix(res.URL, console.Prefix+"/orders/"+s.paid) {
		t.Fatalf("the result's link opened %s", res.URL)
	}
	if why := c.text("#why"); !strings.Contains(why, "Paid through alipay") {
		t.Fatalf("why: %q", why)
	}

	// The hostile subject: shown as the text it is, never run.
	if got := eval[string](c, `typeof window.pwned`); got != "undefined" {
		t.Fatalf("the subject's script ran: window.pwned is %s", got)
	}
	if got := c.text("#notifications td.subject"); got != hostileSubject {
		t.Fatalf("the subject shows as %q, want the text %q", got, hostileSubject)
	}
	if n := c.count("#notifications td.subject *"); n != 0 {
		t.Fatalf("the subject became %d element(s) of the page", n)
	}
	if got := c.text("#events"); !strings.Contains(got, "order.paid") || !strings.Contains(got, webhookEndpoint+": delivered") {
		t.Fatalf("the order's events and deliveries: %q", got)
	}
	c.screenshot("order")
	// Even markup that escaped escaping would not run: the CSP refuses inline handlers. The
	// same injection on a page without the CSP does run, so this check can fail.
	inject := `document.body.insertAdjacentHTML('beforeend', '<img src="/nowhere.png" onerror="window.injected=1">'); 0`
	eval[int](c, inject)
	time.Sleep(500 * time.Millisecond)
	if got := eval[string](c, `typeof window.injected`); got != "undefined" {
		t.Fatalf("an inline handler ran on the order's page: the CSP does not hold (window.injected is %s)", got)
	}
	c.do("open a page without the CSP", chromedp.Navigate(g.url+"/healthz"))
	eval[int](c, inject)
	time.Sleep(500 * time.Millisecond)
	if got := eval[string](c, `typeof window.injected`); got != "number" {
		t.Fatalf("the injection did not run even without the CSP (window.injected is %s): the check above proves nothing", got)
	}

	// The viewer sees the open anomaly, and no resolve button.
	c.open(console.Prefix + "/anomalies")
	if c.count("#anomaly-"+itoa(s.anomaly)) != 1 || c.count(".resolve-button") != 0 || c.count("form.resolve") != 0 {
		t.Fatal("the viewer does not see the open anomaly, or sees its resolve button")
	}
	c.screenshot("anomalies-viewer")
	c.open(console.Prefix + "/orders/" + s.waiting)
	if c.count("#ask") != 0 {
		t.Fatal("the viewer sees the ask button")
	}
	c.logout()

	// An operator resolves the anomaly, then asks the channel about the lost payment.
	c.login(g, access.Operator)
	c.open(console.Prefix + "/anomalies")
	if c.count(".resolve-button") != 1 {
		t.Fatal("the operator sees no resolve button")
	}
	c.screenshot("anomalies")
	row := "#anomaly-" + itoa(s.anomaly)
	c.do("write the note", chromedp.SendKeys(chromedp.CSS(row+` input[name="note"]`), "refunded the 0.01 by hand"))
	c.load("resolve", chromedp.Click(chromedp.CSS(row+" .resolve-button")))
	if got := c.text("#resolved"); !strings.Contains(got, itoa(s.anomaly)) {
		t.Fatalf("after the resolve: %q", got)
	}
	a, err := g.db.Anomalies(ctx(), s.anomalyOrder)
	if err != nil || a[0].ResolvedBy != "operator" || a[0].ResolveNote != "refunded the 0.01 by hand" {
		t.Fatalf("the anomaly after the browser resolved it: %+v %v", a, err)
	}
	c.open(console.Prefix + "/orders/" + s.waiting)
	c.load("ask the channel", chromedp.Click(chromedp.CSS("#ask")))
	if got := c.text("#asked"); !strings.Contains(got, "TRADE_SUCCESS") {
		t.Fatalf("the channel's answer: %q", got)
	}
	if o, err := g.db.GetOrder(ctx(), s.waiting); err != nil || o.Status != payment.OrderPaid {
		t.Fatalf("the order after asking: %+v %v", o, err)
	}
	c.screenshot("order-asked")
	c.logout()

	// Finance reads the reconciliation day and the audit trail.
	c.login(g, access.Finance)
	c.open(console.Prefix + "/reconciliations")
	c.screenshot("reconciliations")
	res = c.load("open the day", chromedp.Click(chromedp.CSS("#days a.day")))
	if !strings.HasSuffix(res.URL, console.Prefix+"/reconciliations/alipay/"+s.day) {
		t.Fatalf("the day's link opened %s", res.URL)
	}
	for _, class := range []string{"CHANNEL_ONLY", "AMOUNT_MISMATCH", "MATCHED"} {
		if c.count("#class-"+class) != 1 {
			t.Errorf("the day page has no %s class", class)
		}
	}
	if got := c.text("#discrepancy-" + discrepancyID(t, g, s.run, "CHANNEL_ONLY") + " td:nth-child(9)"); got != hostileSubject {
		t.Errorf("a bill line's detail shows as %q", got)
	}
	c.screenshot("reconciliation-day")

	// Finance cannot sign the day off while the AMOUNT_MISMATCH is open; resolves it (write_off),
	// then signs the day off.
	mismatch := discrepancyID(t, g, s.run, "AMOUNT_MISMATCH")
	res = c.load("sign off too early", chromedp.Click(chromedp.CSS("#signoff-form button")))
	if got := c.text("main"); res.Status != http.StatusConflict || !strings.Contains(got, mismatch+" (AMOUNT_MISMATCH)") {
		t.Fatalf("an early sign-off: %d %q", res.Status, got)
	}
	c.open(console.Prefix + "/reconciliations/alipay/" + s.day)
	row = "#discrepancy-" + mismatch
	if c.count(row+" form.resolve-discrepancy") != 1 {
		t.Fatal("finance sees no resolve form on the open AMOUNT_MISMATCH")
	}
	if got := c.text(row + ` select[name="action"]`); strings.Contains(got, reconcile.ActionAcceptChannel) {
		t.Errorf("the AMOUNT_MISMATCH offers %s: %q", reconcile.ActionAcceptChannel, got)
	}
	c.do("choose write_off", chromedp.SetValue(chromedp.CSS(row+` select[name="action"]`), reconcile.ActionWriteOff))
	c.do("write the note", chromedp.SendKeys(chromedp.CSS(row+` input[name="note"]`), "0.01 collected by hand"))
	c.load("resolve the discrepancy", chromedp.Click(chromedp.CSS(row+" button")))
	if got := c.text(row); !strings.Contains(got, repository.StatusResolved) || !strings.Contains(got, reconcile.ActionWriteOff+" by "+roleName(access.Finance)) {
		t.Fatalf("the discrepancy after finance resolved it: %q", got)
	}
	c.do("write the sign-off note", chromedp.SendKeys(chromedp.CSS("#signoff-note"), "day checked"))
	c.load("sign the day off", chromedp.Click(chromedp.CSS("#signoff-form button")))
	if got := c.text("#signoff"); !strings.Contains(got, "Signed off by "+roleName(access.Finance)) || c.count("#signoff-form") != 0 {
		t.Fatalf("the day after the sign-off: %q", got)
	}
	day, _ := time.Parse(time.DateOnly, s.day)
	if so, err := g.db.DaySignOff(ctx(), "alipay", day); err != nil || so.SignedOffBy != roleName(access.Finance) || so.Note != "day checked" {
		t.Fatalf("the stored sign-off: %+v %v", so, err)
	}
	c.screenshot("reconciliation-signed-off")
	c.open(console.Prefix + "/audit")
	if got := c.text("#audit"); !strings.Contains(got, "anomaly.resolve") || !strings.Contains(got, "reconcile.query") ||
		!strings.Contains(got, "discrepancy.resolve") || !strings.Contains(got, "reconciliation.signoff") {
		t.Fatalf("the audit trail lacks the operator's writes: %q", got)
	}
	c.screenshot("audit")
	if got := eval[string](c, `typeof window.pwned`); got != "undefined" {
		t.Fatalf("a script ran: window.pwned is %s", got)
	}
}

// discrepancyID is the stable id of run's discrepancy of class.
func discrepancyID(t *testing.T, g *gateway, run int64, class string) string {
	t.Helper()
	rows, err := g.db.ListDiscrepancies(ctx(), run, class, 0, 10)
	if err != nil || len(rows) != 1 {
		t.Fatalf("discrepancies %s of run %d: %+v %v", class, run, rows, err)
	}
	return strconv.FormatInt(rows[0].ID, 10)
}
