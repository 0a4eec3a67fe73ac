package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
)

const (
	clientKey = "paygw.client" // the token's name
	rolesKey  = "paygw.roles"  // the token's roles
	roleKey   = "paygw.role"   // the role that allowed this call
)

// auth accepts `Authorization: Bearer <token>` for a configured token and remembers its name,
// which scopes the client's idempotency keys, then lets the call through only when one of the
// token's roles holds the route's capability (routeCaps). Digests of equal length are compared,
// every one of them, in constant time: the answer's timing tells neither which token nearly
// matched nor how long the tokens are.
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, ok := s.identify(c.Request().Header.Values("Authorization"))
		if !ok {
			hint := `Bearer realm="paygw"`
			if t.name == "" && t.digest != [sha256.Size]byte{} {
				hint += `, error="invalid_token"`
			}
			c.Response().Header().Set("WWW-Authenticate", hint)
			return errUnauthorized
		}
		c.Set(clientKey, t.name)
		c.Set(rolesKey, t.roles)
		return s.authorize(c, t.roles, next)
	}
}

// identify finds the token a request's Authorization values carry. Exactly one header: with
// two, a proxy and we could each read another. Without a bearer token the digest stays zero.
func (s *Server) identify(values []string) (token, bool) {
	if len(values) != 1 {
		values = []string{""}
	}
	scheme, given, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || given == "" {
		return token{}, false
	}
	found := token{digest: sha256.Sum256([]byte(given))}
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(found.digest[:], t.digest[:]) == 1 {
			found = t
		}
	}
	return found, found.name != ""
}

// authorize runs next when one of roles holds the capability routeCaps gives the matched route.
// A registered route without an entry is refused (the routes test keeps that from happening);
// a path echo does not route goes on to its 404 or 405.
func (s *Server) authorize(c echo.Context, roles []access.Role, next echo.HandlerFunc) error {
	key := c.Request().Method + " " + c.Path()
	need, listed := routeCaps[key]
	if !listed {
		if s.routed[key] {
			return &forbiddenError{method: c.Request().Method, route: c.Path()}
		}
		return next(c)
	}
	role, ok := access.Granting(roles, need)
	if !ok {
		return &forbiddenError{method: c.Request().Method, route: c.Path(), need: need}
	}
	c.Set(roleKey, role)
	return next(c)
}

// forbiddenError is a call outside the token's roles: 403, naming the roles that may make it.
type forbiddenError struct {
	method, route string
	need          access.Capability // "" for a route no role may call
}

func (e *forbiddenError) Error() string {
	if e.need == "" {
		return fmt.Sprintf("%s %s is open to no role", e.method, e.route)
	}
	roles := access.Needed(e.need)
	return fmt.Sprintf("%s %s needs role %s (%s)", e.method, e.route, access.Names(roles), e.need)
}

// roles are the roles that may make the call, the narrowest first.
func (e *forbiddenError) roles() []access.Role {
	if e.need == "" {
		return nil
	}
	return access.Needed(e.need)
}

// token is an API client with its token's digest and roles; the token itself is not kept.
type token struct {
	name   string
	digest [sha256.Size]byte
	roles  []access.Role
}

func digestTokens(ts []Token) []token {
	out := make([]token, len(ts))
	for i, t := range ts {
		out[i] = token{name: t.Name, digest: t.Digest, roles: t.Roles}
		if t.Secret != "" {
			out[i].digest = sha256.Sum256([]byte(t.Secret))
		}
		if len(t.Roles) == 0 {
			out[i].roles = []access.Role{access.Admin}
		}
	}
	return out
}
