package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// pageSize is how many rows a listing shows; "Next" asks for more.
const pageSize = 100

// search is GET /console/search?q=: one box for every key.
func (cs *Console) search(c echo.Context, _ user) error {
	raw := c.QueryParam(SearchField)
	data := struct {
		Q      string
		Asked  bool
		Error  string
		Orders []payment.Order
	}{Q: raw, Asked: raw != ""}
	q, err := parseQuery(raw)
	if err != nil {
		data.Error = err.Error()
		return cs.render(c, http.StatusBadRequest, "search", "Search", data)
	}
	if data.Orders, err = cs.find(c.Request().Context(), q); err != nil {
		return cs.failed(c, err)
	}
	return cs.render(c, http.StatusOK, "search", "Search", data)
}

// eventView is an outbox event with its webhook deliveries.
type eventView struct {
	payment.OutboxEvent
	Deliveries []repository.WebhookDelivery
}

// orderData is the order page's.
type orderData struct {
	Order       payment.Order
	Why         explain.Explanation
	Record      explain.Record
	Events      []eventView
	Asked       []string // the answer of "ask the channel now", one line per attempt asked
	AskError    string
	CanAskAtAll bool // a channel can be asked at all (outbound credentials configured)
}

// order is GET /console/orders/{trade_no}: why, and everything behind it.
func (cs *Console) order(c echo.Context, _ user) error {
	return cs.orderPage(c, http.StatusOK, nil, "")
}

func (cs *Console) orderPage(c echo.Context, status int, asked []string, askErr string) error {
	tradeNo := c.Param("trade_no")
	if !payment.ValidTradeNo(tradeNo) {
		return cs.notFound(c)
	}
	ctx := c.Request().Context()
	r, err := explain.Load(ctx, cs.books, cs.refuse, tradeNo)
	if errors.Is(err, payment.ErrNotFound) {
		return cs.notFound(c)
	} else if err != nil {
		return cs.failed(c, err)
	}
	evs, err := cs.books.EventsOf(ctx, tradeNo)
	if err != nil {
		return cs.failed(c, err)
	}
	dels, err := cs.books.DeliveriesOf(ctx, tradeNo)
	if err != nil {
		return cs.failed(c, err)
	}
	d := orderData{Order: r.Order, Why: explain.Of(r), Record: r, Asked: asked, AskError: askErr, CanAskAtAll: cs.asker != nil}
	for _, ev := range evs {
		v := eventView{OutboxEvent: ev}
		for _, del := range dels {
			if del.EventID == ev.ID {
				v.Deliveries = append(v.Deliveries, del)
			}
		}
		d.Events = append(d.Events, v)
	}
	return cs.render(c, status, "order", "Order "+tradeNo, d)
}

// ask is POST /console/orders/{trade_no}/ask: the trade query, now, whatever its backoff, as
// `paygw reconcile query --trade-no` runs it; what the channel answered is applied through the
// one apply path and shown on the order's page. Audited as reconcile.query.
func (cs *Console) ask(c echo.Context, u user) error {
	tradeNo := c.Param("trade_no")
	if !payment.ValidTradeNo(tradeNo) {
		return cs.notFound(c)
	}
	if cs.asker == nil {
		return cs.orderPage(c, http.StatusConflict, nil, "No channel can be asked: none has its outbound credentials configured.")
	}
	ctx := c.Request().Context()
	if _, err := cs.books.GetOrder(ctx, tradeNo); errors.Is(err, payment.ErrNotFound) {
		return cs.notFound(c)
	} else if err != nil {
		return cs.failed(c, err)
	}
	var out strings.Builder
	sum, err := cs.asker.Run(ctx, reconcile.Options{TradeNo: tradeNo, Out: &out})
	if err != nil {
		return cs.failed(c, err)
	}
	e := cs.entry(c, u, "reconcile.query", "reconcile:"+tradeNo)
	e.After = access.State(sum)
	if err := cs.books.AppendAudit(ctx, e); err != nil {
		// The question was asked and its answer applied: say so, and log the row not written.
		cs.log.Error().Err(err).Str("actor", e.Actor).Str("action", e.Action).Str("target", e.Target).
			Str("request_id", e.RequestID).RawJSON("after", e.After).Msg("audit row not written")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if sum.Asked == 0 && sum.Stale == 0 {
		lines = []string{"No open attempt of this order on a channel that can be asked: nothing was asked."}
	}
	return cs.orderPage(c, http.StatusOK, lines, "")
}

// anomalies is GET /console/anomalies?all=1&cursor=: the open ones (all with all=1), oldest
// first.
func (cs *Console) anomalies(c echo.Context, _ user) error {
	all := c.QueryParam("all") == "1"
	cursor, ok := parseCursor(c.QueryParam("cursor"))
	if !ok {
		return cs.fail(c, http.StatusBadRequest, "That page does not exist.")
	}
	rows, err := cs.books.ListAnomalies(c.Request().Context(), "", !all, cursor, pageSize)
	if err != nil {
		return cs.failed(c, err)
	}
	data := struct {
		All      bool
		Rows     []payment.Anomaly
		Next     string
		Resolved string
	}{All: all, Rows: rows, Resolved: c.QueryParam("resolved")}
	if len(rows) == pageSize {
		v := url.Values{"cursor": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		if all {
			v.Set("all", "1")
		}
		data.Next = Prefix + "/anomalies?" + v.Encode()
	}
	if _, err := strconv.ParseInt(data.Resolved, 10, 64); err != nil {
		data.Resolved = ""
	}
	return cs.render(c, http.StatusOK, "anomalies", "Anomalies", data)
}

// NoteField names the resolve form's note.
const NoteField = "note"

// resolveAnomaly is POST /console/anomalies/{id}/resolve note=...: the same write as
// POST /v1/anomalies/{id}/resolve, audited in the same transaction.
func (cs *Console) resolveAnomaly(c echo.Context, u user) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return cs.notFound(c)
	}
	note := strings.TrimSpace(c.Request().PostForm.Get(NoteField))
	if note == "" || len(note) > 512 {
		return cs.fail(c, http.StatusBadRequest, "A note of 1 to 512 bytes is needed: what was done about it.")
	}
	e := cs.entry(c, u, "anomaly.resolve", "anomaly:"+strconv.FormatInt(id, 10))
	a, err := cs.books.ResolveAnomalyAudited(c.Request().Context(), id, e.Actor, note, e.At, e)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return cs.notFound(c)
	case errors.Is(err, payment.ErrConflict):
		return cs.fail(c, http.StatusConflict, "Already resolved by "+a.ResolvedBy+" at "+a.ResolvedAt.UTC().Format(time.RFC3339)+".")
	case err != nil:
		return cs.failed(c, err)
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/anomalies?resolved="+strconv.FormatInt(id, 10))
}

// dayView is one channel's day in the reconciliation listing.
type dayView struct {
	Channel string
	Date    string
	Runs    int
	Latest  repository.ReconRun // the day's newest run, whatever its status
}

// days is GET /console/reconciliations: the channels' days, newest first, with their latest run.
func (cs *Console) days(c echo.Context, _ user) error {
	runs, err := cs.books.Runs(c.Request().Context(), "", nil)
	if err != nil {
		return cs.failed(c, err)
	}
	var out []dayView
	at := map[string]int{}
	for _, r := range runs { // newest day first, the day's latest run first
		key := r.Channel + "/" + r.BillDate.Format(time.DateOnly)
		i, ok := at[key]
		if !ok {
			at[key], i = len(out), len(out)
			out = append(out, dayView{Channel: r.Channel, Date: r.BillDate.Format(time.DateOnly), Latest: r})
		}
		out[i].Runs++
	}
	return cs.render(c, http.StatusOK, "days", "Reconciliation", out)
}

// classTotal is one class of a run: how many lines the run counted, and what the listed
// discrepancies of that class add up to, in minor units.
type classTotal struct {
	Class                   string
	Count                   int
	BillAmount, LocalAmount int64
	Rows                    []repository.DiscrepancyItem
}

// runView is one run of a day, with its discrepancies by class when it is the one shown.
type runView struct {
	repository.ReconRun
	Result  bool // the day's result for its source: its latest complete run
	Shown   bool
	Classes []classTotal
	More    bool // more discrepancies than the page lists
}

// dayData is the day page's. Channel and Date name the day for the forms added to it.
type dayData struct {
	Channel, Date string
	Runs          []runView
	Shown         *runView
	SignOff       *repository.SignOff // nil: nobody signed the day off
	Signable      bool                // nobody signed it off, or a later run reopened it
}

// maxDayRows bounds the discrepancies the day page lists for a run.
const maxDayRows = 1000

// day is GET /console/reconciliations/{channel}/{date}?run=: the day's runs, newest first, and
// the discrepancies of one run by class: the day's result unless run names another.
func (cs *Console) day(c echo.Context, _ user) error {
	channel, date := c.Param("channel"), c.Param("date")
	d, err := time.Parse(time.DateOnly, date)
	if err != nil || len(channel) > 32 {
		return cs.notFound(c)
	}
	ctx := c.Request().Context()
	runs, err := cs.books.Runs(ctx, channel, &d)
	if err != nil {
		return cs.failed(c, err)
	}
	if len(runs) == 0 {
		return cs.notFound(c)
	}
	data := dayData{Channel: channel, Date: date}
	results := map[string]bool{}
	for _, r := range runs {
		v := runView{ReconRun: r}
		if r.Status == repository.RunComplete && !results[r.Source] {
			results[r.Source], v.Result = true, true
		}
		data.Runs = append(data.Runs, v)
	}
	shown := -1
	if s := c.QueryParam("run"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		shown = slices.IndexFunc(data.Runs, func(v runView) bool { return err == nil && v.ID == id })
		if shown < 0 {
			return cs.notFound(c)
		}
	} else {
		shown = slices.IndexFunc(data.Runs, func(v runView) bool { return v.Result })
	}
	if shown >= 0 {
		v := &data.Runs[shown]
		v.Shown = true
		if v.Classes, v.More, err = cs.classes(c, v.ReconRun); err != nil {
			return cs.failed(c, err)
		}
		data.Shown = v
	}
	switch so, err := cs.books.DaySignOff(ctx, channel, d); {
	case err == nil:
		data.SignOff, data.Signable = &so, so.Status == repository.DayReopened
	case errors.Is(err, payment.ErrNotFound):
		data.Signable = true
	default:
		return cs.failed(c, err)
	}
	return cs.render(c, http.StatusOK, "day", "Reconciliation "+channel+" "+date, data)
}

// deref is *p, or 0 for nil.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// classes reads a run's discrepancies (up to maxDayRows) and groups them by class, with the
// run's own count of each class.
func (cs *Console) classes(c echo.Context, r repository.ReconRun) ([]classTotal, bool, error) {
	var rows []repository.DiscrepancyItem
	var cursor int64
	for len(rows) < maxDayRows {
		page, err := cs.books.ListDiscrepancies(c.Request().Context(), r.ID, "", cursor, pageSize)
		if err != nil {
			return nil, false, err
		}
		rows = append(rows, page...)
		if len(page) < pageSize {
			break
		}
		cursor = page[len(page)-1].ID
	}
	more := len(rows) >= maxDayRows
	by := map[string]*classTotal{}
	for class, n := range r.Counts() {
		by[class] = &classTotal{Class: class, Count: n}
	}
	for _, d := range rows {
		t := by[d.Class]
		if t == nil {
			t = &classTotal{Class: d.Class}
			by[d.Class] = t
		}
		t.Rows = append(t.Rows, d)
		t.BillAmount += deref(d.BillAmountFen)
		t.LocalAmount += deref(d.LocalAmountFen)
	}
	out := make([]classTotal, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b classTotal) int {
		return cmp.Or(cmp.Compare(classOrder(a.Class), classOrder(b.Class)), strings.Compare(a.Class, b.Class))
	})
	return out, more, nil
}

// classOrder lists the classes that need a person before the ones that matched.
func classOrder(class string) int {
	if class == reconcile.ClassMatched || class == reconcile.ClassRefundMatched {
		return 1
	}
	return 0
}

// AuditFields name the audit page's filters.
const (
	TargetField = "target"
	ActorField  = "actor"
)

// audit is GET /console/audit?target=&actor=&cursor=: the audit trail, oldest first.
func (cs *Console) audit(c echo.Context, _ user) error {
	q := repository.AuditQuery{Target: strings.TrimSpace(c.QueryParam(TargetField)), Actor: strings.TrimSpace(c.QueryParam(ActorField)), Limit: pageSize}
	cursor, ok := parseCursor(c.QueryParam("cursor"))
	if !ok || len(q.Target) > 191 || len(q.Actor) > 80 {
		return cs.fail(c, http.StatusBadRequest, "The filters are too long, or that page does not exist.")
	}
	q.Cursor = cursor
	rows, err := cs.books.Audit(c.Request().Context(), q)
	if err != nil {
		return cs.failed(c, err)
	}
	data := struct {
		Target, Actor, Next string
		Rows                []access.Entry
	}{Target: q.Target, Actor: q.Actor, Rows: rows}
	if len(rows) == pageSize {
		v := url.Values{"cursor": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		if q.Target != "" {
			v.Set(TargetField, q.Target)
		}
		if q.Actor != "" {
			v.Set(ActorField, q.Actor)
		}
		data.Next = Prefix + "/audit?" + v.Encode()
	}
	return cs.render(c, http.StatusOK, "audit", "Audit trail", data)
}

// parseCursor reads a listing's cursor: "" for the first page, else a positive decimal id.
func parseCursor(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0 && strconv.FormatInt(n, 10) == s
}
