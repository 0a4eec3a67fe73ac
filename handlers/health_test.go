package handlers

import (
	"strings"
	"testing"
)

func TestHealthAndReadiness(t *testing.T) {
	cases := []struct {
		name string
		o    options
		code int
		want string
	}{
		{"all up", options{}, 200, `"status":"ready"`},
		{"redis down: degraded but ready", options{redisDown: true}, 200, `"status":"degraded"`},
		{"mysql down: not ready", options{closedDB: true}, 503, `"mysql":"down"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.o)
			if r := h.do("GET", "/healthz", "", nil, ""); r.code != 200 {
				t.Fatalf("healthz = %d", r.code)
			}
			r := h.do("GET", "/readyz", "", nil, "")
			if r.code != tc.code || !strings.Contains(r.body, tc.want) {
				t.Fatalf("readyz = %d %s, want %d with %s", r.code, r.body, tc.code, tc.want)
			}
		})
	}
}
