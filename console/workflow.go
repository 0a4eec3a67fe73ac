package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// The discrepancy workflow on the day page: a person resolves a discrepancy, and signs the day
// off once none is open. The same writes as POST /v1/discrepancies/{id}/resolve and
// POST /v1/reconciliations/{channel}/{date}/signoff, audited alike.

// Resolver decides one discrepancy as reconcile.ResolveDiscrepancy does: accept_channel applies
// the bill's line through the apply path, the other actions record the decision only.
type Resolver func(ctx context.Context, id int64, action, note string, e access.Entry) (repository.DiscrepancyItem, error)

// ActionField names the resolve form's action (one of reconcile.Actions).
const ActionField = "action"

// resolveDiscrepancy is POST /console/discrepancies/{id}/resolve action=...&note=...; back to
// the discrepancy on its day's page.
func (cs *Console) resolveDiscrepancy(c echo.Context, u user) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 || cs.resolve == nil {
		return cs.notFound(c)
	}
	form := c.Request().PostForm
	action, note := form.Get(ActionField), strings.TrimSpace(form.Get(NoteField))
	if err := reconcile.CheckResolve(action, note); err != nil {
		return cs.fail(c, http.StatusBadRequest, "Choose an action and write a note of 1 to 512 bytes: "+err.Error()+".")
	}
	e := cs.entry(c, u, "discrepancy.resolve", "discrepancy:"+strconv.FormatInt(id, 10))
	d, err := cs.resolve(c.Request().Context(), id, action, note, e)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return cs.notFound(c)
	case errors.Is(err, payment.ErrConflict):
		return cs.fail(c, http.StatusConflict, fmt.Sprintf("Discrepancy %d is already %s.", id, d.Status))
	case errors.Is(err, reconcile.ErrWrongClass), errors.Is(err, reconcile.ErrBadResolve):
		return cs.fail(c, http.StatusBadRequest, err.Error()+".")
	case err != nil:
		return cs.failed(c, err)
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("%s/reconciliations/%s/%s#discrepancy-%d", Prefix, d.Channel, d.BillDate, id))
}

// signOff is POST /console/reconciliations/{channel}/{date}/signoff note=...: refused while any
// discrepancy of the day is open (the page lists them), then back to the day.
func (cs *Console) signOff(c echo.Context, u user) error {
	channel, date := c.Param("channel"), c.Param("date")
	day, err := time.Parse(time.DateOnly, date)
	if err != nil || day.Format(time.DateOnly) != date || len(channel) > 32 {
		return cs.notFound(c)
	}
	note := strings.TrimSpace(c.Request().PostForm.Get(NoteField))
	if len(note) > 512 {
		return cs.fail(c, http.StatusBadRequest, "A note of at most 512 bytes.")
	}
	e := cs.entry(c, u, "reconciliation.signoff", "reconciliation:"+channel+"/"+date)
	so, err := cs.books.SignOffDay(c.Request().Context(), channel, day, e.Actor, note, e.At, e)
	var open *repository.OpenError
	switch {
	case errors.As(err, &open):
		var ids []string
		for _, o := range open.Open[:min(len(open.Open), 20)] {
			ids = append(ids, fmt.Sprintf("%d (%s)", o.ID, o.Class))
		}
		if len(open.Open) > 20 {
			ids = append(ids, "…")
		}
		return cs.fail(c, http.StatusConflict, fmt.Sprintf("%d discrepancies of the day are open; resolve them first: %s.", open.Count, strings.Join(ids, ", ")))
	case errors.Is(err, payment.ErrConflict):
		return cs.fail(c, http.StatusConflict, "Already signed off by "+so.SignedOffBy+" at "+so.SignedOffAt.UTC().Format(time.RFC3339)+".")
	case errors.Is(err, payment.ErrNotFound):
		return cs.notFound(c)
	case err != nil:
		return cs.failed(c, err)
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/reconciliations/"+channel+"/"+date)
}
