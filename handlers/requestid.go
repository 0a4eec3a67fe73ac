package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/api"
)

// RequestIDHeader names the request's id: kept when the caller sent a well-formed one, else
// generated; returned on every reply and carried by every log line the handlers write for it.
const RequestIDHeader = "X-Request-Id"

const requestIDKey = "paygw.request_id"

// maxRequestID bounds a caller's id: a W3C traceparent (55) or a UUID (36) fits with room.
const maxRequestID = 128

// validRequestID: 1-128 characters of [A-Za-z0-9._:+/=-]. Nothing else reaches a log line: no
// controls, no spaces, no quotes.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '+' || c == '/' || c == '=' || c == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID is 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// requestID runs before routing, so unknown routes and every error carry the id too. An id sent
// more than once is replaced: a proxy and we could each take another one.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		values := c.Request().Header.Values(RequestIDHeader)
		id := ""
		if len(values) == 1 && validRequestID(values[0]) {
			id = values[0]
		} else {
			id = newRequestID()
		}
		c.Set(requestIDKey, id)
		c.Response().Header().Set(RequestIDHeader, id)
		return next(c)
	}
}

// requestIDOf is the id requestID gave the request.
func requestIDOf(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}

// openAPI serves api/openapi.yaml: the contract this binary was tested against.
func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", api.OpenAPI)
}
