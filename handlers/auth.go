package handlers

import (
	"crypto/subtle"
	"strings"

	"github.com/labstack/echo/v4"
)

const clientKey = "paygw.client"

// auth accepts `Authorization: Bearer <token>` for a configured token and remembers its name,
// which scopes the client's idempotency keys. Every token is compared, in constant time, so the
// answer's timing says nothing about which one nearly matched.
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		given, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
		if !ok || given == "" {
			return errUnauthorized
		}
		name := ""
		for _, t := range s.cfg.Tokens {
			if subtle.ConstantTimeCompare([]byte(given), []byte(t.Secret)) == 1 {
				name = t.Name
			}
		}
		if name == "" {
			return errUnauthorized
		}
		c.Set(clientKey, name)
		return next(c)
	}
}
