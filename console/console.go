// Package console is the operators' and finance's web console under /console: server-rendered
// pages (html/template, embedded, no script) over the same books, roles and audit trail as /v1.
package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// Prefix is where the console is served on the main listener.
const Prefix = "/console"

// CSP is every console page's Content-Security-Policy: nothing but the console's own
// stylesheet and images loads, no script runs at all (the pages have none), no form posts
// elsewhere, and no other site may frame a page.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// DefaultSessionTTL is how long a login lasts unless configured.
const DefaultSessionTTL = 8 * time.Hour

// maxForm bounds a console form's body: a note of 512 bytes and a token fit with room.
const maxForm = 8 << 10

//go:embed templates/*.html static/*
var assets embed.FS

// Identity is an API token as the console knows it: its name, its roles and its SHA-256 (never
// the token itself).
type Identity struct {
	Name   string
	Roles  []access.Role
	Digest [sha256.Size]byte
}

// Tokens is how the console checks the API tokens (handlers.Server's): the same list as /v1.
type Tokens interface {
	// Identify returns the configured token secret is; false when none is, compared in
	// constant time.
	Identify(secret string) (Identity, bool)
	// Named returns the configured token called name; false when none is (any longer).
	Named(name string) (Identity, bool)
	// Attribute names the request's token in the access log (its token_name).
	Attribute(c echo.Context, name string)
}

// Books is what the pages read and write (repository.DB).
type Books interface {
	explain.Books
	SearchOrders(ctx context.Context, f repository.OrderFilter, limit int) ([]payment.Order, repository.OrderCursor, error)
	EventsOf(ctx context.Context, tradeNo string) ([]payment.OutboxEvent, error)
	DeliveriesOf(ctx context.Context, tradeNo string) ([]repository.WebhookDelivery, error)
	ListAnomalies(ctx context.Context, kind string, unresolved bool, cursor int64, limit int) ([]payment.Anomaly, error)
	ResolveAnomalyAudited(ctx context.Context, id int64, by, note string, at time.Time, e access.Entry) (payment.Anomaly, error)
	Runs(ctx context.Context, channel string, day *time.Time) ([]repository.ReconRun, error)
	ListDiscrepancies(ctx context.Context, runID int64, class string, cursor int64, limit int) ([]repository.DiscrepancyItem, error)
	DaySignOff(ctx context.Context, channel string, day time.Time) (repository.SignOff, error)
	SignOffDay(ctx context.Context, channel string, day time.Time, by, note string, at time.Time, e access.Entry) (repository.SignOff, error)
	Audit(ctx context.Context, q repository.AuditQuery) ([]access.Entry, error)
	AppendAudit(ctx context.Context, e access.Entry) error
}

var _ Books = (*repository.DB)(nil)

// Asker asks the channels about one order now (reconcile.Job).
type Asker interface {
	Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error)
}

// Config is the console's part of the configuration.
type Config struct {
	// SessionKey signs the session cookies; every replica behind one address needs the same.
	// Empty: a random key, so sessions end with the process.
	SessionKey []byte
	SessionTTL time.Duration // 0: DefaultSessionTTL
}

// Console serves the pages.
type Console struct {
	cfg     Config
	books   Books
	refuse  explain.RefusalLog
	asker   Asker    // nil: no channel can be asked; the button says so
	resolve Resolver // nil: discrepancies cannot be resolved here
	seal    sealer
	pages   *pages
	log     zerolog.Logger
	now     func() time.Time
}

// New builds the console. asker may be nil.
func New(cfg Config, books Books, refusals explain.RefusalLog, asker Asker, resolve Resolver, log zerolog.Logger) (*Console, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	key := cfg.SessionKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand.Read never fails
	}
	if len(key) < 32 {
		return nil, errors.New("console: the session key must be at least 32 bytes")
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{cfg: cfg, books: books, refuse: refusals, asker: asker, resolve: resolve, seal: sealer{key: key}, pages: p, log: log, now: time.Now}, nil
}

// Routes registers the console under g (the main listener's /console group).
func (cs *Console) Routes(g *echo.Group, tokens Tokens) {
	g.Use(headers)
	g.GET("/static/console.css", stylesheet)
	g.GET("/login", cs.loginPage)
	g.POST("/login", cs.login(tokens))

	in := g.Group("", cs.requireLogin(tokens))
	in.GET("", cs.home)
	in.GET("/", cs.home)
	in.POST("/logout", cs.logout)
	in.GET("/search", cs.need(access.Read, cs.search))
	in.GET("/orders/:trade_no", cs.need(access.Read, cs.order))
	in.POST("/orders/:trade_no/ask", cs.need(access.ReconcileQuery, cs.ask))
	in.GET("/anomalies", cs.need(access.Read, cs.anomalies))
	in.POST("/anomalies/:id/resolve", cs.need(access.AnomaliesResolve, cs.resolveAnomaly))
	in.GET("/reconciliations", cs.need(access.Read, cs.days))
	in.GET("/reconciliations/:channel/:date", cs.need(access.Read, cs.day))
	in.POST("/reconciliations/:channel/:date/signoff", cs.need(access.SignOff, cs.signOff))
	in.POST("/discrepancies/:id/resolve", cs.need(access.DiscrepanciesResolve, cs.resolveDiscrepancy))
	in.GET("/audit", cs.need(access.AuditRead, cs.audit))
	in.Any("/*", cs.notFound)
}

// stylesheet serves the one stylesheet, the only page the console shows without a login.
func stylesheet(c echo.Context) error {
	css, err := assets.ReadFile("static/console.css")
	if err != nil {
		return err // embedded: cannot happen
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=3600")
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", css)
}

// headers gives every console answer its security headers, errors and redirects included.
func headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// Context keys of a logged-in request.
const (
	userKey = "console.user"
	sessKey = "console.session"
)

// user is the logged-in token of a request.
type user struct {
	Identity
	csrf string
}

// can reports whether one of the user's roles holds capability c; the pages show a button only
// when it does, and the POST behind it checks again.
func (u user) can(c access.Capability) bool {
	_, ok := access.Granting(u.Roles, c)
	return ok
}

// requireLogin lets a request through only with a valid, unexpired session whose token is still
// configured; anything else goes to the login page.
func (cs *Console) requireLogin(tokens Tokens) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			var value string
			if ck, err := c.Cookie(SessionCookie); err == nil {
				value = ck.Value
			}
			s, err := cs.seal.openSession(value, cs.now())
			var id Identity
			ok := err == nil
			if ok {
				id, ok = tokens.Named(s.Name)
				ok = ok && sameToken(s.Bind, cs.seal.bind(id.Digest))
			}
			if !ok {
				if value != "" {
					c.SetCookie(cookie(SessionCookie, "", 0, secure(c)))
				}
				return cs.toLogin(c)
			}
			tokens.Attribute(c, id.Name)
			c.Set(userKey, user{Identity: id, csrf: s.CSRF})
			return next(c)
		}
	}
}

// toLogin answers a request without a login: a page goes to the login form, a form post is
// refused.
func (cs *Console) toLogin(c echo.Context) error {
	if c.Request().Method != http.MethodGet && c.Request().Method != http.MethodHead {
		return cs.fail(c, http.StatusUnauthorized, "Log in first.")
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/login")
}

// need runs h when the user's roles hold capability cap, and names the role on the access log;
// a 403 page otherwise. A POST must carry the session's CSRF token too.
func (cs *Console) need(cap access.Capability, h func(echo.Context, user) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Get(userKey).(user)
		role, ok := access.Granting(u.Roles, cap)
		if !ok {
			return cs.fail(c, http.StatusForbidden, "This needs the role "+access.Names(access.Needed(cap))+".")
		}
		if c.Request().Method == http.MethodPost {
			if refused, err := cs.refuseForm(c, u); refused {
				return err
			}
		}
		c.Set(roleKey, role)
		return h(c, u)
	}
}

const roleKey = "console.role"

// refuseForm reads a post's form (bounded) and compares its CSRF token with the session's. It
// answers a form it cannot read (400) or whose token is not the session's (403), and says
// whether it did: the caller stops then, whatever the error (nil once the page is written).
func (cs *Console) refuseForm(c echo.Context, u user) (bool, error) {
	if err := readForm(c); err != nil {
		return true, cs.fail(c, http.StatusBadRequest, "The form could not be read.")
	}
	if !sameToken(c.Request().PostForm.Get(CSRFField), u.csrf) {
		return true, cs.fail(c, http.StatusForbidden, "The form has expired or did not come from this console. Reload the page and try again.")
	}
	return false, nil
}

// readForm parses a urlencoded body of at most maxForm bytes.
func readForm(c echo.Context) error {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxForm)
	return r.ParseForm()
}

// secure: the cookies are Secure when the request came over TLS, directly or as the proxy in
// front says (X-Forwarded-Proto). A client that lies only refuses itself its own cookie.
func secure(c echo.Context) bool { return c.Scheme() == "https" }

// requestID is the id the handlers gave the request (X-Request-Id, set before routing).
func requestID(c echo.Context) string { return c.Response().Header().Get("X-Request-Id") }

// entry is the audit row of a console write: the token's name, the role that allowed it, the
// request id.
func (cs *Console) entry(c echo.Context, u user, action, target string) access.Entry {
	role, _ := c.Get(roleKey).(access.Role)
	return access.Entry{At: cs.now().UTC(), Actor: u.Name, Role: role, Action: action, Target: target, RequestID: requestID(c)}
}

func (cs *Console) notFound(c echo.Context) error {
	return cs.fail(c, http.StatusNotFound, "There is no such page.")
}
