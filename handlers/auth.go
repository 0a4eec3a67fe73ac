package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/labstack/echo/v4"
)

const clientKey = "paygw.client"

// auth accepts `Authorization: Bearer <token>` for a configured token and remembers its name,
// which scopes the client's idempotency keys. Digests of equal length are compared, every one of
// them, in constant time: the answer's timing tells neither which token nearly matched nor how
// long the tokens are.
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// Exactly one Authorization header: with two, a proxy and we could each read another.
		values := c.Request().Header.Values("Authorization")
		if len(values) != 1 {
			values = []string{""}
		}
		scheme, given, ok := strings.Cut(values[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || given == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="paygw"`)
			return errUnauthorized
		}
		digest := sha256.Sum256([]byte(given))
		name := ""
		for _, t := range s.tokens {
			if subtle.ConstantTimeCompare(digest[:], t.digest[:]) == 1 {
				name = t.name
			}
		}
		if name == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="paygw", error="invalid_token"`)
			return errUnauthorized
		}
		c.Set(clientKey, name)
		return next(c)
	}
}

// token is an API client with its token's digest; the token itself is not kept.
type token struct {
	name   string
	digest [sha256.Size]byte
}

func digestTokens(ts []Token) []token {
	out := make([]token, len(ts))
	for i, t := range ts {
		out[i] = token{name: t.Name, digest: sha256.Sum256([]byte(t.Secret))}
	}
	return out
}
