package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

var errBadQuery = errors.New("invalid query")

// pageSize is how many rows a paginated answer holds; next_cursor asks for the rest.
const pageSize = 100

type runView struct {
	ID         int64          `json:"id"`
	Channel    string         `json:"channel"`
	BillDate   string         `json:"bill_date"`
	Source     string         `json:"source"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt *time.Time     `json:"finished_at"`
	Lines      int            `json:"lines"`
	BadLines   int            `json:"bad_lines"`
	Counts     map[string]int `json:"counts"`
	Trusted    bool           `json:"trusted"`
	// Totals: per class and currency, the count and the amount of the run's lines.
	Totals []repository.ClassTotal `json:"totals"`
	// BillTotals: per currency, what the bill's lines add up to (gross, refunds, fees, net).
	BillTotals []runTotalView `json:"bill_totals"`
	// Result: this run is its day's result for its source (the day's latest complete run).
	Result bool `json:"result"`
	// SignOff: the day's sign-off, null if nobody signed it off.
	SignOff *signOffView `json:"signoff"`
}

func runViewOf(r repository.ReconRun) runView {
	v := runView{ID: r.ID, Channel: r.Channel, BillDate: r.BillDate.Format(time.DateOnly), Source: r.Source, Status: r.Status,
		Error: r.Error, StartedAt: r.StartedAt,
		Lines: r.Lines, BadLines: r.BadLines, Counts: r.Counts(), Trusted: r.Trusted, Totals: r.Totals()}
	if v.Totals == nil {
		v.Totals = []repository.ClassTotal{}
	}
	if r.FinishedAt.Valid {
		t := r.FinishedAt.Time
		v.FinishedAt = &t
	}
	return v
}

// listRuns is GET /v1/reconciliations?channel=&date=: the bill runs, newest day first, every
// status; a day's result (per source) is its latest complete run.
func (s *Server) listRuns(c echo.Context) error {
	var day *time.Time
	if d := c.QueryParam("date"); d != "" {
		t, err := time.Parse(time.DateOnly, d)
		if err != nil {
			return fmt.Errorf("%w: date must be YYYY-MM-DD", errBadQuery)
		}
		day = &t
	}
	ctx := c.Request().Context()
	runs, err := s.db.Runs(ctx, c.QueryParam("channel"), day)
	if err != nil {
		return err
	}
	signOffs, err := s.db.SignOffs(ctx, runs)
	if err != nil {
		return err
	}
	totals, err := s.db.RunTotals(ctx, runIDs(runs))
	if err != nil {
		return err
	}
	out := struct {
		Runs []runView `json:"runs"`
	}{Runs: []runView{}}
	results := map[[3]string]bool{} // (channel, source, day) whose result is listed
	for _, r := range runs {
		v := runViewOf(r)
		if k := [3]string{r.Channel, r.Source, v.BillDate}; r.Status == repository.RunComplete && !results[k] {
			v.Result, results[k] = true, true // runs come latest first within a day
		}
		if so, ok := signOffs[[2]string{r.Channel, v.BillDate}]; ok {
			sv := signOffViewOf(so)
			v.SignOff = &sv
		}
		v.BillTotals = runTotalViews(totals[r.ID])
		out.Runs = append(out.Runs, v)
	}
	return c.JSON(http.StatusOK, out)
}

// listDiscrepancies is GET /v1/reconciliations/{id}/discrepancies?class=&cursor=: a run's
// discrepancies, a page at a time, by their stable id: those the run found, and those an earlier
// run of its day found that it no longer finds (found false), each with its status.
func (s *Server) listDiscrepancies(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	cursor, err := cursorOf(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.db.GetRun(ctx, id); err != nil {
		return err
	}
	rows, err := s.db.ListDiscrepancies(ctx, id, c.QueryParam("class"), cursor, pageSize)
	if err != nil {
		return err
	}
	views, next := pageOf(rows, pageSize, discrepancyViewOf, func(d repository.DiscrepancyItem) int64 { return d.ID })
	return c.JSON(http.StatusOK, struct {
		Discrepancies []discrepancyView `json:"discrepancies"`
		NextCursor    string            `json:"next_cursor,omitempty"`
	}{views, next})
}

type anomalyListView struct {
	ID int64 `json:"id"`
	anomalyView
	TradeNo     string     `json:"trade_no"`
	ResolvedBy  string     `json:"resolved_by,omitempty"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty"`
	ResolveNote string     `json:"resolve_note,omitempty"`
}

func anomalyListViewOf(a payment.Anomaly) anomalyListView {
	return anomalyListView{ID: a.ID, anomalyView: anomalyViewOf(a), TradeNo: a.TradeNo, ResolvedBy: a.ResolvedBy,
		ResolvedAt: a.ResolvedAt, ResolveNote: a.ResolveNote}
}

// listAnomalies is GET /v1/anomalies?kind=&resolved=false&cursor=.
func (s *Server) listAnomalies(c echo.Context) error {
	cursor, err := cursorOf(c)
	if err != nil {
		return err
	}
	unresolved, err := unresolvedOf(c)
	if err != nil {
		return err
	}
	rows, err := s.db.ListAnomalies(c.Request().Context(), c.QueryParam("kind"), unresolved, cursor, pageSize)
	if err != nil {
		return err
	}
	views, next := pageOf(rows, pageSize, anomalyListViewOf, func(a payment.Anomaly) int64 { return a.ID })
	return c.JSON(http.StatusOK, struct {
		Anomalies  []anomalyListView `json:"anomalies"`
		NextCursor string            `json:"next_cursor,omitempty"`
	}{views, next})
}

var errAlreadyResolved = errors.New("anomaly already resolved")

// resolveAnomaly is POST /v1/anomalies/{id}/resolve {"note"}: records who (the token's name),
// when, and the note. Resolving twice is a 409.
func (s *Server) resolveAnomaly(c echo.Context) error {
	id, canonical, err := s.idAndBody(c)
	if err != nil {
		return err
	}
	var in struct {
		Note string `json:"note"`
	}
	if err := decodeStrict(canonical, &in); err != nil || in.Note == "" || len(in.Note) > 512 {
		return fmt.Errorf("%w: send {\"note\": \"...\"} (1-512 bytes)", errBadQuery)
	}
	e := s.entry(c, "anomaly.resolve", "anomaly:"+strconv.FormatInt(id, 10))
	a, err := s.db.ResolveAnomalyAudited(c.Request().Context(), id, e.Actor, in.Note, e.At, e)
	if errors.Is(err, payment.ErrConflict) {
		return fmt.Errorf("%w: by %s at %s", errAlreadyResolved, a.ResolvedBy, a.ResolvedAt.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, anomalyListViewOf(a))
}

func cursorOf(c echo.Context) (int64, error) {
	v := c.QueryParam("cursor")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: cursor must be a next_cursor from a previous page", errBadQuery)
	}
	return n, nil
}

// unresolvedOf reads ?resolved=: false lists only the unresolved anomalies; absent (or true)
// lists them all.
func unresolvedOf(c echo.Context) (bool, error) {
	switch c.QueryParam("resolved") {
	case "", "true":
		return false, nil
	case "false":
		return true, nil
	}
	return false, fmt.Errorf("%w: resolved must be false (only unresolved) or absent", errBadQuery)
}

// pathID is the {id} of a path: a positive integer, or no such thing (404).
func pathID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, payment.ErrNotFound
	}
	return id, nil
}

// idAndBody reads a POST to an {id}'s path: the id (pathID) and the canonical JSON body.
func (s *Server) idAndBody(c echo.Context) (int64, []byte, error) {
	id, err := pathID(c)
	if err != nil {
		return 0, nil, err
	}
	canonical, err := s.readJSON(c)
	return id, canonical, err
}

// pageOf is one page of a paginated answer: the rows' views ([] for none, never null) and
// its next_cursor, the last row's id when the page is full, "" on the last page.
func pageOf[T, V any](rows []T, limit int, view func(T) V, id func(T) int64) ([]V, string) {
	views := make([]V, 0, len(rows))
	for _, r := range rows {
		views = append(views, view(r))
	}
	if len(rows) == 0 || len(rows) != limit {
		return views, ""
	}
	return views, strconv.FormatInt(id(rows[len(rows)-1]), 10)
}
