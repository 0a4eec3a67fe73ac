package handlers

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/payment"
)

// The pull feed: GET /v1/events?after=CURSOR&type=&limit=&wait=.
const (
	feedLimit    = 100              // events per page unless limit says
	feedMaxLimit = 1000             // the most limit may ask
	feedMaxWait  = 30 * time.Second // the longest wait may ask
	// feedMaxWindows bounds the filtered reads behind one request that finds nothing; its empty
	// page's cursor says how far they went.
	feedMaxWindows = 10
	// feedPoll is how often a long poll reads the feed again when no sequencer in this process
	// wakes it (another replica numbers the events).
	feedPoll = 500 * time.Millisecond
)

// feedQuery is a parsed feed request: events after seq after, of types (all when empty).
type feedQuery struct {
	after int64
	types []string
	limit int
	wait  time.Duration
}

// cursorPrefix versions the cursor's inside, which clients must not read: a next_cursor is
// base64url("e1:" + the last seq served).
const cursorPrefix = "e1:"

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seq, 10)))
}

// decodeCursor reads a next_cursor ("" is the feed's start).
func decodeCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	bad := fmt.Errorf("%w: after must be a next_cursor from a previous page", errBadQuery)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 40 {
		return 0, bad
	}
	digits, ok := bytes.CutPrefix(raw, []byte(cursorPrefix))
	if !ok || len(digits) == 0 {
		return 0, bad
	}
	seq, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil || seq < 0 || encodeCursor(seq) != s { // one spelling per cursor
		return 0, bad
	}
	return seq, nil
}

// parseFeedQuery checks every parameter; anything it does not know is refused, so that a
// misspelt filter is not silently ignored.
func parseFeedQuery(v url.Values) (feedQuery, error) {
	q := feedQuery{limit: feedLimit}
	for k, vs := range v {
		if !slices.Contains([]string{"after", "type", "limit", "wait"}, k) {
			return q, fmt.Errorf("%w: unknown parameter %q (after, type, limit, wait)", errBadQuery, k)
		}
		if len(vs) > 1 {
			return q, fmt.Errorf("%w: %s given %d times", errBadQuery, k, len(vs))
		}
	}
	var err error
	if q.after, err = decodeCursor(v.Get("after")); err != nil {
		return q, err
	}
	if t := v.Get("type"); t != "" {
		for _, typ := range strings.Split(t, ",") {
			if !slices.Contains(payment.EventTypes, typ) {
				return q, fmt.Errorf("%w: type must be a comma-separated list of %s", errBadQuery, strings.Join(payment.EventTypes, ", "))
			}
			if !slices.Contains(q.types, typ) {
				q.types = append(q.types, typ)
			}
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > feedMaxLimit {
			return q, fmt.Errorf("%w: limit must be 1-%d", errBadQuery, feedMaxLimit)
		}
		q.limit = n
	}
	if w := v.Get("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 || d > feedMaxWait {
			return q, fmt.Errorf("%w: wait must be a duration from 0s to %s", errBadQuery, feedMaxWait)
		}
		q.wait = d
	}
	return q, nil
}

// listEvents is GET /v1/events: the sequenced events after the cursor in commit order, each
// body exactly as stored, and the cursor to ask with next (the same one when there was none). With
// wait, an empty page is held until an event arrives or wait runs out: woken by this process's
// sequencer, or reading the feed again every feedPoll.
func (s *Server) listEvents(c echo.Context) error {
	q, err := parseFeedQuery(c.QueryParams())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	deadline := s.now().Add(q.wait)
	if q.wait > 0 { // the server's write timeout would cut a long poll off
		_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(q.wait + 10*time.Second))
	}
	windows := 1 // the filtered reads this request made: each passes over a bounded window
	for {
		var changed <-chan struct{}
		if s.cfg.EventsChanged != nil {
			changed = s.cfg.EventsChanged() // before the read: a numbering after it still wakes us
		}
		page, err := s.db.Events(ctx, q.after, q.types, q.limit)
		if err != nil {
			return err
		}
		if page.More && len(page.Events) == 0 && windows < feedMaxWindows {
			q.after = page.Through // the filter matched nothing in a window: the next one, now
			windows++
			continue
		}
		left := deadline.Sub(s.now())
		if len(page.Events) > 0 || page.More || left <= 0 {
			return writeFeed(c, page.Events, page.Through)
		}
		q.after = page.Through // what the filter passed over is not read again
		t := time.NewTimer(min(left, feedPoll))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return writeFeed(c, nil, q.after) // the client is gone; nothing to serve
		case <-s.stopping:
			t.Stop()
			return writeFeed(c, nil, q.after) // shutting down: the client asks again elsewhere
		}
		t.Stop()
	}
}

// writeFeed writes {"events":[...],"next_cursor":"..."} with each event's stored bytes as they
// are; the cursor is through, how far the read went.
func writeFeed(c echo.Context, evs []payment.OutboxEvent, through int64) error {
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.Body)
	}
	b.WriteString(`],"next_cursor":"` + encodeCursor(through) + `"}`)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b.Bytes())
}
