package handlers

import (
	"slices"
	"testing"
	"time"

	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/reconcile"
)

// FuzzResolveBody feeds any body to POST /v1/discrepancies/{id}/resolve's parser, as the handler
// reads it (canonical JSON first): it never panics, refuses with errBadQuery only, and accepts
// only a known action with a note of 1-512 bytes.
func FuzzResolveBody(f *testing.F) {
	for _, s := range []string{`{"action":"accept_channel","note":"ticket 7"}`, `{"action":"write_off","note":""}`,
		`{"action":"shrug","note":"x"}`, `{"action":"accept_local","note":"x","by":"me"}`, `{"note":"x"}`, `[]`, `null`,
		`{"action":"refunded_offline","note":"\u0000"}`, `{"action":"accept_local","note":"x"} {}`, `{"action":1,"note":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		canonical, err := orders.Canonical(body)
		if err != nil {
			return // the handler refuses it before the parser
		}
		in, err := parseResolve(canonical)
		if !accepted(t, body, err) {
			return
		}
		if !slices.Contains(reconcile.Actions, in.Action) || in.Note == "" || len(in.Note) > 512 {
			t.Fatalf("%q: accepted %+v", body, in)
		}
	})
}

// FuzzSignOffParams feeds any {channel}/{date} and body to the sign-off's parsers: they never
// panic, refuse with errBadQuery only, and accept a channel name of the shape channels have and
// a date of one spelling, YYYY-MM-DD.
func FuzzSignOffParams(f *testing.F) {
	for _, s := range [][3]string{{"alipay", "2026-11-30", `{"note":"ok"}`}, {"ALIPAY", "2026-11-30", `{}`}, {"alipay", "2026-2-3", `{}`},
		{"a/b", "2026-11-30", `{}`}, {"wechatpay", "2026-02-30", `{"note":1}`}, {"", "", ``}, {"stripe", "+2026-11-30", `{"x":1}`},
		{"unionpay", "2026-11-30T00:00:00Z", `{}`}} {
		f.Add(s[0], s[1], []byte(s[2]))
	}
	f.Fuzz(func(t *testing.T, channel, date string, body []byte) {
		day, err := parseDay(channel, date)
		if accepted(t, channel+"/"+date, err) && (!channelName.MatchString(channel) || day.Format(time.DateOnly) != date || day.Location() != time.UTC) {
			t.Fatalf("%q %q: accepted as %v", channel, date, day)
		}
		canonical, err := orders.Canonical(body)
		if err != nil {
			return
		}
		note, err := parseSignOff(canonical)
		if accepted(t, body, err) && len(note) > 512 {
			t.Fatalf("%q: accepted a note of %d bytes", body, len(note))
		}
	})
}
