package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/repository"
)

// entry is the audit row of the write c makes: its token, the role that allowed it, its request
// id. The caller adds the state before and after where there is one.
func (s *Server) entry(c echo.Context, action, target string) access.Entry {
	name, _ := c.Get(clientKey).(string)
	role, _ := c.Get(roleKey).(access.Role)
	return access.Entry{At: s.now().UTC(), Actor: name, Role: role, Action: action, Target: target, RequestID: requestIDOf(c)}
}

// auditAfter appends e right after a change that was not one transaction of ours. The change is
// done whatever happens here, so a failure is logged with the whole row rather than answered.
func (s *Server) auditAfter(c echo.Context, e access.Entry) {
	if err := s.db.AppendAudit(c.Request().Context(), e); err != nil {
		s.log.Error().Err(err).Str("actor", e.Actor).Str("role", string(e.Role)).Str("action", e.Action).
			Str("target", e.Target).Str("request_id", e.RequestID).RawJSON("after", orNull(e.After)).Msg("audit row not written")
	}
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// auditParams are the parameters GET /v1/audit takes.
var auditParams = []string{"target", "actor", "cursor"}

// parseAuditQuery reads ?target=&actor=&cursor=. Anything it does not know is refused, so that a
// misspelt filter does not quietly list everything.
func parseAuditQuery(v url.Values) (repository.AuditQuery, error) {
	q := repository.AuditQuery{Target: v.Get("target"), Actor: v.Get("actor"), Limit: pageSize}
	for k, vs := range v {
		if !slices.Contains(auditParams, k) {
			return q, fmt.Errorf("%w: unknown parameter %q (target, actor, cursor)", errBadQuery, k)
		}
		if len(vs) > 1 {
			return q, fmt.Errorf("%w: %s given %d times", errBadQuery, k, len(vs))
		}
	}
	if len(q.Target) > 191 || len(q.Actor) > 80 {
		return q, fmt.Errorf("%w: target is at most 191 bytes, actor at most 80", errBadQuery)
	}
	if c := v.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != c {
			return q, fmt.Errorf("%w: cursor must be a next_cursor from a previous page", errBadQuery)
		}
		q.Cursor = n
	}
	return q, nil
}

// listAudit is GET /v1/audit?target=&actor=&cursor=: the audit trail, oldest first, a page at a
// time.
func (s *Server) listAudit(c echo.Context) error {
	q, err := parseAuditQuery(c.QueryParams())
	if err != nil {
		return err
	}
	rows, err := s.db.Audit(c.Request().Context(), q)
	if err != nil {
		return err
	}
	entries, next := pageOf(rows, q.Limit, func(e access.Entry) access.Entry { return e }, func(e access.Entry) int64 { return e.ID })
	return c.JSON(http.StatusOK, struct {
		Entries    []access.Entry `json:"entries"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{entries, next})
}

// accessLog writes one line, message "request", per /v1 and /console request, after the error
// handler has answered: the method, echo's route pattern, the status, the time taken, the
// request id and the token's name (never the token).
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		if !logged(c.Request().URL.Path) {
			return nil
		}
		name, _ := c.Get(clientKey).(string)
		s.log.Info().Str("method", c.Request().Method).Str("route", c.Path()).Int("status", c.Response().Status).
			Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Str("request_id", requestIDOf(c)).
			Str("token_name", name).Msg("request")
		return nil
	}
}

// logged: the access log covers the API and the console, not the channels' notify_urls (which
// log their own line) nor the probes.
func logged(path string) bool {
	for _, p := range []string{"/v1", "/console"} {
		if path == p || len(path) > len(p) && path[:len(p)+1] == p+"/" {
			return true
		}
	}
	return false
}
