package handlers

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// The CSV exports stream: rows are written as they are read, a page of the database at a time,
// and flushed every exportFlush rows, so memory stays flat whatever the size. Once the first
// row is out, a failure can only cut the answer short (the status is sent): the last line is
// then not a complete row, and the client sees a truncated file rather than a wrong one.

const exportFlush = 500

// cell makes a text cell safe for a spreadsheet: one starting with = + - @ (or a tab or carriage
// return) is a formula to Excel and LibreOffice, and channel-sent text is attacker-controlled,
// so it is prefixed with ' (OWASP's CSV injection advice). Numbers paygw formats are not text.
func cell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

func optFen(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

func optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// csvStream starts a CSV answer named filename and returns its writer and a function that
// writes one row, flushing every exportFlush rows.
func csvStream(c echo.Context, filename string) (*csv.Writer, func([]string) error) {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", filename))
	h.Set("X-Content-Type-Options", "nosniff")
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	n := 0
	return w, func(row []string) error {
		if err := w.Write(row); err != nil {
			return err
		}
		if n++; n%exportFlush == 0 {
			w.Flush()
			if err := w.Error(); err != nil {
				return err
			}
			c.Response().Flush()
		}
		return nil
	}
}

// discrepancyHeader is the CSV export's header: the listing's fields, flat.
var discrepancyHeader = []string{"id", "status", "found", "class", "trade_no", "channel_txn_id", "bill_amount_fen", "local_amount_fen",
	"currency", "local_status", "repair", "detail", "first_run_id", "last_run_id", "repaired_run_id", "repaired_outcome", "gone_run_id",
	"resolve_action", "resolve_note", "resolved_by", "resolved_at", "resolve_outcome"}

func discrepancyRow(d repository.DiscrepancyItem) []string {
	row := []string{strconv.FormatInt(d.ID, 10), d.Status, strconv.FormatBool(d.Found), cell(d.Class), cell(d.TradeNo),
		cell(d.ChannelTxnID), optFen(d.BillAmountFen), optFen(d.LocalAmountFen), cell(d.Currency), cell(d.LocalStatus), cell(d.Repair),
		cell(d.Detail), strconv.FormatInt(d.FirstRunID, 10), strconv.FormatInt(d.LastRunID, 10), optFen(d.RepairedRunID),
		cell(d.RepairedOutcome), optFen(d.GoneRunID), "", "", "", "", ""}
	if r := d.Resolution; r != nil {
		at := r.At
		copy(row[17:], []string{cell(r.Action), cell(r.Note), cell(r.By), optTime(&at), cell(r.Outcome)})
	}
	return row
}

// exportDiscrepancies is GET /v1/reconciliations/{id}/discrepancies.csv?class=: the run's
// listing (listDiscrepancies) as CSV, streamed.
func (s *Server) exportDiscrepancies(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	run, err := s.db.GetRun(ctx, id)
	if err != nil {
		return err
	}
	w, write := csvStream(c, fmt.Sprintf("discrepancies-%s-%s-run%d.csv", run.Channel, run.BillDate.Format(time.DateOnly), run.ID))
	if err := write(discrepancyHeader); err != nil {
		return err
	}
	err = s.db.EachDiscrepancy(ctx, id, c.QueryParam("class"), func(d repository.DiscrepancyItem) error {
		return write(discrepancyRow(d))
	})
	w.Flush()
	return s.streamEnd(c, "discrepancies.csv", err, w.Error())
}

var anomalyHeader = []string{"id", "kind", "trade_no", "channel", "channel_txn_id", "amount_fen", "currency", "expected_amount_fen",
	"detail", "created_at", "resolved_by", "resolved_at", "resolve_note"}

func anomalyRow(a payment.Anomaly) []string {
	return []string{strconv.FormatInt(a.ID, 10), cell(string(a.Kind)), cell(a.TradeNo), cell(a.Channel), cell(a.ChannelTxnID),
		strconv.FormatInt(a.AmountFen, 10), cell(a.Currency), optFen(a.ExpectedAmountFen), cell(a.Detail),
		a.CreatedTime.UTC().Format(time.RFC3339Nano), cell(a.ResolvedBy), optTime(a.ResolvedAt), cell(a.ResolveNote)}
}

// exportAnomalies is GET /v1/anomalies.csv?kind=&resolved=false: the anomalies as CSV, streamed.
func (s *Server) exportAnomalies(c echo.Context) error {
	unresolved, err := unresolvedOf(c)
	if err != nil {
		return err
	}
	w, write := csvStream(c, "anomalies.csv")
	if err := write(anomalyHeader); err != nil {
		return err
	}
	err = s.db.EachAnomaly(c.Request().Context(), c.QueryParam("kind"), unresolved, func(a payment.Anomaly) error {
		return write(anomalyRow(a))
	})
	w.Flush()
	return s.streamEnd(c, "anomalies.csv", err, w.Error())
}

// streamEnd logs a stream cut short: the status is sent, so the error handler cannot answer.
func (s *Server) streamEnd(c echo.Context, what string, errs ...error) error {
	for _, err := range errs {
		if err != nil {
			s.log.Error().Err(err).Str("request_id", requestIDOf(c)).Str("export", what).Msg("export cut short")
			return nil
		}
	}
	return nil
}
