package console

import (
	"bytes"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// pages are the parsed templates: each page is the layout with its own "content" and the
// partials (partial_*.html) every page may use.
type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"money": money.Format,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"deref": func(p *int64) int64 { return *p },
	"roles": func(rs []access.Role) string { return access.Names(rs) },
	"str":   func(b []byte) string { return string(b) },
	"anomalyRows": func(rows []payment.Anomaly, canResolve bool, csrf string) anomalyRows {
		return anomalyRows{Rows: rows, CanResolve: canResolve, CSRF: csrf}
	},
	"discrepancyRow": func(d repository.DiscrepancyItem, csrf string, can map[string]bool) discrepancyRow {
		actions := slices.DeleteFunc(slices.Clone(reconcile.Actions), func(a string) bool {
			return a == reconcile.ActionAcceptChannel && !slices.Contains(reconcile.AcceptChannelClasses, d.Class)
		})
		return discrepancyRow{Row: d, CSRF: csrf, Can: can, Open: d.Status == repository.StatusOpen, Actions: actions}
	},
}

// discrepancyRow is what a discrepancy's actions (the "discrepancyActions" template of
// day.html) read: the row, the session's CSRF token and the user's capabilities.
type discrepancyRow struct {
	Row     repository.DiscrepancyItem
	CSRF    string
	Can     map[string]bool
	Open    bool     // the row can be resolved
	Actions []string // the reconcile.Actions that fit its class
}

// anomalyRows is what the anomalies table (partial_anomalies.html) reads: the order page and the
// anomalies page both show it.
type anomalyRows struct {
	Rows       []payment.Anomaly
	CanResolve bool
	CSRF       string
}

func parsePages() (*pages, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	partials, err := fs.Glob(assets, "templates/partial_*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "templates/layout.html" || slices.Contains(partials, n) {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, append([]string{"templates/layout.html", n}, partials...)...)
		if err != nil {
			return nil, err
		}
		p.byName[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return p, nil
}

// view is what every page's layout reads; Data is the page's own.
type view struct {
	Title string
	User  *user // nil on the login page
	CSRF  string
	Can   map[string]bool // the capabilities the user's roles hold, by name, for the buttons
	Data  any
}

// render writes page name with status. A template that fails to execute writes nothing of it.
func (cs *Console) render(c echo.Context, status int, name, title string, data any) error {
	v := view{Title: title, Data: data}
	if u, ok := c.Get(userKey).(user); ok {
		v.User, v.CSRF = &u, u.csrf
		v.Can = map[string]bool{
			"read":          u.can(access.Read),
			"ask":           u.can(access.ReconcileQuery),
			"resolve":       u.can(access.AnomaliesResolve),
			"audit":         u.can(access.AuditRead),
			"discrepancies": u.can(access.DiscrepanciesResolve),
			"signoff":       u.can(access.SignOff),
		}
	}
	var b bytes.Buffer
	if err := cs.pages.byName[name].Execute(&b, v); err != nil {
		cs.log.Error().Err(err).Str("page", name).Msg("console page not rendered")
		return c.String(http.StatusInternalServerError, "the page could not be rendered")
	}
	return c.HTMLBlob(status, b.Bytes())
}

// fail answers an error page.
func (cs *Console) fail(c echo.Context, status int, msg string) error {
	return cs.render(c, status, "error", http.StatusText(status), msg)
}

// failed answers our own failure (the database did not answer): logged, never shown.
func (cs *Console) failed(c echo.Context, err error) error {
	cs.log.Error().Err(err).Str("request_id", requestID(c)).Str("route", c.Path()).Msg("console request failed")
	return cs.fail(c, http.StatusServiceUnavailable, "paygw could not finish the request; try again later.")
}
