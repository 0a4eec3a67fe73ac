package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/repository"
)

var (
	errTooLarge     = errors.New("request body too large")
	errBadBody      = errors.New("request body could not be read")
	errUnauthorized = errors.New("missing or invalid bearer token")
	errNoKey        = errors.New("idempotency key required")
	errBadKey       = errors.New("idempotency key must be 1-128 printable ASCII characters")
)

// problemOf is the one table from errors to HTTP answers.
func problemOf(err error) orders.Problem {
	var done *orders.Done
	var he *echo.HTTPError
	switch {
	case errors.Is(err, errTooLarge):
		return problem(http.StatusRequestEntityTooLarge, "body too large", err)
	case errors.Is(err, errBadBody):
		return problem(http.StatusRequestTimeout, "body not received", err)
	case errors.Is(err, orders.ErrBadJSON), errors.Is(err, orders.ErrInvalid),
		errors.Is(err, errNoKey), errors.Is(err, errBadKey), errors.Is(err, errBadStock):
		return problem(http.StatusBadRequest, "invalid request", err)
	case errors.Is(err, errUnauthorized):
		return problem(http.StatusUnauthorized, "unauthorized", err)
	case errors.Is(err, repository.ErrNotFound):
		return problem(http.StatusNotFound, "not found", err)
	case errors.Is(err, orders.ErrInFlight):
		return problem(http.StatusConflict, "request in progress", err)
	case errors.As(err, &done):
		return problem(http.StatusConflict, "idempotency key already used", err)
	case errors.Is(err, orders.ErrKeyReused):
		return problem(http.StatusUnprocessableEntity, "idempotency key reused", err)
	case errors.As(err, &he):
		return orders.Problem{Type: "about:blank", Title: http.StatusText(he.Code), Status: he.Code, Detail: fmt.Sprint(he.Message)}
	default:
		// Our own failure: never a 4xx, and never the internal error text.
		return orders.Problem{Type: "about:blank", Title: "service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "paygw could not finish the request; retry later"}
	}
}

func problem(status int, title string, err error) orders.Problem {
	return orders.Problem{Type: "about:blank", Title: title, Status: status, Detail: err.Error()}
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemOf(err)
	ev := s.log.Info()
	if p.Status >= 500 {
		ev = s.log.Error()
	}
	ev.Err(err).Str("method", c.Request().Method).Str("path", c.Path()).Int("status", p.Status).Msg("request refused")
	if errors.Is(err, orders.ErrInFlight) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(orders.RetryAfter.Seconds())))
	}
	_ = writeProblem(c, p)
}

func writeProblem(c echo.Context, p orders.Problem) error {
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	return c.JSON(p.Status, p)
}
