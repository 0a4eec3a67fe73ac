package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// The cookies. The session cookie holds a signed session; the login cookie holds the nonce the
// login form's CSRF token is derived from, before there is a session.
const (
	SessionCookie = "paygw_console"
	LoginCookie   = "paygw_console_login"
)

// CSRFField names the hidden field every console form carries.
const CSRFField = "csrf"

// loginTTL bounds how long a login form stays usable.
const loginTTL = 15 * time.Minute

// maxCookie bounds what is read of a cookie: a session is about 200 bytes.
const maxCookie = 1024

var (
	errNoSession  = errors.New("no session")
	errBadSession = errors.New("invalid session")
	errExpired    = errors.New("session expired")
)

// session is what the signed cookie holds. Name is the token's name; Bind ties the session to
// the token it was opened with (a keyed digest of the token's SHA-256), so that a token taken
// out of the configuration or rotated ends its sessions. CSRF is the session's form token.
type session struct {
	Name    string `json:"n"`
	Bind    string `json:"b"`
	Expires int64  `json:"e"` // Unix seconds
	CSRF    string `json:"c"`
}

// sealer signs and opens the console's cookies with a server key: HMAC-SHA256 over the value,
// compared in constant time; the expiry is inside what is signed.
type sealer struct {
	key []byte
}

func (s sealer) mac(purpose string, b []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(b)
	return m.Sum(nil)
}

// seal renders v as base64url(JSON) "." base64url(HMAC(purpose, JSON)).
func (s sealer) seal(purpose string, v any) string {
	b, _ := json.Marshal(v) // plain structs of strings and ints: cannot fail
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(s.mac(purpose, b))
}

// open checks value's signature for purpose and decodes it into v.
func (s sealer) open(purpose, value string, v any) error {
	if value == "" {
		return errNoSession
	}
	if len(value) > maxCookie {
		return errBadSession
	}
	body, sig, ok := strings.Cut(value, ".")
	if !ok {
		return errBadSession
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(purpose, b)) {
		return errBadSession
	}
	if json.Unmarshal(b, v) != nil {
		return errBadSession
	}
	return nil
}

// bind is the keyed digest that ties a session to its token's SHA-256.
func (s sealer) bind(digest [sha256.Size]byte) string {
	return hex.EncodeToString(s.mac("bind", digest[:])[:16])
}

// openSession reads and checks the session cookie's value at now.
func (s sealer) openSession(value string, now time.Time) (session, error) {
	var v session
	if err := s.open("session", value, &v); err != nil {
		return session{}, err
	}
	if v.Name == "" || v.CSRF == "" || v.Bind == "" {
		return session{}, errBadSession
	}
	if now.Unix() >= v.Expires {
		return session{}, errExpired
	}
	return v, nil
}

// loginNonce is the login cookie's content.
type loginNonce struct {
	Nonce   string `json:"n"`
	Expires int64  `json:"e"`
}

// loginCSRF is the login form's token for a login cookie's nonce.
func (s sealer) loginCSRF(nonce string) string {
	return hex.EncodeToString(s.mac("login-csrf", []byte(nonce)))
}

// checkLogin reports whether the login form's token matches the login cookie at now.
func (s sealer) checkLogin(cookie, token string, now time.Time) bool {
	var v loginNonce
	if s.open("login", cookie, &v) != nil || v.Nonce == "" || now.Unix() >= v.Expires {
		return false
	}
	return sameToken(token, s.loginCSRF(v.Nonce))
}

// sameToken compares a form's CSRF token with the expected one in constant time.
func sameToken(given, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(given), []byte(want)) == 1
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// cookie is one of the console's cookies: HttpOnly, SameSite=Strict, scoped to /console, Secure
// when the request came over TLS (directly or as the proxy says).
func cookie(name, value string, ttl time.Duration, secure bool) *http.Cookie {
	// #nosec G124 -- Secure follows the request's scheme: set over TLS, and a plain-HTTP console
	// (loopback, a test) could not keep a Secure cookie at all.
	c := &http.Cookie{Name: name, Value: value, Path: "/console", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
	if ttl > 0 {
		c.MaxAge = int(ttl / time.Second)
	} else {
		c.MaxAge = -1 // delete it
	}
	return c
}
