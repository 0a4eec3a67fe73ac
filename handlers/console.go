package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/console"
)

// consoleTokens lets the console (console.Console) log in with the /v1 API tokens and name its
// requests' token in the access log.
type consoleTokens struct{ s *Server }

var _ console.Tokens = consoleTokens{}

// Identify finds the token secret is, as a bearer token is found: every digest compared in
// constant time.
func (t consoleTokens) Identify(secret string) (console.Identity, bool) {
	found, ok := t.s.identify([]string{"Bearer " + secret})
	return console.Identity{Name: found.name, Roles: found.roles, Digest: found.digest}, ok
}

// Named finds the configured token called name.
func (t consoleTokens) Named(name string) (console.Identity, bool) {
	for _, k := range t.s.tokens {
		if k.name == name {
			return console.Identity{Name: k.name, Roles: k.roles, Digest: k.digest}, true
		}
	}
	return console.Identity{}, false
}

// Attribute names the token in the request's access log line.
func (t consoleTokens) Attribute(c echo.Context, name string) { c.Set(clientKey, name) }
