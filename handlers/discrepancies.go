package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// The discrepancy workflow: a discrepancy's stable id and status across its day's runs, a
// person's decision on it, and the day's sign-off (repository/items.go).

var (
	errAlreadySignedOff = errors.New("day already signed off")
	// errOpenDiscrepancies wraps a *repository.OpenError: a sign-off refused while any
	// discrepancy of the day is open.
	errOpenDiscrepancies = errors.New("open discrepancies")
)

type repairedView struct {
	RunID   int64  `json:"run_id"`
	Outcome string `json:"outcome"`
}

// discrepancyView is a discrepancy as the API lists it: the repository's item, less the day's
// keys (the run names them), with the repair nested under repaired.
type discrepancyView struct {
	ID int64 `json:"id"`
	repository.Finding
	Status     string                 `json:"status"`
	Found      bool                   `json:"found"`
	FirstRunID int64                  `json:"first_run_id"`
	LastRunID  int64                  `json:"last_run_id"`
	Repaired   *repairedView          `json:"repaired,omitempty"`
	GoneRunID  *int64                 `json:"gone_run_id,omitempty"`
	Resolution *repository.Resolution `json:"resolution,omitempty"`
}

func discrepancyViewOf(d repository.DiscrepancyItem) discrepancyView {
	v := discrepancyView{ID: d.ID, Finding: d.Finding, Status: d.Status, Found: d.Found, FirstRunID: d.FirstRunID,
		LastRunID: d.LastRunID, GoneRunID: d.GoneRunID, Resolution: d.Resolution}
	if d.RepairedRunID != nil {
		v.Repaired = &repairedView{RunID: *d.RepairedRunID, Outcome: d.RepairedOutcome}
	}
	return v
}

// resolveInput is the body of POST /v1/discrepancies/{id}/resolve.
type resolveInput struct {
	Action string `json:"action"`
	Note   string `json:"note"`
}

// parseResolve reads a resolve body (canonical JSON): a known action and a note of 1-512 bytes,
// nothing else.
func parseResolve(canonical []byte) (resolveInput, error) {
	var in resolveInput
	if err := decodeStrict(canonical, &in); err != nil {
		return in, fmt.Errorf("%w: send {\"action\": \"accept_channel|accept_local|write_off|refunded_offline\", \"note\": \"...\"}", errBadQuery)
	}
	if err := reconcile.CheckResolve(in.Action, in.Note); err != nil {
		return in, fmt.Errorf("%w: %v", errBadQuery, err)
	}
	return in, nil
}

// resolveDiscrepancy is POST /v1/discrepancies/{id}/resolve {"action", "note"}: records who (the
// token's name), when, the action and the note. accept_channel (CHANNEL_ONLY and
// REFUND_CHANNEL_ONLY only) applies the bill's line through Apply; the others move no money, and
// the answer says which it was. A discrepancy that is not open is a 409.
func (s *Server) resolveDiscrepancy(c echo.Context) error {
	id, canonical, err := s.idAndBody(c)
	if err != nil {
		return err
	}
	in, err := parseResolve(canonical)
	if err != nil {
		return err
	}
	e := s.entry(c, "discrepancy.resolve", "discrepancy:"+strconv.FormatInt(id, 10))
	d, err := reconcile.ResolveDiscrepancy(c.Request().Context(), s.db, s.applier, id, in.Action, in.Note, e)
	switch {
	case errors.Is(err, payment.ErrConflict):
		return fmt.Errorf("%w: discrepancy %d is %s%s", errAlreadyResolved, id, d.Status, resolvedBy(d))
	case errors.Is(err, reconcile.ErrWrongClass), errors.Is(err, reconcile.ErrBadResolve):
		return fmt.Errorf("%w: %v", errBadQuery, err)
	case err != nil:
		return err
	}
	out := struct {
		discrepancyView
		MoneyMoved bool   `json:"money_moved"`
		Effect     string `json:"effect"`
	}{discrepancyView: discrepancyViewOf(d), MoneyMoved: reconcile.MovesMoney(d.Resolution)}
	switch {
	case in.Action != reconcile.ActionAcceptChannel:
		out.Effect = "recorded only: " + in.Action + " changes no money in paygw"
	case out.MoneyMoved:
		out.Effect = "applied: the bill's line was applied through the apply path (" + d.Resolution.Outcome + ")"
	default:
		out.Effect = "applied through the apply path, which changed nothing (" + d.Resolution.Outcome + ")"
	}
	return c.JSON(http.StatusOK, out)
}

func resolvedBy(d repository.DiscrepancyItem) string {
	switch {
	case d.Resolution != nil:
		return fmt.Sprintf(" (%s by %s at %s)", d.Resolution.Action, d.Resolution.By, d.Resolution.At.UTC().Format(time.RFC3339))
	case d.Status == repository.StatusRepaired && d.RepairedRunID != nil:
		return fmt.Sprintf(" (%s by run %d)", d.RepairedOutcome, *d.RepairedRunID)
	case d.Status == repository.StatusGone && d.GoneRunID != nil:
		return fmt.Sprintf(" (since run %d)", *d.GoneRunID)
	}
	return ""
}

// channelName is what a channel's name looks like in a path: it is compared with stored runs,
// never used otherwise.
var channelName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)

// parseDay reads the {channel}/{date} of a day's path: a channel name and a YYYY-MM-DD date.
func parseDay(channel, date string) (time.Time, error) {
	if !channelName.MatchString(channel) {
		return time.Time{}, fmt.Errorf("%w: channel must be a channel's name", errBadQuery)
	}
	day, err := time.Parse(time.DateOnly, date)
	if err != nil || day.Format(time.DateOnly) != date {
		return time.Time{}, fmt.Errorf("%w: date must be YYYY-MM-DD", errBadQuery)
	}
	return day, nil
}

// parseSignOff reads a sign-off body: {"note"} of at most 512 bytes (it may be empty).
func parseSignOff(canonical []byte) (string, error) {
	var in struct {
		Note string `json:"note"`
	}
	if err := decodeStrict(canonical, &in); err != nil || len(in.Note) > 512 {
		return "", fmt.Errorf("%w: send {\"note\": \"...\"} (at most 512 bytes)", errBadQuery)
	}
	return in.Note, nil
}

type signOffView struct {
	Channel       string     `json:"channel"`
	BillDate      string     `json:"bill_date"`
	Status        string     `json:"status"`
	SignedOffBy   string     `json:"signed_off_by"`
	SignedOffAt   time.Time  `json:"signed_off_at"`
	Note          string     `json:"note"`
	ReopenedAt    *time.Time `json:"reopened_at,omitempty"`
	ReopenedRunID *int64     `json:"reopened_run_id,omitempty"`
	ReopenCount   int        `json:"reopen_count"`
}

func signOffViewOf(s repository.SignOff) signOffView {
	return signOffView{Channel: s.Channel, BillDate: s.BillDate, Status: s.Status, SignedOffBy: s.SignedOffBy, SignedOffAt: s.SignedOffAt,
		Note: s.Note, ReopenedAt: s.ReopenedAt, ReopenedRunID: s.ReopenedRunID, ReopenCount: s.ReopenCount}
}

// signOff is POST /v1/reconciliations/{channel}/{date}/signoff {"note"}: a person signs the day
// off. Refused (409, the problem's open member listing them) while any discrepancy of the day is
// open; 409 already-signed-off when it is; 404 when the day has no complete run. A later run
// that finds something new reopens the day.
func (s *Server) signOff(c echo.Context) error {
	channel, date := c.Param("channel"), c.Param("date")
	day, err := parseDay(channel, date)
	if err != nil {
		return err
	}
	canonical, err := s.readJSON(c)
	if err != nil {
		return err
	}
	note, err := parseSignOff(canonical)
	if err != nil {
		return err
	}
	e := s.entry(c, "reconciliation.signoff", "reconciliation:"+channel+"/"+date)
	so, err := s.db.SignOffDay(c.Request().Context(), channel, day, e.Actor, note, e.At, e)
	var open *repository.OpenError
	switch {
	case errors.As(err, &open):
		return fmt.Errorf("%w: %w", errOpenDiscrepancies, open)
	case errors.Is(err, payment.ErrConflict):
		return fmt.Errorf("%w: by %s at %s", errAlreadySignedOff, so.SignedOffBy, so.SignedOffAt.UTC().Format(time.RFC3339))
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, signOffViewOf(so))
}
