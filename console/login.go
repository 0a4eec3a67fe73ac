package console

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// TokenField names the login form's token field.
const TokenField = "token"

// maxToken bounds the token a login form may carry.
const maxToken = 512

// invalidToken is all a refused login says: not whether the name, the length or the role was
// wrong.
const invalidToken = "invalid token"

// loginPage is GET /console/login: the form, with a fresh login cookie for its CSRF token.
func (cs *Console) loginPage(c echo.Context) error {
	return cs.loginForm(c, http.StatusOK, "")
}

func (cs *Console) loginForm(c echo.Context, status int, msg string) error {
	nonce := randomHex(16)
	value := cs.seal.seal("login", loginNonce{Nonce: nonce, Expires: cs.now().Add(loginTTL).Unix()})
	c.SetCookie(cookie(LoginCookie, value, loginTTL, secure(c)))
	return cs.render(c, status, "login", "Log in", struct {
		CSRF, Error string
	}{cs.seal.loginCSRF(nonce), msg})
}

// login is POST /console/login: token=...&csrf=...; a session cookie and the search page, or
// the form again saying "invalid token" and nothing more.
func (cs *Console) login(tokens Tokens) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := readForm(c); err != nil {
			return cs.loginForm(c, http.StatusBadRequest, "The form could not be read.")
		}
		var nonce string
		if ck, err := c.Cookie(LoginCookie); err == nil {
			nonce = ck.Value
		}
		form := c.Request().PostForm
		if !cs.seal.checkLogin(nonce, form.Get(CSRFField), cs.now()) {
			return cs.loginForm(c, http.StatusForbidden, "The form has expired. Try again.")
		}
		secret, ok := loginToken(form.Get(TokenField))
		var id Identity
		if ok {
			id, ok = tokens.Identify(secret)
		}
		if !ok {
			cs.log.Info().Str("request_id", requestID(c)).Msg("console login refused: invalid token")
			return cs.loginForm(c, http.StatusUnauthorized, invalidToken)
		}
		tokens.Attribute(c, id.Name)
		s := session{Name: id.Name, Bind: cs.seal.bind(id.Digest), Expires: cs.now().Add(cs.cfg.SessionTTL).Unix(), CSRF: randomHex(16)}
		c.SetCookie(cookie(SessionCookie, cs.seal.seal("session", s), cs.cfg.SessionTTL, secure(c)))
		c.SetCookie(cookie(LoginCookie, "", 0, secure(c)))
		cs.log.Info().Str("token_name", id.Name).Str("request_id", requestID(c)).Msg("console login")
		return c.Redirect(http.StatusSeeOther, Prefix+"/search")
	}
}

// loginToken reads the token field: surrounding spaces (a paste) go; empty, too long, or
// holding anything but printable ASCII is no token.
func loginToken(raw string) (string, bool) {
	s := raw
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	if s == "" || len(s) > maxToken {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "", false
		}
	}
	return s, true
}

// logout is POST /console/logout: the session cookie goes.
func (cs *Console) logout(c echo.Context) error {
	u := c.Get(userKey).(user)
	if refused, err := cs.refuseForm(c, u); refused {
		return err
	}
	c.SetCookie(cookie(SessionCookie, "", 0, secure(c)))
	return c.Redirect(http.StatusSeeOther, Prefix+"/login")
}

// home is GET /console: the search page.
func (cs *Console) home(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, Prefix+"/search")
}
