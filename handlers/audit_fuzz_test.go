package handlers

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/paygw/paygw/repository"
)

// FuzzAuditQuery feeds any query string to GET /v1/audit's parser: it never panics, refuses with
// errBadQuery only, and what it accepts is a query it would read back the same: a cursor of one
// spelling, filters within the columns' widths, one page.
func FuzzAuditQuery(f *testing.F) {
	seeds := []string{"", "target=stock:A-1", "actor=cli:root&cursor=100", "cursor=01", "cursor=-1",
		"cursor=9223372036854775808", "user=x", "actor=a&actor=b", "target=%ff%00", "cursor=+5"}
	fuzzQuery(f, seeds, parseAuditQuery, func(t *testing.T, raw string, v url.Values, q repository.AuditQuery) {
		if q.Limit != pageSize || q.Cursor < 0 || len(q.Target) > 191 || len(q.Actor) > 80 {
			t.Fatalf("%q: accepted %+v", raw, q)
		}
		if c := v.Get("cursor"); c != "" && strconv.FormatInt(q.Cursor, 10) != c {
			t.Fatalf("%q: cursor %q read as %d", raw, c, q.Cursor)
		}
		if q.Target != v.Get("target") || q.Actor != v.Get("actor") {
			t.Fatalf("%q: filters %+v", raw, q)
		}
	})
}
