package console

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseQuery: the search box never panics; what it accepts is trimmed, printable, at most
// maxQuery bytes, a trade_no only when it has the shape, a user id only when it is the integer's
// own spelling.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "P20261205131519afc9e33b71a6c61f", "  2026abc  ", "12345", "-1", "007", "shop-1",
		"<script>alert(1)</script>", "a\x00b", strings.Repeat("x", 129), "\u200b", "订单-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(raw)
		if err != nil {
			return
		}
		if q.Text != strings.TrimSpace(q.Text) || len(q.Text) > maxQuery || !utf8.ValidString(q.Text) {
			t.Fatalf("accepted %q as %q", raw, q.Text)
		}
		if q.HasUserID && strconv.FormatInt(q.UserID, 10) != q.Text {
			t.Fatalf("user id %d from %q", q.UserID, q.Text)
		}
		if q.TradeNo && strings.ContainsAny(q.Text, " <>\"'&") {
			t.Fatalf("trade_no %q", q.Text)
		}
	})
}

// FuzzLoginToken: the login form's token field never panics, and what it hands on is printable
// ASCII of at most maxToken bytes without surrounding spaces.
func FuzzLoginToken(f *testing.F) {
	for _, s := range []string{"", "  tok-0123456789abcdef \n", "a\x00b", "Bearer x", strings.Repeat("a", 600), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, ok := loginToken(raw)
		if !ok {
			return
		}
		if s == "" || len(s) > maxToken || s != strings.TrimSpace(s) {
			t.Fatalf("accepted %q as %q", raw, s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				t.Fatalf("accepted byte %#x in %q", s[i], s)
			}
		}
	})
}

// FuzzOpenSession: a session cookie is outside input. Whatever it holds, opening it never
// panics, and only a value this key sealed opens.
func FuzzOpenSession(f *testing.F) {
	key := bytes.Repeat([]byte{7}, 32)
	s := sealer{key: key}
	at := time.Unix(1_800_000_000, 0)
	good := s.seal("session", session{Name: "viewer", Bind: "b", Expires: at.Add(time.Hour).Unix(), CSRF: "c"})
	other := sealer{key: bytes.Repeat([]byte{8}, 32)}.seal("session", session{Name: "admin", Bind: "b", Expires: at.Add(time.Hour).Unix(), CSRF: "c"})
	for _, v := range []string{good, other, "", ".", "e30.", good + "x", strings.Replace(good, "e", "f", 1), strings.Repeat("A", 2000)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := s.openSession(value, at)
		if err != nil {
			return
		}
		// It opened: then sealing what it holds again must give a value that opens the same.
		again, err := s.openSession(s.seal("session", got), at)
		if err != nil || again != got {
			t.Fatalf("%q opened as %+v, which does not seal back (%v)", value, got, err)
		}
		if got.Name == "admin" {
			t.Fatalf("a session sealed with another key opened: %q", value)
		}
	})
}
