package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

var (
	errTooLarge     = errors.New("request body too large")
	errBadBody      = errors.New("request body could not be read")
	errUnauthorized = errors.New("missing or invalid bearer token")
	errNoKey        = errors.New("idempotency key required")
	errBadKey       = errors.New("idempotency key must be 1-128 printable ASCII characters")
)

// problem is an RFC 9457 problem document. Type names the situation, one URI each (listed in
// the README), so a client can branch on it alone.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Role and Roles, on a 403: the narrowest role that may make the call, and every one that may.
	Role  access.Role   `json:"role,omitempty"`
	Roles []access.Role `json:"roles,omitempty"`
	// Open and OpenCount, on a refused sign-off: the day's open discrepancies (up to 1000 of
	// them, by id and class) and how many there are.
	Open      []repository.OpenItem `json:"open,omitempty"`
	OpenCount int                   `json:"open_count,omitempty"`
}

// The problem types. Each is one situation a client may act on differently.
const (
	typePrefix          = "urn:paygw:problem:"
	typeInvalid         = typePrefix + "invalid-request"         // 400: fix the request
	typeUnauthorized    = typePrefix + "unauthorized"            // 401: send a valid bearer token
	typeForbidden       = typePrefix + "forbidden"               // 403: a token with the role named
	typeNotFound        = typePrefix + "not-found"               // 404: no such order
	typeUnknownSKU      = typePrefix + "unknown-sku"             // 404: stored and replayed for the key
	typeBodyTimeout     = typePrefix + "body-timeout"            // 408: the body did not arrive whole
	typeInFlight        = typePrefix + "in-flight"               // 409 + Retry-After: ask again
	typeOutOfStock      = typePrefix + "out-of-stock"            // 409: stored and replayed for the key
	typeMerchantIDTaken = typePrefix + "merchant-order-id-taken" // 409: stored and replayed for the key
	typeKeyUsed         = typePrefix + "idempotency-key-used"    // 409: return_original_result is off
	typeNotPayable      = typePrefix + "order-not-payable"       // 409: the order is PAID or CLOSED
	typeAlreadyResolved = typePrefix + "already-resolved"        // 409: the anomaly or discrepancy is no longer open
	typeOpenItems       = typePrefix + "open-discrepancies"      // 409: resolve the day's open discrepancies first
	typeSignedOff       = typePrefix + "already-signed-off"      // 409: the day is signed off
	typeTooLarge        = typePrefix + "body-too-large"          // 413
	typeKeyReused       = typePrefix + "idempotency-key-reused"  // 422: same key, another payload
	typeUnavailable     = typePrefix + "unavailable"             // 503: our fault; retry with the same key
)

// problemOf is the one table from errors to HTTP answers.
func problemOf(err error) problem {
	var done *orders.Done
	var he *echo.HTTPError
	var fe *forbiddenError
	var open *repository.OpenError
	switch {
	case errors.As(err, &fe):
		return forbiddenProblem(fe)
	case errors.Is(err, errTooLarge):
		return newProblem(typeTooLarge, http.StatusRequestEntityTooLarge, "body too large", err)
	case errors.Is(err, errBadBody):
		return newProblem(typeBodyTimeout, http.StatusRequestTimeout, "body not received", err)
	case errors.Is(err, orders.ErrBadJSON), errors.Is(err, orders.ErrInvalid),
		errors.Is(err, errNoKey), errors.Is(err, errBadKey), errors.Is(err, errBadStock), errors.Is(err, errBadAttempt),
		errors.Is(err, errBadQuery), errors.Is(err, channels.ErrCurrency):
		return newProblem(typeInvalid, http.StatusBadRequest, "invalid request", err)
	case errors.Is(err, errUnauthorized):
		return newProblem(typeUnauthorized, http.StatusUnauthorized, "unauthorized", err)
	case errors.Is(err, orders.ErrUnknownSKU):
		return newProblem(typeUnknownSKU, http.StatusNotFound, "unknown sku", err)
	case errors.Is(err, payment.ErrNotFound):
		return newProblem(typeNotFound, http.StatusNotFound, "not found", err)
	case errors.Is(err, payment.ErrOutOfStock):
		return newProblem(typeOutOfStock, http.StatusConflict, "out of stock", err)
	case errors.Is(err, orders.ErrMerchantOrderIDTaken):
		return newProblem(typeMerchantIDTaken, http.StatusConflict, "merchant_order_id taken", err)
	case errors.Is(err, payment.ErrInFlight):
		return newProblem(typeInFlight, http.StatusConflict, "request in progress", err)
	case errors.As(err, &done):
		return newProblem(typeKeyUsed, http.StatusConflict, "idempotency key already used", err)
	case errors.Is(err, errAlreadyResolved):
		return newProblem(typeAlreadyResolved, http.StatusConflict, "already resolved", err)
	case errors.As(err, &open):
		p := newProblem(typeOpenItems, http.StatusConflict, "open discrepancies", err)
		p.Open, p.OpenCount = open.Open, open.Count
		return p
	case errors.Is(err, errAlreadySignedOff):
		return newProblem(typeSignedOff, http.StatusConflict, "already signed off", err)
	case errors.Is(err, orders.ErrNotPayable):
		return newProblem(typeNotPayable, http.StatusConflict, "order not waiting for payment", err)
	case errors.Is(err, orders.ErrKeyReused):
		return newProblem(typeKeyReused, http.StatusUnprocessableEntity, "idempotency key reused", err)
	case errors.As(err, &he):
		// echo's own answers (no such route, method not allowed): the status says it all.
		return problem{Type: "about:blank", Title: http.StatusText(he.Code), Status: he.Code, Detail: fmt.Sprint(he.Message)}
	default:
		// Our own failure: never a 4xx, and never the internal error text.
		return problem{Type: typeUnavailable, Title: "service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "paygw could not finish the request; retry later"}
	}
}

func forbiddenProblem(fe *forbiddenError) problem {
	p := newProblem(typeForbidden, http.StatusForbidden, "forbidden", fe)
	if p.Roles = fe.roles(); len(p.Roles) > 0 {
		p.Role = p.Roles[0]
	}
	return p
}

func newProblem(typ string, status int, title string, err error) problem {
	return problem{Type: typ, Title: title, Status: status, Detail: err.Error()}
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
	ev.Err(err).Str("request_id", requestIDOf(c)).Str("method", c.Request().Method).Str("path", c.Path()).Int("status", p.Status).Msg("request refused")
	if p.Type == typeInFlight {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(orders.RetryAfter.Seconds())))
	}
	_ = writeProblem(c, p)
}

func writeProblem(c echo.Context, p problem) error {
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	return c.JSON(p.Status, p)
}
